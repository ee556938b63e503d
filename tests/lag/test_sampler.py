"""The lag sampler with fake log ends and an injected clock: values, unknown ends, failures, budget."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from coordinator.server.lag import (
    CommittedOffsets,
    LagSampler,
    Partition,
    compute_lag,
    shard_committed_offsets,
)
from tests.coordinator.consumer_harness import cg_heartbeat
from tests.coordinator.harness import Harness

COMMITTED = {
    "billing": {("orders", 0): 10, ("orders", 1): 20, ("payments", 0): 5},
    "audit": {("orders", 0): 40},
}
ENDS = {("orders", 0): 50, ("orders", 1): 25, ("payments", 0): 5}


class FakeEnds:
    """end_offsets as the gateway's upstream client answers it; can fail or hang on demand."""

    def __init__(self, ends: dict[Partition, int]) -> None:
        self.ends = ends
        self.asked: list[list[Partition]] = []
        self.failure: Exception | None = None
        self.hang = False

    async def __call__(self, partitions: list[Partition]) -> dict[Partition, int]:
        self.asked.append(partitions)
        if self.failure is not None:
            raise self.failure
        if self.hang:
            await asyncio.Event().wait()
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}


def reading(committed: dict[str, dict[Partition, int]]) -> CommittedOffsets:
    async def read() -> dict[str, dict[Partition, int]]:
        return committed

    return read


def sampler_for(
    ends: FakeEnds, committed: dict[str, dict[Partition, int]] | None = None, **kwargs: int
) -> tuple[LagSampler, CollectorRegistry]:
    sampler = LagSampler(reading(committed or COMMITTED), ends, clock=lambda: 1700000000.5, **kwargs)
    registry = CollectorRegistry()
    sampler.register(registry)
    return sampler, registry


def test_lag_per_topic_and_partition() -> None:
    sample = compute_lag(COMMITTED, ENDS, max_series=100, timestamp=1.0)
    assert sample.topic_lag == {
        ("audit", "orders"): 10,
        ("billing", "orders"): 45,
        ("billing", "payments"): 0,
    }
    assert sample.partition_lag == {
        ("audit", "orders", 0): 10,
        ("billing", "orders", 0): 40,
        ("billing", "orders", 1): 5,
        ("billing", "payments", 0): 0,
    }
    assert sample.dropped == 0


def test_an_unknown_log_end_hides_the_partition_and_its_topic_sum_never_a_wrong_number() -> None:
    ends = {("orders", 0): 50, ("payments", 0): 0}  # orders-1 unknown; payments-0 ends before the commit
    sample = compute_lag(COMMITTED, ends, max_series=100, timestamp=1.0)
    assert sample.topic_lag == {("audit", "orders"): 10}
    assert sample.partition_lag == {("audit", "orders", 0): 10, ("billing", "orders", 0): 40}


def test_series_beyond_the_budget_are_dropped_topics_first_in_a_stable_order() -> None:
    sample = compute_lag(COMMITTED, ENDS, max_series=4, timestamp=1.0)
    assert list(sample.topic_lag) == [("audit", "orders"), ("billing", "orders"), ("billing", "payments")]
    assert list(sample.partition_lag) == [("audit", "orders", 0)]
    assert sample.dropped == 3
    tight = compute_lag(COMMITTED, ENDS, max_series=2, timestamp=1.0)
    assert list(tight.topic_lag) == [("audit", "orders"), ("billing", "orders")]
    assert (tight.partition_lag, tight.dropped) == ({}, 5)


@pytest.mark.asyncio
async def test_the_metrics_show_the_latest_sample() -> None:
    ends = FakeEnds(ENDS)
    sampler, registry = sampler_for(ends)
    assert registry.get_sample_value("coordinator_group_lag", {"group": "billing", "topic": "orders"}) is None
    assert registry.get_sample_value("coordinator_group_lag_sample_timestamp_seconds") is None
    await sampler.sample_once()
    assert ends.asked == [[("orders", 0), ("orders", 1), ("payments", 0)]]  # each partition once
    value = registry.get_sample_value
    assert value("coordinator_group_lag", {"group": "billing", "topic": "orders"}) == 45
    assert value("coordinator_group_lag", {"group": "audit", "topic": "orders"}) == 10
    labels = {"group": "billing", "topic": "orders", "partition": "1"}
    assert value("coordinator_group_partition_lag", labels) == 5
    assert value("coordinator_group_lag_sample_timestamp_seconds") == 1700000000.5
    assert value("coordinator_group_lag_samples_total", {"result": "ok"}) == 1
    ends.ends = {**ENDS, ("orders", 1): 30}
    await sampler.sample_once()
    assert value("coordinator_group_lag", {"group": "billing", "topic": "orders"}) == 50


