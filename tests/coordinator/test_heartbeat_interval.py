"""KIP-848 heartbeat intervals: shorter during hand-overs, jittered otherwise (docs/kip848-handover.md)."""

from __future__ import annotations

import random

import pytest

from coordinator.core.consumer.group import MemberState
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.heartbeat_interval import HeartbeatIntervals
from tests.coordinator.consumer_harness import Client, cg_heartbeat, cgroup
from tests.coordinator.harness import Harness

INTERVAL = 5000
SHORT = 250
WINDOW = 500


def harness(policy: str = "handover", seed: int | None = None) -> Harness:
    config = BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_consumer_heartbeat_policy=policy)
    h = Harness(config, random_unit=random.Random(seed).random if seed is not None else None)
    h.catalog.set_topic("t", 6)
    return h


def for_member(intervals: HeartbeatIntervals, state: MemberState, settling: bool) -> int:
    return intervals.for_member(
        state is MemberState.STABLE, state is MemberState.UNRELEASED_PARTITIONS, settling
    )


def interval(client: Client) -> int:
    assert client.last is not None
    return int(client.last.wire.heartbeat_interval_ms)


# -- the rules, on their own ------------------------------------------------------------------


def test_jitter_only_shortens_by_at_most_a_fifth_and_spreads() -> None:
    intervals = HeartbeatIntervals(INTERVAL, "handover", random.Random(1).random)
    drawn = [for_member(intervals, MemberState.STABLE, settling=False) for _ in range(2000)]
    assert min(drawn) >= 4000 and max(drawn) <= INTERVAL
    assert min(drawn) < 4100 and max(drawn) > 4900  # the whole range is used
    assert len(set(drawn)) > 500
    short = [for_member(intervals, MemberState.UNREVOKED_PARTITIONS, settling=False) for _ in range(200)]
    assert min(short) >= 200 and max(short) <= SHORT


def test_a_random_source_outside_the_unit_interval_cannot_lengthen_or_zero_the_interval() -> None:
    assert (
        for_member(HeartbeatIntervals(INTERVAL, "handover", lambda: 7.0), MemberState.STABLE, False) == 4000
    )
    assert (
        for_member(HeartbeatIntervals(INTERVAL, "handover", lambda: -3.0), MemberState.STABLE, False)
        == INTERVAL
    )
    assert for_member(HeartbeatIntervals(1, "handover", lambda: 0.99), MemberState.STABLE, True) == 1
    assert for_member(HeartbeatIntervals(4, "handover", lambda: 0.99), MemberState.STABLE, False) == 4


@pytest.mark.parametrize(
    ("policy", "state", "settling", "expected"),
    [
        ("kafka", MemberState.UNRELEASED_PARTITIONS, True, INTERVAL),
        ("kafka", MemberState.UNREVOKED_PARTITIONS, False, INTERVAL),
        ("unreleased", MemberState.UNRELEASED_PARTITIONS, False, SHORT),
        ("unreleased", MemberState.UNREVOKED_PARTITIONS, True, INTERVAL),
        ("unreleased", MemberState.STABLE, True, INTERVAL),
        ("handover", MemberState.UNRELEASED_PARTITIONS, False, SHORT),
        ("handover", MemberState.UNREVOKED_PARTITIONS, False, SHORT),
        ("handover", MemberState.STABLE, True, SHORT),
        ("handover", MemberState.STABLE, False, INTERVAL),
    ],
)
def test_policy_table(policy: str, state: MemberState, settling: bool, expected: int) -> None:
    assert for_member(HeartbeatIntervals(INTERVAL, policy), state, settling) == expected


@pytest.mark.parametrize(("configured", "short"), [(5000, 250), (30000, 1500), (8000, 400), (200, 200)])
def test_the_short_interval_is_a_twentieth_but_at_least_250_ms_and_at_most_the_configured_one(
    configured: int, short: int
) -> None:
    assert HeartbeatIntervals(configured).short_ms == short


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="must be handover or unreleased or kafka"):
        BrokerGroupSettings(group_consumer_heartbeat_policy="sooner")


# -- through the coordinator, with the injected clock -------------------------------------------


