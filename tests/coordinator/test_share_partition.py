"""The share-partition delivery state (KIP-932): acquisition, acknowledgement, locks, the delivery
limit, the start offset, and what is persisted and restored."""

from __future__ import annotations

import os

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.core import errors
from coordinator.core.share.partition import (
    INVALID_RECORD_STATE,
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    PersistedShareState,
    RecordState,
    ShareLimits,
    SharePartition,
    StateBatch,
)

LIMITS = ShareLimits(record_lock_duration_ms=30_000, delivery_count_limit=3, max_record_locks=20)
ACCEPT = (int(AcknowledgeType.ACCEPT),)
RELEASE = (int(AcknowledgeType.RELEASE),)
REJECT = (int(AcknowledgeType.REJECT),)
RENEW = (int(AcknowledgeType.RENEW),)


def ack(first: int, last: int, types: tuple[int, ...] = ACCEPT) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def test_new_records_are_acquired_once_and_accepting_them_moves_the_start_offset() -> None:
    partition = SharePartition(10, LIMITS)
    assert partition.acquire("a", [(10, 14)], 100, now_ms=0) == [AcquiredRange(10, 14, 1)]
    assert partition.acquire("b", [(10, 14)], 100, now_ms=0) == []
    assert partition.next_fetch_offset() == 15
    result = partition.acknowledge("a", [ack(10, 12)], now_ms=1)
    assert result.error_code == errors.NONE
    assert result.changed
    assert partition.start_offset == 13
    assert partition.in_flight == 2


def test_released_records_come_back_with_a_higher_delivery_count_and_archive_at_the_limit() -> None:
    partition = SharePartition(0, LIMITS)
    for delivery in (1, 2, 3):
        assert partition.acquire("a", [(0, 0)], 10, now_ms=0) == [AcquiredRange(0, 0, delivery)]
        assert partition.acknowledge("a", [ack(0, 0, RELEASE)], now_ms=0).error_code == errors.NONE
    # The third delivery reached the limit: released, it is archived and the start moves past it.
    assert partition.start_offset == 1
    assert partition.acquire("a", [(0, 0)], 10, now_ms=0) == []
    assert partition.counters.archived_at_limit == 1
    assert partition.counters.redelivered == 2


def test_rejected_records_are_never_delivered_again() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 3)], 10, now_ms=0)
    assert partition.acknowledge("a", [ack(0, 3, (1, 3, 1, 2))], now_ms=0).error_code == errors.NONE
    assert partition.start_offset == 3  # accepted, rejected, accepted: all done
    assert partition.acquire("b", [(0, 3)], 10, now_ms=0) == [AcquiredRange(3, 3, 2)]
    assert partition.counters.rejected == 1


def test_an_expired_lock_makes_the_records_available_to_another_member() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 4)], 10, now_ms=1_000)
    assert partition.next_deadline() == 31_000
    assert not partition.expire_locks(30_999)
    assert partition.expire_locks(31_000)
    assert partition.counters.lock_expiries == 5
    assert partition.acquire("b", [(0, 4)], 10, now_ms=31_000) == [AcquiredRange(0, 4, 2)]
    # The member whose lock ran out can no longer acknowledge them.
    result = partition.acknowledge("a", [ack(0, 4)], now_ms=31_001)
    assert result.error_code == INVALID_RECORD_STATE
    assert not result.changed


def test_renew_extends_the_lock_without_a_persisted_change() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 1)], 10, now_ms=0)
    result = partition.acknowledge("a", [ack(0, 1, RENEW)], now_ms=20_000)
    assert result.error_code == errors.NONE
    assert not result.changed
    assert partition.next_deadline() == 50_000
    assert not partition.expire_locks(49_999)


def test_acknowledgements_are_all_or_nothing_per_partition() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 2)], 10, now_ms=0)
    partition.acquire("b", [(3, 5)], 10, now_ms=0)
    before = partition.persisted()
    # The second batch names records member b holds: nothing of the request is applied.
    result = partition.acknowledge("a", [ack(0, 2), ack(3, 3)], now_ms=0)
    assert result.error_code == INVALID_RECORD_STATE
    assert partition.persisted() == before
    assert partition.state_of(0)[0] is RecordState.ACQUIRED


