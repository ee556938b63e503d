"""Pure helpers of coordinator/group.py: protocol selection, compatibility, subscriptions."""

from __future__ import annotations

import struct

import pytest

from coordinator.core.classic.group import (
    ClassicGroup,
    Member,
    Protocols,
    parse_subscribed_topics,
    session_key,
)
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from tests.coordinator.harness import subscription


def member(
    member_id: str,
    protocols: Protocols,
    *,
    instance_id: str | None = None,
    rebalance_timeout_ms: int = 1000,
    protocol_type: str = "consumer",
) -> Member:
    return Member(
        member_id=member_id,
        group_instance_id=instance_id,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=10_000,
        protocol_type=protocol_type,
        protocols=protocols,
        session_key=session_key("g", member_id),
    )


def group_of(*members: Member, state: GroupState = GroupState.PREPARING_REBALANCE) -> ClassicGroup:
    group = ClassicGroup("g")
    for m in members:
        group.add_member(m, None, 0)
    group.state = state
    return group


def test_select_protocol_takes_the_most_voted_candidate() -> None:
    a = member("a", (("roundrobin", b""), ("range", b"")))
    b = member("b", (("range", b""), ("roundrobin", b"")))
    c = member("c", (("sticky", b""), ("range", b""), ("roundrobin", b"")))
    # "sticky" is not supported by everyone, so c votes for its next choice: range.
    assert group_of(a, b, c).select_protocol() == "range"


def test_select_protocol_tie_is_deterministic() -> None:
    a = member("a", (("x", b""), ("y", b"")))
    b = member("b", (("y", b""), ("x", b"")))
    assert group_of(a, b).select_protocol() == "x"  # the protocol that got the first vote
    assert group_of(b, a).select_protocol() == "y"


def test_select_protocol_needs_members() -> None:
    with pytest.raises(ValueError):
        ClassicGroup("g").select_protocol()


def test_supports_protocols_on_an_empty_group_needs_a_type_and_a_protocol() -> None:
    group = ClassicGroup("g")
    assert group.supports_protocols("consumer", ["range"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])


def test_supports_protocols_needs_the_same_type_and_a_shared_protocol() -> None:
    group = group_of(member("a", (("range", b""), ("roundrobin", b""))), member("b", (("range", b""),)))
    assert group.supports_protocols("consumer", ["range"])
    assert not group.supports_protocols("consumer", ["roundrobin"])  # b does not support it
    assert not group.supports_protocols("connect", ["range"])


def test_protocol_support_counts_each_member_once() -> None:
    group = group_of(member("a", (("range", b"1"), ("range", b"2"))), member("b", (("range", b""),)))
    assert group.protocol_support == {"range": 2}
    group.remove_member("a")
    assert group.protocol_support == {"range": 1}
    group.remove_member("b")
    assert group.protocol_support == {}


def test_add_member_sets_type_and_leader_and_static_mapping() -> None:
    group = ClassicGroup("g")
    group.add_member(member("a", (("range", b""),), instance_id="i-a"), None, 0)
    group.add_member(member("b", (("range", b""),)), None, 0)
    assert group.protocol_type == "consumer"
    assert group.leader_id == "a"
    assert group.static_members == {"i-a": "a"}
    with pytest.raises(ValueError):
        group.add_member(member("c", (("range", b""),), instance_id="i-a"), None, 0)


def test_removing_the_leader_elects_the_oldest_remaining_member() -> None:
    group = group_of(member("a", (("r", b""),)), member("b", (("r", b""),)), member("c", (("r", b""),)))
    group.remove_member("a")
    assert group.leader_id == "b"
    group.remove_member("c")
    group.remove_member("b")
    assert group.leader_id is None


def test_rebalance_timeout_is_the_largest_member_timeout() -> None:
    group = group_of(
        member("a", (("r", b""),), rebalance_timeout_ms=5_000),
        member("b", (("r", b""),), rebalance_timeout_ms=300_000),
    )
    assert group.rebalance_timeout_ms() == 300_000
    assert ClassicGroup("g").rebalance_timeout_ms() == 0