@pytest.mark.asyncio
async def test_a_failed_sample_removes_every_lag_series_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ends = FakeEnds(ENDS)
    sampler, registry = sampler_for(ends)
    await sampler.sample_once()
    ends.failure = ConnectionError("upstream unreachable")
    with caplog.at_level(logging.INFO, logger="coordinator.server.lag"):
        assert await sampler.sample_once() is None
        assert await sampler.sample_once() is None
        failures = [r for r in caplog.records if "lag sampling failed" in r.getMessage()]
        assert len(failures) == 1 and "upstream unreachable" in failures[0].getMessage()
        value = registry.get_sample_value
        assert value("coordinator_group_lag", {"group": "billing", "topic": "orders"}) is None
        assert value("coordinator_group_lag_sample_timestamp_seconds") is None
        assert value("coordinator_group_lag_samples_total", {"result": "failed"}) == 2
        ends.failure = None
        await sampler.sample_once()
        assert value("coordinator_group_lag", {"group": "billing", "topic": "orders"}) == 45
        assert any("lag sampling succeeds again" in r.getMessage() for r in caplog.records)


@pytest.mark.asyncio
async def test_a_sample_that_outlasts_the_interval_is_abandoned() -> None:
    ends = FakeEnds(ENDS)
    ends.hang = True
    sampler, registry = sampler_for(ends, interval_ms=20)
    assert await sampler.sample_once() is None
    assert registry.get_sample_value("coordinator_group_lag_samples_total", {"result": "failed"}) == 1


@pytest.mark.asyncio
async def test_dropped_series_are_counted_every_sample_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sampler, registry = sampler_for(FakeEnds(ENDS), max_series=4)
    with caplog.at_level(logging.WARNING, logger="coordinator.server.lag"):
        await sampler.sample_once()
        await sampler.sample_once()
    assert registry.get_sample_value("coordinator_group_lag_series_dropped_total") == 6
    lines = [r.getMessage() for r in caplog.records if "lag.metric.max.series" in r.getMessage()]
    assert lines == [
        "lag metrics limited to 4 series (lag.metric.max.series): 3 left out; "
        "counted in coordinator_group_lag_series_dropped_total from now on"
    ]


@pytest.mark.asyncio
async def test_the_sampler_runs_on_its_interval() -> None:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise asyncio.CancelledError

    ends = FakeEnds(ENDS)
    sampler = LagSampler(reading(COMMITTED), ends, interval_ms=1500, sleep=sleep)
    with pytest.raises(asyncio.CancelledError):
        await sampler.run()
    assert (len(ends.asked), sleeps) == (3, [1.5, 1.5, 1.5])


@pytest.mark.asyncio
async def test_no_groups_no_question_to_the_cluster() -> None:
    ends = FakeEnds(ENDS)
    sampler, _registry = sampler_for(ends, committed={"idle": {}})
    sample = await sampler.sample_once()
    assert sample is not None and (sample.topic_lag, ends.asked) == ({}, [])


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        LagSampler(reading({}), FakeEnds({}), interval_ms=0)


class _HarnessClock:
    def __init__(self, h: Harness) -> None:
        self.h = h

    def now_ms(self) -> int:
        return self.h.now_ms

    def wall_ms(self) -> int:
        return self.h.wall_ms


def test_committed_offsets_of_every_group_are_read_from_the_shard_without_writing() -> None:
    h = Harness()
    h.catalog.set_topic("t", 2)
    h.commit("simple", {("t", 0): 7, ("t", 1): 9})
    h.commit("other", {("u", 3): 1})
    joined = cg_heartbeat(h, "kip848", "m1", topics=["t"]).response
    epoch = joined.member_epoch
    committed = h.commit("kip848", {("t", 1): 4}, member_id="m1", generation=epoch, version=9).wire
    assert committed.topics[0].partitions[0].error_code == 0
    h.commit("empty", {("t", 0): 1})
    h.delete_offsets("empty", {"t": [0]})  # a group without offsets left has nothing to report
    written = len(h.store.records())
    read = shard_committed_offsets([h.coordinator], _HarnessClock(h), groups_per_read=2)
    assert asyncio.run(read()) == {
        "simple": {("t", 0): 7, ("t", 1): 9},
        "other": {("u", 3): 1},
        "kip848": {("t", 1): 4},
    }
    assert len(h.store.records()) == written


def test_a_log_end_behind_a_committed_offset_is_told_once(caplog: pytest.LogCaptureFixture) -> None:
    # Tansu 0.6 through a gateway before any fetch: ListOffsets(latest) answers 1 after one batch.
    sampler, _registry = sampler_for(FakeEnds({**ENDS, ("payments", 0): 1}))
    with caplog.at_level(logging.WARNING, logger="coordinator.server.lag"):
        for _ in range(3):
            asyncio.run(sampler.sample_once())
    [warning] = [r.getMessage() for r in caplog.records]
    assert "the log end reported for payments-0 (1) is behind group billing's committed offset 5" in warning
    assert "Tansu 0.6 answers the last batch's base offset + 1" in warning