def test_bad_acknowledgements_are_refused_with_kafkas_codes() -> None:
    partition = SharePartition(5, LIMITS)
    partition.acquire("a", [(5, 9)], 10, now_ms=0)
    assert partition.acknowledge("a", [ack(3, 4)], 0).error_code == INVALID_RECORD_STATE  # below start
    assert partition.acknowledge("a", [ack(8, 12)], 0).error_code == INVALID_RECORD_STATE  # past the end
    assert partition.acknowledge("a", [ack(7, 6)], 0).error_code == errors.INVALID_REQUEST
    assert partition.acknowledge("a", [ack(5, 6, (1, 1, 1))], 0).error_code == errors.INVALID_REQUEST
    assert partition.acknowledge("a", [ack(5, 5, (9,))], 0).error_code == errors.INVALID_REQUEST
    assert partition.acknowledge("a", [ack(5, 6), ack(6, 7)], 0).error_code == errors.INVALID_REQUEST
    assert partition.acknowledge("a", [ack(5, 5)], 0).error_code == errors.NONE
    assert partition.acknowledge("a", [ack(5, 5)], 0).error_code == INVALID_RECORD_STATE  # already done


def test_a_member_leaving_releases_what_it_holds() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 2)], 10, now_ms=0)
    partition.acquire("b", [(3, 4)], 10, now_ms=0)
    assert partition.release_member("a")
    assert not partition.release_member("a")
    assert partition.next_fetch_offset() == 0
    assert partition.acquire("b", [(0, 4)], 10, now_ms=0) == [AcquiredRange(0, 2, 2)]


def test_the_in_flight_window_is_bounded_by_max_record_locks() -> None:
    partition = SharePartition(0, LIMITS)
    ranges = partition.acquire("a", [(0, 9), (10, 29), (30, 39)], 1_000, now_ms=0)
    assert ranges == [AcquiredRange(0, 19, 1)]
    assert partition.in_flight == 20
    assert not partition.can_acquire()
    partition.acknowledge("a", [ack(0, 4)], now_ms=0)
    assert partition.can_acquire()
    assert partition.acquire("b", [(20, 29)], 1_000, now_ms=0) == [AcquiredRange(20, 24, 1)]


def test_batch_optimized_takes_whole_batches_and_strict_mode_stops_at_the_limit() -> None:
    batches = [(0, 3), (4, 7), (8, 11)]
    optimized = SharePartition(0, LIMITS)
    assert optimized.acquire("a", batches, 5, now_ms=0) == [AcquiredRange(0, 7, 1)]
    strict = SharePartition(0, LIMITS)
    assert strict.acquire("a", batches, 5, now_ms=0, strict_record_limit=True) == [AcquiredRange(0, 4, 1)]
    assert strict.next_fetch_offset() == 5


def test_offsets_a_fetch_skips_are_acquired_as_gaps_to_acknowledge() -> None:
    partition = SharePartition(0, LIMITS)
    # A compacted log: offsets 0-2 and 5 are gone.
    assert partition.acquire("a", [(3, 4), (6, 7)], 10, now_ms=0) == [AcquiredRange(0, 7, 1)]
    gap, accept = int(AcknowledgeType.GAP), int(AcknowledgeType.ACCEPT)
    types = (gap, gap, gap, accept, accept, gap, accept, accept)
    assert partition.acknowledge("a", [ack(0, 7, types)], now_ms=0).error_code == errors.NONE
    assert partition.start_offset == 8
    assert partition.in_flight == 0


def test_persisted_state_restores_with_acquired_records_available_and_counted() -> None:
    partition = SharePartition(100, LIMITS, state_epoch=3)
    partition.acquire("a", [(100, 109)], 100, now_ms=0)
    partition.acknowledge("a", [ack(100, 100), ack(102, 103, REJECT), ack(104, 104, RELEASE)], now_ms=0)
    persisted = partition.persisted()
    assert persisted == PersistedShareState(
        101,
        3,
        (
            StateBatch(101, 101, 0, 1),
            StateBatch(102, 103, 4, 1),
            StateBatch(104, 109, 0, 1),
        ),
    )
    restored = SharePartition.restore(persisted, LIMITS)
    assert restored.persisted() == persisted
    # Nothing is acquired after a restart: what was acquired is delivered again, counted.
    assert restored.acquire("b", [(100, 109)], 100, now_ms=0) == [
        AcquiredRange(101, 101, 2),
        AcquiredRange(104, 109, 2),
    ]