def test_maybe_elect_new_joined_leader() -> None:
    a, b = member("a", (("r", b""),)), member("b", (("r", b""),))
    group = group_of(a, b)
    assert not group.maybe_elect_new_joined_leader()  # nobody rejoined
    group.set_join_reply(b, object(), 5)  # type: ignore[arg-type]
    assert group.maybe_elect_new_joined_leader()
    assert group.leader_id == "b"
    assert group.num_awaiting_join == 1


@pytest.mark.parametrize(
    ("member_id", "instance_id", "expected"),
    [
        ("a", None, 0),
        ("s", "i-s", 0),
        ("zzz", None, ErrorCode.UNKNOWN_MEMBER_ID),
        ("a", "i-s", ErrorCode.FENCED_INSTANCE_ID),  # instance mapped to another member
        ("s", "i-unknown", ErrorCode.UNKNOWN_MEMBER_ID),  # instance not mapped at all
        ("s", None, 0),  # a static member may omit its instance id
    ],
)
def test_validate_member(member_id: str, instance_id: str | None, expected: int) -> None:
    group = group_of(member("a", (("r", b""),)), member("s", (("r", b""),), instance_id="i-s"))
    assert group.validate_member(member_id, instance_id) == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_parse_subscribed_topics_reads_the_v0_prefix_of_any_version(version: int) -> None:
    assert parse_subscribed_topics(subscription(["a", "b"], version=version)) == frozenset({"a", "b"})


def test_parse_subscribed_topics_of_a_future_version() -> None:
    data = struct.pack(">h", 42) + subscription(["t"])[2:] + b"fields of version 42"
    assert parse_subscribed_topics(data) == frozenset({"t"})


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x00\x00\x00\x00\x05\x00\x01",
        b"\x00\x00\xff\xff\xff\xff",
        b"\x00\x00\x00\x01\x00\x02\xff\xfe",
    ],
)
def test_parse_subscribed_topics_failure_is_unknown(data: bytes) -> None:
    assert parse_subscribed_topics(data) is None


def test_compute_subscribed_topics() -> None:
    a = member("a", (("range", subscription(["x"])),))
    b = member("b", (("range", subscription(["y", "x"])),))
    group = group_of(a, b)
    assert group.compute_subscribed_topics() is None  # no protocol selected yet
    group.protocol_name = "range"
    assert group.compute_subscribed_topics() == frozenset({"x", "y"})
    b.protocols = (("range", b"garbage"),)
    assert group.compute_subscribed_topics() is None
    other = group_of(member("c", (("range", subscription(["x"])),), protocol_type="connect"))
    other.protocol_name = "range"
    assert other.compute_subscribed_topics() is None  # only "consumer" groups are parsed
    empty = ClassicGroup("g", protocol_type="consumer")
    assert empty.compute_subscribed_topics() == frozenset()


def test_is_subscribed_to_topic() -> None:
    group = ClassicGroup("g", protocol_type="consumer")
    assert group.is_subscribed_to_topic("t")  # unknown subscription counts as subscribed
    group.subscribed_topics = frozenset({"a"})
    assert group.is_subscribed_to_topic("a")
    assert not group.is_subscribed_to_topic("t")
    connect = ClassicGroup("g", protocol_type="connect")
    assert not connect.is_subscribed_to_topic("t")


def test_heartbeat_satisfaction() -> None:
    m = member("a", (("r", b""),))
    assert not m.has_satisfied_heartbeat()
    m.join_reply = object()  # type: ignore[assignment]
    assert m.has_satisfied_heartbeat()  # parked JoinGroup keeps an existing member alive
    m.is_new = True
    assert not m.has_satisfied_heartbeat()  # ... but not a new one (KAFKA-7610)
    m.is_new = False
    m.join_reply = None
    m.sync_reply = object()  # type: ignore[assignment]
    assert m.has_satisfied_heartbeat()
