"""Share groups' group configs (share.*, errors.deadletterqueue.*): validated as Kafka 4.4's
GroupConfig with its messages, described, and in force for the group's members and through
``share_settings`` (docs/group-configs.md#share-groups)."""

from __future__ import annotations

import pytest

from coordinator.api.config_resources import BOOLEAN, DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG, GROUP, INT, STRING
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.limits import share_limits
from coordinator.core.share.partition import ShareLimits
from coordinator.core.share_configs import check_share_configs, parse_duration_ms
from protocol.errors import ErrorCode
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.coordinator.harness import Harness, Reply
from tests.coordinator.test_group_configs import DELETE, SET, describe, outcome

INVALID_CONFIG = ErrorCode.INVALID_CONFIG
RANGE = "must be in the range"


@pytest.fixture
def h() -> Harness:
    harness = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    harness.catalog.set_topic("t", 1)
    return harness


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("share.session.timeout.ms", "44999", "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        ("share.heartbeat.interval.ms", "15001",
         "share.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
        ("share.record.lock.duration.ms", "14999",
         "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
        ("share.record.lock.duration.ms", "999",
         "Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
        ("share.delivery.count.limit", "11", "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
        ("share.delivery.count.limit", "1",
         "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
        ("share.partition.max.record.locks", "4001",
         "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
        ("share.assignment.interval.ms", "15001",
         "share.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
        ("share.assignment.interval.ms", "x",
         "Invalid value x for configuration share.assignment.interval.ms: Not a number of type INT"),
        ("share.auto.offset.reset", "sometimes",
         "Invalid value `sometimes` for configuration share.auto.offset.reset. The value must be either "
         "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."),
        ("share.auto.offset.reset", "by_duration:-PT1H", "The value must be either"),
        ("share.auto.offset.reset", "by_duration:1h", "The value must be either"),
        ("share.isolation.level", "dirty",
         "Invalid value dirty for configuration share.isolation.level: String must be one of: "
         "read_committed, read_uncommitted"),
        ("share.renew.acknowledge.enable", "yes",
         "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either "
         "true or false"),
        ("errors.deadletterqueue.topic.name", "__dlq",
         "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"),
    ],
)  # fmt: skip
def test_invalid_share_configs_are_refused_with_kafkas_messages(
    h: Harness, name: str, value: str, message: str
) -> None:
    code, text = outcome(h, (name, SET, value))
    assert code == INVALID_CONFIG and text is not None and message in text


def test_the_session_timeout_must_exceed_the_heartbeat_interval(h: Harness) -> None:
    config = BrokerGroupSettings(group_share_min_session_timeout_ms=5000)
    check = check_share_configs(config, {"share.session.timeout.ms": "5000"})
    assert check.value_error == "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"


def test_valid_share_configs_are_stored_described_and_in_force(h: Harness) -> None:
    assert outcome(
        h,
        ("share.record.lock.duration.ms", SET, "20000"),
        ("share.delivery.count.limit", SET, "3"),
        ("share.partition.max.record.locks", SET, "500"),
        ("share.auto.offset.reset", SET, "by_duration:PT1H30M"),
        ("share.isolation.level", SET, "read_committed"),
        ("share.renew.acknowledge.enable", SET, "FALSE"),
        ("errors.deadletterqueue.topic.name", SET, "dlq.g"),
        ("share.heartbeat.interval.ms", SET, "6000"),
    ) == (0, None)
    settings = h.coordinator.group_configs.share_settings("g")
    assert share_limits(settings) == ShareLimits(20000, 3, 500)
    assert settings.auto_offset_reset_duration_ms == 90 * 60_000
    assert (settings.isolation_level, settings.renew_acknowledge_enable, settings.dlq_topic_name) == (
        "read_committed",
        False,
        "dlq.g",
    )
    [result] = describe(h, (GROUP, "g"), synonyms=True).results
    by_name = {c.name: c for c in result.configs}
    renew = by_name["share.renew.acknowledge.enable"]
    assert (renew.value, renew.config_source, renew.config_type) == ("false", DYNAMIC_GROUP_CONFIG, BOOLEAN)
    reset = by_name["share.auto.offset.reset"]
    assert (reset.value, reset.config_type) == ("by_duration:PT1H30M", STRING)
    copy = by_name["errors.deadletterqueue.copy.record.enable"]
    assert (copy.value, copy.config_source) == ("false", DEFAULT_CONFIG)
    locks = by_name["share.record.lock.duration.ms"]
    assert (locks.value, locks.config_type) == ("20000", INT)
    assert [(s.name, s.value) for s in locks.synonyms] == [
        ("share.record.lock.duration.ms", "20000"),
        ("group.share.record.lock.duration.ms", "30000"),
    ]
    # The members are told the group's heartbeat interval.
    ctx = h.ctx(76, 1)
    req = ShareGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
    )
    h.apply(h.coordinator.handle(ctx, req))
    assert isinstance(ctx.reply_to, Reply) and ctx.reply_to.wire.heartbeat_interval_ms == 6000
    # Deleted: back to the broker's.
    assert outcome(h, ("share.delivery.count.limit", DELETE, None)) == (0, None)
    assert h.coordinator.group_configs.share_settings("g").delivery_count_limit == 5


def test_the_group_session_timeout_removes_a_silent_member(h: Harness) -> None:
    assert outcome(h, ("share.session.timeout.ms", SET, "50000")) == (0, None)
    ctx = h.ctx(76, 1)
    req = ShareGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t"]
    )
    h.apply(h.coordinator.handle(ctx, req))
    h.advance(46_000)  # past the broker's 45 s, within the group's 50 s
    from coordinator.core.share.manager import ShareGroupManager

    assert set(h.coordinator.kind(ShareGroupManager).groups["g"].members) == {"m"}
    h.advance(5_000)
    assert set(h.coordinator.kind(ShareGroupManager).groups["g"].members) == set()


def test_an_override_is_clamped_into_bounds_lowered_later() -> None:
    from coordinator.core.share_configs import share_settings

    config = BrokerGroupSettings(group_share_max_delivery_count_limit=4)
    assert share_settings(config, {"share.delivery.count.limit": "8"}).delivery_count_limit == 4
    assert share_settings(config, {}).delivery_count_limit == 5  # the broker's own value is not clamped


@pytest.mark.parametrize(
    ("text", "ms"),
    [("PT1H", 3_600_000), ("P1D", 86_400_000), ("PT0.5S", 500), ("PT1M30S", 90_000), ("-PT1S", -1000),
     ("P", None), ("PT", None), ("1H", None), ("PT1.5H", None)],
)  # fmt: skip
def test_durations_parse_as_javas(text: str, ms: int | None) -> None:
    assert parse_duration_ms(text) == ms
