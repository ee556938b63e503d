"""Subscription regexes run in linear time (RE2): a catastrophic pattern cannot stall the server."""

from __future__ import annotations

import pytest

from coordinator.core.consumer.regex import RegexError, compile_topic_regex
from coordinator.core.group_settings import BrokerGroupSettings
from protocol.errors import ErrorCode
from tests.coordinator.consumer_harness import assignment_of, cg_heartbeat
from tests.coordinator.harness import Harness

# With a backtracking engine `(a|a)*b` against 60 `a`s takes 2**60 steps: the test could not end.
EVIL_TOPIC = "a" * 60


@pytest.mark.timeout(20)
def test_catastrophic_pattern_against_a_long_topic_name_returns() -> None:
    assert not compile_topic_regex("(a|a)*b").fullmatch(EVIL_TOPIC)
    assert not compile_topic_regex("(a+)+b").fullmatch(EVIL_TOPIC)
    assert compile_topic_regex("(a|a)*").fullmatch(EVIL_TOPIC)


@pytest.mark.timeout(20)
def test_heartbeat_with_catastrophic_pattern_is_answered() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    h.catalog.set_topic(EVIL_TOPIC, 1)
    h.catalog.set_topic("orders", 2)
    reply = cg_heartbeat(h, member_id="m", topics=None, regex="(a|a)*b|orders")
    assert reply.error == 0
    assert assignment_of(h, reply) == {"orders": {0, 1}}
    # A catalog change re-evaluates the pattern: still linear.
    h.catalog.set_topic(EVIL_TOPIC + "a", 1)
    assert cg_heartbeat(h, member_id="m", epoch=1, owned={"orders": [0, 1]}).error == 0


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("a(?=b)", "lookahead/lookbehind"),
        ("a(?!b)", "negative lookahead/lookbehind"),
        (r"(a)\1", "backreferences"),
        ("(?>a)", "atomic groups"),
        ("a*+", "possessive quantifiers"),
        ("(", "missing )"),
        ("a{1001}", "repetition"),
    ],
)
def test_refusals_name_the_construct(pattern: str, reason: str) -> None:
    with pytest.raises(RegexError, match=None) as caught:
        compile_topic_regex(pattern)
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("pattern", "name"), [("[[:alpha:]]+-[0-9]", "orders-1"), (r"\pL+", "orders"), ("(?i)ORDERS", "orders")]
)
def test_re2_syntax_python_lacks_is_accepted(pattern: str, name: str) -> None:
    assert compile_topic_regex(pattern).fullmatch(name)


def test_full_match_semantics() -> None:
    pattern = compile_topic_regex("orders")
    assert pattern.fullmatch("orders")
    assert not pattern.fullmatch("orders-eu")
    assert not pattern.fullmatch("my-orders")


def test_overlong_pattern_is_refused() -> None:
    with pytest.raises(RegexError, match="longer than"):
        compile_topic_regex("a" * 5000)
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    assert cg_heartbeat(h, topics=None, regex="a" * 5000).error == ErrorCode.INVALID_REGULAR_EXPRESSION
