"""The streams.* group configs (GROUP config resources) of streams groups: Kafka 4.4's validation
and their effect on the group (docs/streams-groups.md#group-configs). Pure core."""

from __future__ import annotations

import pytest

from coordinator.api.config_resources import DEFAULT_CONFIG, DYNAMIC_GROUP_CONFIG, GROUP
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness
from tests.coordinator.streams_harness import StreamsClient, sgroup, streams_settings
from tests.coordinator.test_group_configs import DELETE, SET, describe, outcome

SESSION, INTERVAL = "streams.session.timeout.ms", "streams.heartbeat.interval.ms"
STANDBYS, DELAY = "streams.num.standby.replicas", "streams.initial.rebalance.delay.ms"
ASSIGNMENT_INTERVAL = "streams.assignment.interval.ms"


def ready(h: Harness) -> None:
    for topic in ("words", "app-counts-repartition", "app-counts-changelog"):
        h.catalog.set_topic(topic, 2)


def streams_values(h: Harness, group: str = "app") -> dict[str, tuple[str | None, int]]:
    [result] = describe(h, (GROUP, group)).results
    return {c.name: (c.value, c.config_source) for c in result.configs if c.name.startswith("streams.")}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ([(STANDBYS, "3")], f"{STANDBYS} must be less than or equal to 2"),
        ([(STANDBYS, "-1")], f"Invalid value -1 for configuration {STANDBYS}: Value must be at least 0"),
        ([(INTERVAL, "100")], f"{INTERVAL} must be in the range 5000 to 15000 inclusive."),
        ([(SESSION, "90000")], f"{SESSION} must be in the range 45000 to 60000 inclusive."),
        ([(SESSION, "0")], f"Invalid value 0 for configuration {SESSION}: Value must be at least 1"),
        ([(DELAY, "soon")], f"Invalid value soon for configuration {DELAY}: Not a number of type INT"),
        ([(DELAY, "-5")], f"Invalid value -5 for configuration {DELAY}: Value must be at least 0"),
        ([(ASSIGNMENT_INTERVAL, "15001")], f"{ASSIGNMENT_INTERVAL} must be in the range 0 to 15000 inclusive."),
        ([(ASSIGNMENT_INTERVAL, "-1")],
         f"Invalid value -1 for configuration {ASSIGNMENT_INTERVAL}: Value must be at least 0"),
    ],
)  # fmt: skip
def test_bad_values_are_refused_with_kafkas_messages(changes: list[tuple[str, str]], message: str) -> None:
    h = Harness(streams_settings())
    assert outcome(h, *[(n, SET, v) for n, v in changes], group="app") == (ErrorCode.INVALID_CONFIG, message)
    assert h.store.group_configs == {}


def test_the_session_must_exceed_the_heartbeat_interval_with_the_broker_values_standing_in() -> None:
    h = Harness(
        streams_settings(group_streams_min_session_timeout_ms=1000, group_streams_heartbeat_interval_ms=5000)
    )
    refused = (ErrorCode.INVALID_CONFIG, f"{SESSION} must be greater than {INTERVAL}")
    assert outcome(h, (SESSION, SET, "5000"), group="app") == refused  # the broker's interval: 5000
    assert outcome(h, (SESSION, SET, "6000"), (INTERVAL, SET, "6000"), group="app") == refused
    assert outcome(h, (SESSION, SET, "6000"), group="app") == (0, None)


def test_described_with_the_broker_values_then_the_groups_own() -> None:
    h = Harness(streams_settings())
    assert streams_values(h) == {
        SESSION: ("45000", DEFAULT_CONFIG),
        INTERVAL: ("5000", DEFAULT_CONFIG),
        STANDBYS: ("0", DEFAULT_CONFIG),
        DELAY: ("0", 4),  # set at start-up (the streams tests' settings), Kafka's default is 3000
        ASSIGNMENT_INTERVAL: ("0", 4),  # likewise; Kafka's default is 1000
    }
    assert outcome(h, (STANDBYS, SET, "1"), (INTERVAL, SET, "6000"), group="app") == (0, None)
    assert streams_values(h)[STANDBYS] == ("1", DYNAMIC_GROUP_CONFIG)
    assert streams_values(h.restart())[INTERVAL] == ("6000", DYNAMIC_GROUP_CONFIG)


def test_the_groups_standby_replicas_and_interval_apply_at_the_next_assignment_and_heartbeat() -> None:
    h = Harness(streams_settings())
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    assert a.beat().wire.heartbeat_interval_ms == 5000
    assert outcome(h, (STANDBYS, SET, "1"), (INTERVAL, SET, "7000"), group="app") == (0, None)
    assert a.beat().wire.heartbeat_interval_ms == 7000
    b.join()  # the next assignment: one standby of each stateful task, on the other process
    for _ in range(3):
        a.beat()
        b.beat()
    standbys = {(s, p) for c in (a, b) for s, ps in c.standby.items() for p in ps}
    assert standbys == {("1", 0), ("1", 1)}
    assert not any(set(c.standby.get("1", ())) & set(c.active.get("1", ())) for c in (a, b))
    assert outcome(h, (STANDBYS, DELETE, None), group="app") == (0, None)


def test_the_groups_session_timeout_fences_a_silent_member() -> None:
    h = Harness(
        streams_settings(group_streams_min_session_timeout_ms=1000, group_streams_heartbeat_interval_ms=500)
    )
    ready(h)
    assert outcome(h, (SESSION, SET, "2000"), group="app") == (0, None)
    a = StreamsClient(h, "a")
    a.join()
    h.advance(2001)
    assert "a" not in sgroup(h).members


def test_the_groups_initial_rebalance_delay_overrides_the_brokers() -> None:
    h = Harness(streams_settings(group_streams_initial_rebalance_delay_ms=3000))
    ready(h)
    assert outcome(h, (DELAY, SET, "0"), group="app") == (0, None)
    joined = StreamsClient(h, "a").join().wire
    assert joined.status == [] and joined.active_tasks