def test_members_come_back_soon_after_every_epoch_bump_then_at_the_regular_interval() -> None:
    h = harness()
    a = Client(h, "a")
    a.join()
    assert interval(a) == SHORT  # the group just formed: others may be joining
    h.advance(SHORT)
    # Steady heartbeat (the fast path) inside the window: still short.
    assert cg_heartbeat(h, member_id="a", epoch=1).wire.heartbeat_interval_ms == SHORT
    h.advance(WINDOW - SHORT)
    assert cg_heartbeat(h, member_id="a", epoch=1).wire.heartbeat_interval_ms == INTERVAL
    # A second member joins: the first member's next heartbeat is inside the new window.
    b = Client(h, "b")
    b.join()
    assert interval(b) == SHORT and cgroup(h).members["b"].state is MemberState.UNRELEASED_PARTITIONS
    h.advance(WINDOW)  # the window closes, the hand-over is still going on
    a.beat()
    assert cgroup(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert interval(a) == SHORT  # has partitions to give up: asked to acknowledge soon
    a.beat()  # acknowledged
    assert cgroup(h).members["a"].state is MemberState.STABLE and interval(a) == INTERVAL
    b.beat()
    assert cgroup(h).state == "Stable" and interval(b) == INTERVAL
    assert len(a.partitions()) == len(b.partitions()) == 3


def test_a_member_leaving_opens_the_window_for_the_others() -> None:
    h = harness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    for _ in range(3):
        a.beat()
        b.beat()
    h.advance(WINDOW)
    b.beat()
    assert interval(b) == INTERVAL
    assert (
        cg_heartbeat(h, member_id="a", epoch=a.epoch, rebalance_timeout_ms=-1, topics=None).wire.error_code
        == 0
    )
    cg_heartbeat(h, member_id="a", epoch=-1)  # a leaves
    b.beat()
    assert interval(b) == SHORT and len(b.partitions()) == 6


def simulate_start(policy: str) -> tuple[int, list[int]]:
    """Ten members join 10 ms apart on a 900-partition topic and heartbeat when told to; like
    librdkafka and the Java consumer, a client that gave up partitions acknowledges at once.
    Returns when (ms after the first join) the split first was 90 each, and the intervals the
    members were last given, two settle windows later."""
    h = harness(policy, seed=20)
    h.catalog.set_topic("t", 900)
    clients = [Client(h, f"m{i}") for i in range(10)]
    next_beat: dict[int, int] = {}
    start = h.now_ms
    for i, client in enumerate(clients):
        h.advance(10)
        client.join()
        next_beat[i] = h.now_ms + interval(client)
    settled_ms: int | None = None
    while h.now_ms - start < 20_000:
        i = min(next_beat, key=lambda k: next_beat[k])
        h.advance(next_beat[i] - h.now_ms)
        before = clients[i].partitions()
        clients[i].beat()
        revoked = before - clients[i].partitions()
        next_beat[i] = h.now_ms + (5 if revoked else interval(clients[i]))
        seen = [tp for c in clients for tp in c.partitions()]
        assert len(seen) == len(set(seen)), "a partition was owned by two members at once"
        if settled_ms is None and [len(c.partitions()) for c in clients] == [90] * 10:
            settled_ms = h.now_ms - start
        if settled_ms is not None and h.now_ms - start > settled_ms + 2 * WINDOW:
            assert [len(c.partitions()) for c in clients] == [90] * 10
            return settled_ms, [interval(c) for c in clients]
    raise AssertionError("the group did not settle")


def test_ten_members_joining_together_settle_within_a_few_short_intervals() -> None:
    settled_ms, intervals = simulate_start("handover")
    assert settled_ms <= 600
    # Two settle windows later every member is back at a regular interval, jittered.
    assert all(4000 <= x <= INTERVAL for x in intervals) and len(set(intervals)) > 5


def test_with_the_kafka_policy_the_same_start_waits_for_a_regular_heartbeat() -> None:
    settled_ms, intervals = simulate_start("kafka")
    assert settled_ms > INTERVAL
    assert intervals == [INTERVAL] * 10


def test_restart_keeps_the_policy_and_the_random_source() -> None:
    h = harness(seed=3)
    a = Client(h, "a")
    a.join()
    h.advance(WINDOW)
    h2 = h.restart()
    reply = cg_heartbeat(h2, member_id="a", epoch=1)
    assert 4000 <= reply.wire.heartbeat_interval_ms <= INTERVAL
