"""The share-partition leader's state in the core (coordinator/core/share/delivery.py): every
operation's state is written through the shard before its outcome is given, lock expiry is a
core timer, a member leaving releases what it holds, a restart resumes from the stored rows
(docs/share-groups.md, "The data plane")."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.context import RequestContext
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import (
    ShareAcknowledgeOp,
    ShareAcquireOp,
    ShareInitializeOp,
    ShareOutcome,
    ShareReleaseOp,
)
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import AcknowledgementBatch, AcknowledgeType, RecordState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness
from tests.coordinator.test_share_groups import beat

LOCK_MS = 1000


class Outcome:
    def __init__(self, store_batches: int, harness: Harness) -> None:
        self.harness = harness
        self.batches_before = store_batches
        self.value: ShareOutcome | None = None
        self.batches_at_answer = -1

    def send(self, response: Any) -> None:
        assert isinstance(response, ShareOutcome)
        self.value = response
        self.batches_at_answer = len(self.harness.store.batches)


def run(h: Harness, op: object) -> Outcome:
    reply = Outcome(len(h.store.batches), h)
    ctx = RequestContext(h.now_ms, h.wall_ms, 0, "", "", reply)
    h.apply(h.coordinator.handle(ctx, op))
    assert reply.value is not None
    return reply


@pytest.fixture
def h() -> Harness:
    harness = Harness(
        BrokerGroupSettings(group_share_record_lock_duration_ms=LOCK_MS, group_share_delivery_count_limit=2)
    )
    harness.catalog.set_topic("t", 1)
    beat(harness, "m1")
    beat(harness, "m2")
    return harness


def state(h: Harness, offset: int) -> RecordState:
    partition = h.coordinator.kind(ShareGroupManager).partition(("g", "t", 0))
    assert partition is not None
    return partition.state_of(offset)[0]


def test_operations_are_answered_after_their_state_is_written(h: Harness) -> None:
    started = run(h, ShareInitializeOp("g", {("t", 0): 10}))
    assert h.store.share_partitions[("g", "t", 0)].start_offset == 10
    assert started.batches_at_answer == started.batches_before + 1

    acquired = run(h, ShareAcquireOp("g", "m1", {("t", 0): [(10, 14)]}, 100))
    assert acquired.value is not None
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in acquired.value.acquired[("t", 0)]] == [
        (10, 14, 1)
    ]
    assert acquired.batches_at_answer == acquired.batches_before + 1  # the delivery count is durable first
    # An acquired record is stored as its lock running out would leave it: available, counted.
    assert h.store.share_partitions[("g", "t", 0)].batches == ((10, 14, 0, 1),)

    other = run(h, ShareAcknowledgeOp("g", "m2", {("t", 0): [AcknowledgementBatch(10, 10, (1,))]}))
    assert other.value is not None and other.value.errors[("t", 0)][0] == ErrorCode.INVALID_RECORD_STATE

    accepted = run(
        h,
        ShareAcknowledgeOp(
            "g", "m1", {("t", 0): [AcknowledgementBatch(10, 11, (int(AcknowledgeType.ACCEPT),))]}
        ),
    )
    assert accepted.value is not None and accepted.value.errors[("t", 0)] == (0, None)
    assert h.store.share_partitions[("g", "t", 0)].start_offset == 12
    ghost = run(h, ShareAcquireOp("g", "nobody", {("t", 0): [(15, 15)]}, 100))
    assert ghost.value is not None and ghost.value.errors[("t", 0)][0] == ErrorCode.UNKNOWN_MEMBER_ID


def test_locks_run_out_on_a_core_timer_and_a_leaving_member_releases(h: Harness) -> None:
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(0, 1)]}, 100))
    h.advance(LOCK_MS + 20)
    assert state(h, 0) == RecordState.AVAILABLE
    assert h.store.share_partitions[("g", "t", 0)].batches == ((0, 1, 0, 1),)

    again = run(h, ShareAcquireOp("g", "m2", {("t", 0): [(0, 1)]}, 100))
    assert again.value is not None and again.value.acquired[("t", 0)][0].delivery_count == 2
    beat(h, "m2", epoch=-1)  # m2 leaves: at the limit (2), its records are archived
    assert state(h, 0) == RecordState.ACKNOWLEDGED  # archived and below the start offset
    assert h.store.share_partitions[("g", "t", 0)].start_offset == 2


def test_a_closed_session_releases_and_a_restart_resumes(h: Harness) -> None:
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(0, 2)]}, 100))
    run(h, ShareAcknowledgeOp("g", "m1", {("t", 0): [AcknowledgementBatch(0, 0, (1,))]}))
    run(h, ShareReleaseOp("g", "m1"))
    assert state(h, 1) == RecordState.AVAILABLE

    restarted = h.restart()
    partition = restarted.coordinator.kind(ShareGroupManager).partition(("g", "t", 0))
    assert partition is not None
    assert (partition.start_offset, partition.next_fetch_offset()) == (1, 1)
    assert partition.state_of(2)[:2] == (RecordState.AVAILABLE, 1)  # its delivery count kept