def test_a_record_acquired_at_the_delivery_limit_is_archived_by_a_restart() -> None:
    partition = SharePartition(0, LIMITS)
    for _ in range(LIMITS.delivery_count_limit - 1):
        partition.acquire("a", [(0, 1)], 10, now_ms=0)
        partition.acknowledge("a", [ack(0, 1, RELEASE)], now_ms=0)
    assert partition.acquire("a", [(0, 1)], 10, now_ms=0) == [
        AcquiredRange(0, 1, LIMITS.delivery_count_limit)
    ]
    persisted = partition.persisted()
    assert persisted.batches == (StateBatch(0, 1, int(RecordState.ARCHIVED), LIMITS.delivery_count_limit),)
    restored = SharePartition.restore(persisted, LIMITS)
    assert restored.start_offset == 2
    assert restored.acquire("b", [(0, 1)], 10, now_ms=0) == []


def test_reset_start_offset_forgets_the_window_and_bumps_the_state_epoch() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("a", [(0, 4)], 10, now_ms=0)
    partition.reset_start_offset(50)
    assert (partition.start_offset, partition.end_offset, partition.state_epoch) == (50, 50, 1)
    assert partition.acquire("a", [(0, 4)], 10, now_ms=0) == []
    assert partition.acquire("a", [(50, 51)], 10, now_ms=0) == [AcquiredRange(50, 51, 1)]


MEMBERS = st.sampled_from(["m1", "m2", "m3"])


class SharePartitionModel(RuleBasedStateMachine):
    """Random interleavings against the rules that must always hold: a record is held by at most
    one member, an accepted record is never delivered again, no record is delivered more often
    than the limit, the window stays bounded, and what is persisted restores to the same state."""

    def __init__(self) -> None:
        super().__init__()
        self.partition = SharePartition(0, LIMITS)
        self.now = 0
        self.log_end = 0
        self.accepted: set[int] = set()
        self.held: dict[int, str] = {}
        self.deliveries: dict[int, int] = {}

    @rule(records=st.integers(1, 8))
    def produce(self, records: int) -> None:
        self.log_end += records

    @rule(member=MEMBERS, max_records=st.integers(1, 12), strict=st.booleans())
    def fetch(self, member: str, max_records: int, strict: bool) -> None:
        start = self.partition.next_fetch_offset()
        batches = [(o, min(o + 2, self.log_end - 1)) for o in range(start, self.log_end, 3)]
        for r in self.partition.acquire(member, batches, max_records, self.now, strict):
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset not in self.accepted
                assert offset not in self.held
                self.held[offset] = member
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert r.delivery_count == self.deliveries[offset] <= LIMITS.delivery_count_limit

    @rule(member=MEMBERS, data=st.data())
    def acknowledge(self, member: str, data: st.DataObject) -> None:
        mine = sorted(o for o, m in self.held.items() if m == member)
        if not mine:
            return
        chosen = data.draw(st.lists(st.sampled_from(mine), min_size=1, max_size=4, unique=True))
        kinds = data.draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=len(chosen), max_size=len(chosen)))
        batches = [ack(o, o, (k,)) for o, k in zip(sorted(chosen), kinds, strict=True)]
        assert self.partition.acknowledge(member, batches, self.now).error_code == errors.NONE
        for o, k in zip(sorted(chosen), kinds, strict=True):
            if k != AcknowledgeType.RENEW:
                del self.held[o]
            if k == AcknowledgeType.ACCEPT:
                self.accepted.add(o)

    @rule(member=MEMBERS)
    def leave(self, member: str) -> None:
        self.partition.release_member(member)
        self.held = {o: m for o, m in self.held.items() if m != member}

    @rule(ms=st.integers(1, 40_000))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        self.partition.expire_locks(self.now)
        self.held = {
            o: m for o, m in self.held.items() if self.partition.state_of(o)[0] is RecordState.ACQUIRED
        }

    @rule()
    def restart(self) -> None:
        self.partition = SharePartition.restore(self.partition.persisted(), LIMITS)
        self.held.clear()

    @invariant()
    def rules_hold(self) -> None:
        p = self.partition
        assert p.in_flight <= LIMITS.max_record_locks
        assert p.acquired_count() == len(self.held)
        for offset in self.accepted:
            assert p.state_of(offset)[0] is RecordState.ACKNOWLEDGED
        once = SharePartition.restore(p.persisted(), LIMITS).persisted()
        assert SharePartition.restore(once, LIMITS).persisted() == once


TestSharePartitionModel = SharePartitionModel.TestCase
TestSharePartitionModel.settings = settings(
    max_examples=1000 if os.environ.get("HYPOTHESIS_PROFILE") == "long" else 60,
    stateful_step_count=40,
    deadline=None,
)
