"""Per-group configs (GROUP config resources): validation as Kafka's GroupConfig, storage, and
their effect on the members (docs/group-configs.md). Pure core, injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.api.config_resources import (
    BROKER,
    DEFAULT_CONFIG,
    DYNAMIC_GROUP_CONFIG,
    GROUP,
    STATIC_BROKER_CONFIG,
    TOPIC,
    ConfigResources,
)
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share_configs import SHARE_CONFIGS
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from storage.records import GroupConfigRecord, TopicRecord
from tests.coordinator.consumer_harness import cg_heartbeat, cgroup
from tests.coordinator.harness import Harness, Reply

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
SET, DELETE, APPEND = 0, 1, 2
SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
STREAMS_NAMES = [
    "streams.session.timeout.ms",
    "streams.heartbeat.interval.ms",
    "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms",
    "streams.assignment.interval.ms",
]
INVALID_CONFIG, INVALID_REQUEST = ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST
# Short bounds so that the tests run on short timeouts; the broker defaults stay inside them.
CONFIG = BrokerGroupSettings(
    group_initial_rebalance_delay_ms=0,
    group_consumer_session_timeout_ms=10_000,
    group_consumer_heartbeat_interval_ms=1_000,
    group_consumer_heartbeat_policy="kafka",
    group_consumer_min_session_timeout_ms=2_000,
    group_consumer_max_session_timeout_ms=60_000,
    group_consumer_min_heartbeat_interval_ms=500,
    group_consumer_max_heartbeat_interval_ms=15_000,
)
TOPICS = {"orders": TopicRecord("orders", b"\x01" * 16, 3, 1, (("retention.ms", "1000"),))}


@pytest.fixture
def h() -> Harness:
    harness = Harness(CONFIG)
    harness.catalog.set_topic("t", 6)
    return harness


def resources(h: Harness) -> ConfigResources:
    return ConfigResources(h.config, h.coordinator.group_configs, lambda: 7, TOPICS.get)


def alter_reply(h: Harness, *changes: tuple[str, int, str | None], group: str = "g",
                validate_only: bool = False, resource_type: int = GROUP) -> Reply:  # fmt: skip
    request = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(resource_type, group, [AlterableConfig(n, op, v) for n, op, v in changes])],
        validate_only,
    )
    ctx = h.ctx(INCREMENTAL_ALTER_CONFIGS, 1)
    h.apply(resources(h).incremental_alter(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def alter(h: Harness, *changes: tuple[str, int, str | None], **kwargs: Any) -> Any:
    return alter_reply(h, *changes, **kwargs).response


def outcome(h: Harness, *changes: tuple[str, int, str | None], **kwargs: Any) -> tuple[int, str | None]:
    response = alter(h, *changes, **kwargs)
    [result] = response.responses
    return result.error_code, result.error_message


def describe(h: Harness, *resources_: tuple[int, str], synonyms: bool = False) -> Any:
    request = DescribeConfigsRequest(
        [DescribeConfigsResource(t, n, None) for t, n in resources_], synonyms, True
    )
    ctx = h.ctx(DESCRIBE_CONFIGS, 4)
    h.apply(resources(h).describe(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to.response


def group_values(h: Harness, group: str = "g") -> dict[str, tuple[str | None, int]]:
    [result] = describe(h, (GROUP, group)).results
    assert result.error_code == 0
    # The consumer group configs (the streams and share ones have tests of their own).
    return {c.name: (c.value, c.config_source) for c in result.configs if c.name.startswith("consumer.")}


def test_a_group_without_overrides_describes_the_broker_defaults(h: Harness) -> None:
    [result] = describe(h, (GROUP, "nosuch"), synonyms=True).results
    assert (result.error_code, result.resource_type, result.resource_name) == (0, GROUP, "nosuch")
    by_name = {c.name: c for c in result.configs}
    assert sorted(by_name) == sorted([INTERVAL, SESSION, *STREAMS_NAMES, *(c.name for c in SHARE_CONFIGS)])
    session = by_name[SESSION]
    assert (session.value, session.config_source, session.read_only, session.config_type) == (
        "10000", STATIC_BROKER_CONFIG, False, 3)  # fmt: skip
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", "10000", STATIC_BROKER_CONFIG),
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG),
    ]
    assert session.documentation


def test_set_is_stored_then_described_then_deleted_back_to_the_default(h: Harness) -> None:
    assert outcome(h, (SESSION, SET, "20000"), (INTERVAL, SET, "2000")) == (0, None)
    assert h.store.group_configs == {
        ("g", INTERVAL): GroupConfigRecord("g", INTERVAL, "2000"),
        ("g", SESSION): GroupConfigRecord("g", SESSION, "20000"),
    }
    assert group_values(h) == {
        SESSION: ("20000", DYNAMIC_GROUP_CONFIG),
        INTERVAL: ("2000", DYNAMIC_GROUP_CONFIG),
    }
    static = STATIC_BROKER_CONFIG  # the broker-level values are set (CONFIG), not Kafka's defaults
    assert group_values(h, "other") == {SESSION: ("10000", static), INTERVAL: ("1000", static)}
    assert outcome(h, (INTERVAL, DELETE, None)) == (0, None)
    assert group_values(h) == {SESSION: ("20000", DYNAMIC_GROUP_CONFIG), INTERVAL: ("1000", static)}
    assert list(h.store.group_configs) == [("g", SESSION)]


def test_overrides_survive_a_restart(h: Harness) -> None:
    alter(h, (SESSION, SET, "20000"))
    restarted = h.restart()
    assert group_values(restarted)[SESSION] == ("20000", DYNAMIC_GROUP_CONFIG)


def test_validate_only_checks_and_stores_nothing(h: Harness) -> None:
    assert outcome(h, (SESSION, SET, "20000"), validate_only=True) == (0, None)
    assert outcome(h, (SESSION, SET, "1"), validate_only=True)[0] == INVALID_CONFIG
    assert h.store.group_configs == {} and h.store.batches == []
    assert group_values(h)[SESSION] == ("10000", STATIC_BROKER_CONFIG)


@pytest.mark.parametrize(
    ("changes", "code", "message"),
    [
        ([("bogus.config", SET, "1")], INVALID_CONFIG, "Unknown group config name: bogus.config"),
        ([("share.session.timeout.ms", SET, "1")], INVALID_CONFIG,
         "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        ([(SESSION, SET, "abc")], INVALID_CONFIG,
         "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
        ([(SESSION, SET, "3000000000")], INVALID_CONFIG, "Not a number of type INT"),
        ([(SESSION, SET, "0")], INVALID_CONFIG, "Value must be at least 1"),
        ([(SESSION, SET, "1999")], INVALID_CONFIG,
         "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        ([(SESSION, SET, "60001")], INVALID_CONFIG,
         "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        ([(INTERVAL, SET, "499")], INVALID_CONFIG,
         "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        ([(INTERVAL, SET, "15001")], INVALID_CONFIG,
         "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        ([(SESSION, SET, "4000"), (INTERVAL, SET, "4000")], INVALID_CONFIG,
         "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"),
        ([(SESSION, SET, None)], INVALID_REQUEST, "Null value not supported for : consumer.session.timeout.ms"),
        ([(SESSION, SET, "20000"), (SESSION, DELETE, None)], INVALID_REQUEST, "duplicate config keys"),
        ([(SESSION, APPEND, "1")], INVALID_CONFIG, "Config value append is not allowed"),
        ([(SESSION, 9, "1")], INVALID_REQUEST, "Unknown alter config operation 9"),
    ],
)  # fmt: skip
def test_invalid_changes_are_refused_as_kafka_refuses_them(
    h: Harness, changes: list[tuple[str, int, str | None]], code: int, message: str
) -> None:
    got_code, got_message = outcome(h, *changes)
    assert got_code == code
    assert got_message is not None and message in got_message
    assert h.store.batches == []


def test_the_kafka_defaults_fill_unset_names_when_validating(h: Harness) -> None:
    # As Kafka's GroupConfig.validate: an interval alone is checked against the default 45 s
    # session timeout, not against the broker's 10 s.
    assert outcome(h, (INTERVAL, SET, "12000")) == (0, None)


def test_resources_other_than_groups_are_not_altered(h: Harness) -> None:
    assert outcome(h, (SESSION, SET, "20000"), group="") == (
        INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    code, message = outcome(h, ("retention.ms", SET, "1"), group="orders", resource_type=TOPIC)
    assert code == INVALID_REQUEST and message and "cannot be altered" in message
    code, message = outcome(h, ("group.max.size", SET, "1"), group="7", resource_type=BROKER)
    assert code == INVALID_REQUEST and message and "start-up" in message
    code, message = outcome(h, ("x", SET, "1"), group="8", resource_type=8)
    assert code == INVALID_REQUEST and message and "BROKER_LOGGER" in message


def test_duplicate_resources_are_refused_and_the_others_applied(h: Harness) -> None:
    request = IncrementalAlterConfigsRequest([
        AlterConfigsResource(GROUP, "a", [AlterableConfig(SESSION, SET, "20000")]),
        AlterConfigsResource(GROUP, "b", [AlterableConfig(SESSION, SET, "30000")]),
        AlterConfigsResource(GROUP, "a", [AlterableConfig(SESSION, SET, "40000")]),
    ])  # fmt: skip
    ctx = h.ctx(INCREMENTAL_ALTER_CONFIGS, 1)
    h.apply(resources(h).incremental_alter(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    codes = [(r.resource_name, r.error_code) for r in ctx.reply_to.response.responses]
    assert codes == [("a", INVALID_REQUEST), ("b", 0), ("a", INVALID_REQUEST)]
    assert list(h.store.group_configs) == [("b", SESSION)]


def test_a_failed_write_is_answered_with_its_error_and_changes_nothing(h: Harness) -> None:
    h.fail_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert outcome(h, (SESSION, SET, "20000"))[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    h.fail_code = None
    assert group_values(h)[SESSION] == ("10000", STATIC_BROKER_CONFIG)


def test_broker_and_topic_resources_are_described_read_only(h: Harness) -> None:
    broker, other_broker, topic, unknown_topic, logger = describe(
        h, (BROKER, "7"), (BROKER, "8"), (TOPIC, "orders"), (TOPIC, "nosuch"), (8, "7")
    ).results
    assert broker.error_code == 0
    settings = {c.name: c for c in broker.configs}
    assert settings["group.consumer.session.timeout.ms"].value == "10000"
    assert settings["group.consumer.session.timeout.ms"].config_source == STATIC_BROKER_CONFIG
    assert settings["group.max.size"].config_source == DEFAULT_CONFIG
    assert all(c.read_only for c in broker.configs)
    assert other_broker.error_code == INVALID_REQUEST
    assert other_broker.error_message == "Unexpected broker id, expected 7 or empty string, but received 8"
    assert [(c.name, c.value, c.read_only) for c in topic.configs] == [("retention.ms", "1000", True)]
    assert unknown_topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert logger.error_code == INVALID_REQUEST


def test_configuration_keys_filter_the_described_entries(h: Harness) -> None:
    request = DescribeConfigsRequest([DescribeConfigsResource(GROUP, "g", [SESSION, "bogus"])])
    ctx = h.ctx(DESCRIBE_CONFIGS, 4)
    h.apply(resources(h).describe(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    [result] = ctx.reply_to.response.results
    assert [c.name for c in result.configs] == [SESSION]
    assert result.configs[0].documentation is None  # not asked for
    ctx = h.ctx(DESCRIBE_CONFIGS, 4)
    h.apply(resources(h).describe(ctx, DescribeConfigsRequest([DescribeConfigsResource(GROUP, "g", [])])))
    assert isinstance(ctx.reply_to, Reply)
    assert [c.name for c in ctx.reply_to.response.results[0].configs] == [
        SESSION,
        INTERVAL,
        *STREAMS_NAMES,
        *(c.name for c in SHARE_CONFIGS),
    ]  # all


def test_a_new_session_timeout_applies_from_the_members_next_heartbeat(h: Harness) -> None:
    assert cg_heartbeat(h, member_id="a").error == 0
    assert outcome(h, (SESSION, SET, "3000"), (INTERVAL, SET, "1000")) == (0, None)
    h.advance(9_000)  # the session armed before the change still runs on the 10 s default
    beat = cg_heartbeat(h, member_id="a", epoch=1)
    assert beat.error == 0
    h.advance(2_999)
    assert "a" in cgroup(h).members
    h.advance(2)
    assert "a" not in cgroup(h).members


def test_the_heartbeat_interval_told_to_members_is_the_groups(h: Harness) -> None:
    assert cg_heartbeat(h, member_id="a").wire.heartbeat_interval_ms == 1000
    alter(h, (INTERVAL, SET, "2500"))
    assert cg_heartbeat(h, member_id="a", epoch=1).wire.heartbeat_interval_ms == 2500
    assert cg_heartbeat(h, group="other", member_id="b").wire.heartbeat_interval_ms == 1000
    alter(h, (INTERVAL, DELETE, None))
    assert cg_heartbeat(h, member_id="a", epoch=1).wire.heartbeat_interval_ms == 1000


def test_a_restart_arms_the_sessions_with_the_groups_timeout(h: Harness) -> None:
    assert outcome(h, (SESSION, SET, "3000"), (INTERVAL, SET, "1000")) == (0, None)
    assert cg_heartbeat(h, member_id="a").error == 0
    restarted = h.restart()
    restarted.advance(2_999)
    assert "a" in cgroup(restarted).members
    restarted.advance(2)
    assert "a" not in cgroup(restarted).members


def test_concurrent_changes_are_each_validated_against_the_other(h: Harness) -> None:
    assert outcome(h, (SESSION, SET, "3000"), (INTERVAL, SET, "1000")) == (0, None)
    h.hold = True  # both writes in flight at once
    first = alter_reply(h, (INTERVAL, SET, "2500"))
    second = alter(h, (SESSION, SET, "2000"))  # fine against the stored 1 s, not against 2.5 s
    assert not first.answered  # answered only once durable
    h.flush()
    assert first.response.responses[0].error_code == 0
    assert (second.responses[0].error_code, second.responses[0].error_message) == (
        INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")  # fmt: skip
    assert group_values(h) == {
        SESSION: ("3000", DYNAMIC_GROUP_CONFIG),
        INTERVAL: ("2500", DYNAMIC_GROUP_CONFIG),
    }


def test_a_change_behind_a_failed_one_stores_only_its_own_names(h: Harness) -> None:
    h.hold = True
    replies = [alter_reply(h, (SESSION, SET, "20000")), alter_reply(h, (INTERVAL, SET, "2000"))]
    h.flush(fail_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)  # both batches fail
    assert [r.response.responses[0].error_code for r in replies] == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
    h.hold = False
    assert group_values(h) == {
        SESSION: ("10000", STATIC_BROKER_CONFIG),
        INTERVAL: ("1000", STATIC_BROKER_CONFIG),
    }
    assert outcome(h, (INTERVAL, SET, "2000")) == (0, None)
    assert list(h.store.group_configs) == [("g", INTERVAL)]


def test_a_reload_replaces_the_held_groups_overrides_but_not_one_being_written() -> None:
    configs = DynamicGroupConfigs(BrokerGroupSettings())
    configs.load([GroupConfigRecord("held", SESSION, "50000"), GroupConfigRecord("gone", SESSION, "50000"),
                  GroupConfigRecord("writing", SESSION, "50000"), GroupConfigRecord("other", SESSION, "50000")])  # fmt: skip
    pending = {SESSION: "55000"}
    configs.writing("writing", pending)
    stored = [GroupConfigRecord("held", SESSION, "60000"), GroupConfigRecord("new", SESSION, "48000"),
              GroupConfigRecord("writing", SESSION, "46000"), GroupConfigRecord("other", SESSION, "46000")]  # fmt: skip
    assert configs.reload(stored, lambda group_id: group_id != "other") is False  # "writing": later
    assert configs.overrides == {
        "held": {SESSION: "60000"},
        "new": {SESSION: "48000"},
        "writing": {SESSION: "50000"},
        "other": {SESSION: "50000"},
    }
    assert configs.session_timeout_ms("held") == 60000
    configs.written("writing", pending)
    assert configs.reload(stored, lambda group_id: group_id != "other") is True
    assert configs.overrides["writing"] == {SESSION: "46000"}
