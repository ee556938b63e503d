"""The dead-letter writer (coordinator/gateway/dead_letters.py) is woken by the core once records
written ARCHIVING are durable: their dead letters go out at once, without waiting for its
periodic scan, and acknowledgements that archive nothing do not make it scan."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import (
    ShareAcknowledgeOp,
    ShareAcquireOp,
    ShareInitializeOp,
    ShareOutcome,
)
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import AcknowledgementBatch, AcknowledgeType
from coordinator.gateway.dead_letters import DeadLetterWriter
from coordinator.gateway.share_upstream import UpstreamShareRecords
from tests.coordinator.harness import Harness
from tests.coordinator.test_group_configs import SET, outcome
from tests.coordinator.test_share_delivery import run
from tests.coordinator.test_share_groups import beat

ACCEPT = (int(AcknowledgeType.ACCEPT),)
REJECT = (int(AcknowledgeType.REJECT),)


class Catalog:
    def partitions_of(self, topic: str) -> int | None:
        return 1 if topic == "dlq.g" else None


class Upstream:
    catalog = Catalog()
    timeout_s = 1.0


class Records:
    """The upstream as the writer sees it: produced batches are recorded and accepted."""

    def __init__(self) -> None:
        self.upstream = Upstream()
        self.produced: list[tuple[str, int]] = []

    async def produce(self, topic: str, partition: int, batch: bytes) -> int:
        self.produced.append((topic, partition))
        return 0


@pytest.mark.asyncio
async def test_dead_letters_are_written_when_the_core_says_records_wait_for_them() -> None:
    h = Harness(BrokerGroupSettings())
    h.catalog.set_topic("t", 1)
    assert outcome(h, ("errors.deadletterqueue.topic.name", SET, "dlq.g")) == (0, None)
    beat(h, "m1")
    manager = h.coordinator.kind(ShareGroupManager)
    records = Records()

    async def operate(op: object) -> ShareOutcome:
        value = run(h, op).value
        assert isinstance(value, ShareOutcome)
        return value

    upstream_records: UpstreamShareRecords = records  # type: ignore[assignment]
    writer = DeadLetterWriter(lambda: manager, upstream_records, operate, lambda: 0, interval_s=3600)
    manager.dead_letters_due = writer.wake
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m1", {("t", 0): [(0, 9)]}, 100))
    writer.start()
    try:
        await wait_for(lambda: writer.passes == 1)  # the pass at start (a restart resumes there)
        for offset in range(5):  # acknowledgements that archive nothing: no scan
            run(h, ShareAcknowledgeOp("g", "m1", {("t", 0): [AcknowledgementBatch(offset, offset, ACCEPT)]}))
        run(h, ShareAcknowledgeOp("g", "m1", {("t", 0): [AcknowledgementBatch(5, 6, REJECT)]}))
        # Long before the periodic scan (an hour): woken by the rejection.
        await wait_for(lambda: writer.written == 2 and manager.dead_letters_pending() == {})
        assert records.produced == [("dlq.g", 0)] and writer.passes == 2
    finally:
        await writer.stop()


async def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.005)
