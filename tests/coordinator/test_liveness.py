"""Member liveness: the last heartbeat, the session deadline, and "late" once a heartbeat is
overdue, judged at a time the caller passes in."""

from __future__ import annotations

from coordinator.core import liveness
from coordinator.core.group_settings import BrokerGroupSettings
from tests.coordinator.consumer_harness import Client
from tests.coordinator.harness import Harness


def test_judge_orders_expired_waiting_unknown_late_alive() -> None:
    assert liveness.judge(1_000, 46_000, 15_000, 2_000).state == "alive"
    assert liveness.judge(1_000, 46_000, 15_000, 16_001).state == "late"
    assert liveness.judge(1_000, 46_000, 15_000, 46_000).state == "expired"
    assert liveness.judge(1_000, 46_000, 15_000, 20_000, waiting=True).state == "waiting"
    never = liveness.judge(-1, None, 15_000, 5_000)
    assert (never.state, never.last_heartbeat_ms, never.session_deadline_ms) == ("unknown", None, None)


def test_a_classic_member_that_stops_heartbeating_is_late_before_its_session_expires() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    (a, b), generation = h.stable_group("g", 2, session_timeout_ms=45_000)
    h.advance(1_000)
    h.heartbeat("g", a, generation)
    h.heartbeat("g", b, generation)
    beat_ms = h.now_ms
    seen = h.coordinator.member_liveness("g", a, h.now_ms)
    assert seen is not None
    assert (seen.last_heartbeat_ms, seen.session_deadline_ms, seen.state) == (
        beat_ms,
        beat_ms + 45_000,
        "alive",
    )
    assert seen.late_after_ms == 15_000
    for _ in range(4):  # b keeps heartbeating, a was killed
        h.advance(4_000)
        h.heartbeat("g", b, generation)
    late = h.coordinator.member_liveness("g", a, h.now_ms)
    assert late is not None and late.state == "late" and late.last_heartbeat_ms == beat_ms
    alive = h.coordinator.member_liveness("g", b, h.now_ms)
    assert alive is not None and alive.state == "alive" and alive.last_heartbeat_ms == h.now_ms
    assert h.coordinator.member_liveness("g", "nobody", h.now_ms) is None
    assert h.coordinator.member_liveness("nogroup", a, h.now_ms) is None


def test_a_consumer_group_member_is_late_after_missing_two_intervals() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    h.catalog.set_topic("t", 6)
    first, second = Client(h, "m1"), Client(h, "m2")
    first.join()
    second.join()
    joined_ms = h.now_ms
    seen = h.coordinator.member_liveness("g", "m1", h.now_ms)
    assert seen is not None and seen.state == "alive" and seen.last_heartbeat_ms == joined_ms
    interval = h.coordinator.group_configs.intervals("g").interval_ms
    assert seen.late_after_ms == 2 * interval
    assert seen.session_deadline_ms == joined_ms + h.coordinator.group_configs.session_timeout_ms("g")
    h.advance(2 * interval + 1)
    second.beat()
    late = h.coordinator.member_liveness("g", "m1", h.now_ms)
    assert late is not None and late.state == "late"
    other = h.coordinator.member_liveness("g", "m2", h.now_ms)
    assert other is not None and other.state == "alive"
