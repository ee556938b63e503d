"""A share-partition's start offset follows the upstream's log start when records are deleted
(retention, DeleteRecords): what went unfinished is archived, as Kafka's share-partition does
(docs/share-groups.md, "One ShareFetch")."""

from __future__ import annotations

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import ShareAcquireOp, ShareInitializeOp, ShareLogStartOp
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    RecordState,
    ShareLimits,
    SharePartition,
)
from tests.coordinator.harness import Harness
from tests.coordinator.test_share_delivery import run
from tests.coordinator.test_share_groups import beat

LIMITS = ShareLimits(30_000, 5, 100)


def test_the_start_moves_to_the_log_start_and_archives_what_went() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("m", [(0, 9)], 100, 0)
    partition.acknowledge("m", [AcknowledgementBatch(0, 1, (int(AcknowledgeType.ACCEPT),))], 0)
    partition.acknowledge("m", [AcknowledgementBatch(2, 3, (int(AcknowledgeType.RELEASE),))], 0)
    assert partition.move_start_to_log_start(5)
    assert (partition.start_offset, partition.end_offset) == (5, 10)
    assert partition.counters.archived == 3  # 2, 3 available and 4 acquired; 0, 1 were done
    assert partition.state_of(5)[0] == RecordState.ACQUIRED  # past the log start: kept
    assert not partition.move_start_to_log_start(3)  # behind the start: nothing
    assert partition.persisted().start_offset == 5


def test_a_log_start_past_the_window_empties_it() -> None:
    partition = SharePartition(0, LIMITS)
    partition.acquire("m", [(0, 4)], 100, 0)
    assert partition.move_start_to_log_start(20)
    assert (partition.start_offset, partition.end_offset, partition.in_flight) == (20, 20, 0)
    assert partition.next_fetch_offset() == 20


def test_the_moved_start_is_written_before_it_is_answered() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    h.catalog.set_topic("t", 1)
    beat(h, "m")
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m", {("t", 0): [(0, 9)]}, 100))
    moved = run(h, ShareLogStartOp("g", {("t", 0): 6}))
    assert moved.batches_at_answer == moved.batches_before + 1
    assert h.store.share_partitions[("g", "t", 0)].start_offset == 6
    [target] = h.coordinator.kind(ShareGroupManager).fetch_targets("g", "m", [("t", 0)]).values()
    assert target.offset == 10  # 6..9 still acquired by m
