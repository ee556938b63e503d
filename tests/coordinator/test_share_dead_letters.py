"""Dead-letter topics of share groups in the core (docs/share-groups.md, "Dead-letter topics"): with
a dead-letter topic, archived records stay ARCHIVING (persisted so) until the runtime reports
their dead letters written; a restart finds them again; GAP never goes there."""

from __future__ import annotations

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import (
    ShareAcknowledgeOp,
    ShareAcquireOp,
    ShareDeadLetteredOp,
    ShareInitializeOp,
    ShareReleaseOp,
)
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    DeadLetterRun,
    RecordState,
    ShareLimits,
    SharePartition,
)
from tests.coordinator.harness import Harness
from tests.coordinator.test_group_configs import SET, outcome
from tests.coordinator.test_share_delivery import run
from tests.coordinator.test_share_groups import beat

REJECT = (int(AcknowledgeType.REJECT),)
GAP = (int(AcknowledgeType.GAP),)
ARCHIVING = int(RecordState.ARCHIVING)


def dead_lettering(limit: int = 2) -> SharePartition:
    partition = SharePartition(0, ShareLimits(delivery_count_limit=limit))
    partition.dead_letter = True
    return partition


def test_a_rejected_record_waits_archiving_and_holds_the_start_offset() -> None:
    partition = dead_lettering()
    partition.acquire("m", [(0, 3)], 10, 0)
    partition.acknowledge("m", [AcknowledgementBatch(0, 0, REJECT), AcknowledgementBatch(1, 1, GAP)], 0)
    partition.acknowledge("m", [AcknowledgementBatch(2, 3, (int(AcknowledgeType.ACCEPT),))], 0)
    assert partition.state_of(0)[0] == RecordState.ARCHIVING
    assert partition.state_of(1)[0] == RecordState.ARCHIVED  # a gap has no record to dead-letter
    assert partition.start_offset == 0  # not done until its dead letter is written
    assert partition.dead_letter_runs() == [DeadLetterRun(0, 0, 1)]
    assert partition.persisted().batches[0].delivery_state == ARCHIVING
    assert partition.next_fetch_offset() == 4  # never delivered again

    assert partition.dead_lettered(0, 0)
    assert (partition.start_offset, partition.dead_letter_runs()) == (4, [])
    assert not partition.dead_lettered(0, 0)  # already done: nothing changes


def test_records_at_the_delivery_limit_wait_archiving_and_survive_a_restore() -> None:
    partition = dead_lettering(limit=2)
    partition.acquire("m", [(0, 1)], 10, 0)
    partition.release_member("m")
    partition.acquire("m", [(0, 1)], 10, 0)
    # Still acquired on their last delivery: persisted as the lock running out would leave them.
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in partition.persisted().batches] == [
        (0, 1, ARCHIVING)
    ]
    partition.expire_locks(10**9)
    assert partition.dead_letter_runs() == [DeadLetterRun(0, 1, 2)]
    restored = SharePartition.restore(partition.persisted(), partition.limits)
    assert restored.dead_letter_runs() == [DeadLetterRun(0, 1, 2)]
    assert restored.start_offset == 0


def test_without_a_dead_letter_topic_archiving_is_final_at_once() -> None:
    partition = SharePartition(0, ShareLimits())
    partition.acquire("m", [(0, 0)], 10, 0)
    partition.acknowledge("m", [AcknowledgementBatch(0, 0, REJECT)], 0)
    assert partition.start_offset == 1 and partition.dead_letter_runs() == []


@pytest.fixture
def h() -> Harness:
    harness = Harness(BrokerGroupSettings(group_share_delivery_count_limit=2))
    harness.catalog.set_topic("t", 1)
    assert outcome(harness, ("errors.deadletterqueue.topic.name", SET, "dlq.g")) == (0, None)
    beat(harness, "m1")
    return harness


def test_pending_dead_letters_are_written_then_marked_and_a_restart_resumes_them(h: Harness) -> None:
    manager = h.coordinator.kind(ShareGroupManager)
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(0, 4)]}, 100))
    rejected = run(h, ShareAcknowledgeOp("g", "m1", {("t", 0): [AcknowledgementBatch(1, 2, REJECT)]}))
    # The rejection is answered once ARCHIVING is durable.
    assert rejected.batches_at_answer == rejected.batches_before + 1
    stored = h.store.share_partitions[("g", "t", 0)].batches
    assert (1, 2, ARCHIVING, 1) in stored
    run(h, ShareReleaseOp("g", "m1"))
    assert manager.dead_letters_pending() == {("g", "t", 0): [DeadLetterRun(1, 2, 1)]}

    restarted = h.restart()  # killed before the dead letters were written
    resumed = restarted.coordinator.kind(ShareGroupManager)
    assert resumed.dead_letters_pending() == {("g", "t", 0): [DeadLetterRun(1, 2, 1)]}

    marked = run(restarted, ShareDeadLetteredOp("g", {("t", 0): [DeadLetterRun(1, 2, 1)]}))
    assert marked.batches_at_answer == marked.batches_before + 1
    assert resumed.dead_letters_pending() == {}
    assert (1, 2, int(RecordState.ARCHIVED), 1) in restarted.store.share_partitions[("g", "t", 0)].batches


def test_the_runtime_is_told_once_records_waiting_archiving_are_durable(h: Harness) -> None:
    manager = h.coordinator.kind(ShareGroupManager)
    told: list[int] = []  # batches in storage when told
    manager.dead_letters_due = lambda: told.append(len(h.store.batches))
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(0, 5)]}, 100))
    run(
        h,
        ShareAcknowledgeOp(
            "g", "m1", {("t", 0): [AcknowledgementBatch(0, 0, (int(AcknowledgeType.ACCEPT),))]}
        ),
    )
    assert told == []  # nothing archived
    rejected = run(h, ShareAcknowledgeOp("g", "m1", {("t", 0): [AcknowledgementBatch(1, 1, REJECT)]}))
    assert told == [rejected.batches_before + 1]  # after the write that made it ARCHIVING
    run(h, ShareDeadLetteredOp("g", {("t", 0): [DeadLetterRun(1, 1, 1)]}))
    assert len(told) == 1  # none left ARCHIVING
    run(h, ShareReleaseOp("g", "m1"))  # 2-5 available again (delivered once, the limit is 2)
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(2, 3)]}, 100))
    h.advance(30_000 + 20)  # their locks run out on their last delivery: archived on the timer
    assert len(told) == 2 and manager.dead_letters_pending() == {("g", "t", 0): [DeadLetterRun(2, 3, 2)]}
    run(h, ShareDeadLetteredOp("g", {("t", 0): [DeadLetterRun(2, 3, 2)]}))
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(4, 5)]}, 100))
    beat(h, "m1", epoch=-1)  # the member leaves holding records on their last delivery
    assert len(told) == 3 and manager.dead_letters_pending() == {("g", "t", 0): [DeadLetterRun(4, 5, 2)]}
