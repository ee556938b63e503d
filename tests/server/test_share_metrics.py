"""Share groups' delivery metrics (coordinator/server/share_metrics.py): per group the records
acquired, delivered again, accepted, released, rejected, archived, whose lock ran out, in flight
and acquired now, with group labels bounded to the top groups."""

from __future__ import annotations

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import ShareAcknowledgeOp, ShareAcquireOp, ShareInitializeOp
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import AcknowledgementBatch, AcknowledgeType
from coordinator.server.share_metrics import ShareMetricsCollector
from tests.coordinator.harness import Harness
from tests.coordinator.test_share_delivery import run
from tests.coordinator.test_share_groups import beat
from tests.server.test_group_metrics import scrape

LOCK_MS = 1000
ACCEPT, RELEASE, REJECT, GAP = (int(t) for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                                  AcknowledgeType.REJECT, AcknowledgeType.GAP))  # fmt: skip


def harness() -> Harness:
    h = Harness(
        BrokerGroupSettings(
            group_initial_rebalance_delay_ms=0,
            group_share_record_lock_duration_ms=LOCK_MS,
            group_share_delivery_count_limit=2,
        )
    )
    h.catalog.set_topic("t", 2)
    return h


def ack(h: Harness, group: str, first: int, last: int, kind: int, partition: int = 0) -> None:
    op = ShareAcknowledgeOp(group, "m", {("t", partition): [AcknowledgementBatch(first, last, (kind,))]})
    outcome = run(h, op).value
    assert outcome is not None and outcome.errors[("t", partition)] == (0, None)


def test_every_delivery_event_is_counted_per_group() -> None:
    h = harness()
    beat(h, "m")
    collector = ShareMetricsCollector(h.coordinator.kind(ShareGroupManager).share_metrics)
    run(h, ShareInitializeOp("g", {("t", 0): 0, ("t", 1): 0}))
    run(h, ShareAcquireOp("g", "m", {("t", 0): [(0, 9)], ("t", 1): [(0, 1)]}, 100))
    ack(h, "g", 0, 3, ACCEPT)
    ack(h, "g", 4, 4, REJECT)
    ack(h, "g", 5, 5, GAP)
    ack(h, "g", 6, 7, RELEASE)
    h.advance(LOCK_MS + 10)  # 8, 9 and partition 1's two records: their locks run out
    run(h, ShareAcquireOp("g", "m", {("t", 0): [(6, 9)]}, 100))  # delivered again, count 2
    ack(h, "g", 6, 6, RELEASE)  # at the delivery limit: archived
    samples = scrape(collector)  # type: ignore[arg-type]

    def records(event: str) -> float:
        return samples[f'coordinator_share_group_records_total{{event="{event}",group="g"}}']

    assert records("acquired") == 16 and records("redelivered") == 4
    assert (records("accepted"), records("released"), records("rejected")) == (4, 3, 1)
    assert records("archived") == 3  # the reject, the gap, the release at the limit
    assert records("lock_expired") == 4
    # In flight: partition 0's window 7..9 (6 archived moved the start; 7, 8, 9 acquired) and
    # partition 1's two available records.
    assert samples['coordinator_share_group_records_in_flight{group="g"}'] == 5
    assert samples['coordinator_share_group_records_acquired{group="g"}'] == 3


def test_group_labels_are_bounded_and_a_deleted_group_goes() -> None:
    h = harness()
    manager = h.coordinator.kind(ShareGroupManager)
    for n in range(5):
        group = f"g{n}"
        beat(h, "m", group=group)
        run(h, ShareInitializeOp(group, {("t", 0): 0}))
        run(h, ShareAcquireOp(group, "m", {("t", 0): [(0, n)]}, 100))
    samples = scrape(ShareMetricsCollector(manager.share_metrics, top_groups=2))  # type: ignore[arg-type]
    groups = {k.split('group="')[1].split('"')[0] for k in samples if "group=" in k}
    assert groups == {"g3", "g4"}  # most records acquired

    beat(h, "m", epoch=-1, group="g4")
    assert "g4" in {totals[0] for totals in manager.share_metrics()}
    manager.forget_partitions({"g4"})  # unloaded or deleted: its series go with it
    assert "g4" not in {totals[0] for totals in manager.share_metrics()}
