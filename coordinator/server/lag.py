"""Consumer lag for Prometheus: committed offsets here against log-end offsets of the data cluster.

Every ``lag.sample.interval.ms`` the sampler reads the committed offset of every partition of
every group (classic, simple and KIP-848 groups, through the shard's read-only request API),
asks an injected ``end_offsets(partitions)`` function for their log-end offsets (in gateway mode:
ListOffsets(latest) on the upstream cluster) and keeps the result for the next scrapes:

- ``coordinator_group_lag{group,topic}``: records between the committed offsets and the log
  ends, summed over the topic's partitions that have a committed offset;
- ``coordinator_group_partition_lag{group,topic,partition}``: the same per partition.

A lag is never a guess. A partition whose log end is missing from the answer, or lies before the
committed offset (no log end of the log the offset was read from), has no partition series, and
its topic has no topic series (a partial sum would understate the lag). When ``end_offsets``
fails, every lag series disappears until a sample succeeds again (one log line per incident).

Cardinality is bounded by ``lag.metric.max.series`` (default 10000) over both families: the topic
series come first, then the partition series, each in (group, topic, partition) order, so the
same series survive from one sample to the next. What does not fit is counted in
``coordinator_group_lag_series_dropped_total`` and logged once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.server.tasks import cancel_and_wait
from protocol.errors import ErrorCode
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup

log = logging.getLogger(__name__)

Partition = tuple[str, int]
EndOffsets = Callable[[list[Partition]], Awaitable[dict[Partition, int]]]
CommittedOffsets = Callable[[], Awaitable[dict[str, dict[Partition, int]]]]
# Called after each good sample: committed offsets by group, log ends, wall-clock ms of the sample.
SampleListener = Callable[[Mapping[str, Mapping[Partition, int]], Mapping[Partition, int], int], None]

DEFAULT_INTERVAL_MS = 30000
DEFAULT_MAX_SERIES = 10000
GROUPS_PER_READ = 100  # groups per OffsetFetch the sampler reads between two turns of the event loop
_LIST_GROUPS_VERSION = 5  # classic and consumer groups
_OFFSET_FETCH_VERSION = 8  # several groups per request, no member checks


class CoreClock(Protocol):
    def now_ms(self) -> int: ...

    def wall_ms(self) -> int: ...


class _ReadOnly:
    """The reply token of a read the sampler makes itself (its response is taken from the Result)."""

    __slots__ = ()

    def send(self, response: Any) -> None:  # never called: the sampler is its own runtime
        pass


def shard_committed_offsets(
    shards: Sequence[GroupCoordinator], clock: CoreClock, groups_per_read: int = GROUPS_PER_READ
) -> CommittedOffsets:
    """Committed offsets of every group of the shards, read as a client would (ListGroups, OffsetFetch).

    These requests only read: their Results carry no records, so nothing is written or changed.
    Groups are read ``groups_per_read`` at a time with the event loop let go in between, so that
    a server with many groups keeps answering while it is sampled.
    """

    def ask(
        shard: GroupCoordinator, call: Callable[[RequestContext, Any], Any], version: int, req: Any
    ) -> Any:
        reply_to = _ReadOnly()
        ctx = RequestContext(clock.now_ms(), clock.wall_ms(), version, "lag-sampler", "", reply_to)
        result = call(ctx, req)
        if result.records or result.on_durable is not None:
            raise RuntimeError("a read-only request produced records to write")
        return next(response for to, response in result.replies if to is reply_to)

    async def read() -> dict[str, dict[Partition, int]]:
        offsets: dict[str, dict[Partition, int]] = {}
        for shard in shards:
            listed = ask(shard, shard.list_groups, _LIST_GROUPS_VERSION, ListGroupsRequest())
            groups = [g.group_id for g in listed.groups]
            for start in range(0, len(groups), groups_per_read):
                await asyncio.sleep(0)
                chunk = groups[start : start + groups_per_read]
                request = OffsetFetchRequest(
                    groups=[OffsetFetchRequestGroup(group_id=g, topics=None) for g in chunk]
                )
                fetched = ask(shard, shard.fetch_offsets, _OFFSET_FETCH_VERSION, request)
                for group in fetched.groups:
                    if group.error_code != ErrorCode.NONE:
                        continue
                    partitions = {
                        (topic.name, p.partition_index): p.committed_offset
                        for topic in group.topics
                        for p in topic.partitions
                        if p.error_code == ErrorCode.NONE and p.committed_offset >= 0
                    }
                    if partitions:
                        offsets[group.group_id] = partitions
        return offsets

    return read


@dataclass(frozen=True, slots=True)
class LagSample:
    """One sample, as exported: series that fit the budget, and how many did not."""

    topic_lag: dict[tuple[str, str], int] = field(default_factory=dict)  # (group, topic) -> records
    partition_lag: dict[tuple[str, str, int], int] = field(default_factory=dict)
    dropped: int = 0
    timestamp: float = 0.0  # wall-clock seconds


def compute_lag(
    committed: Mapping[str, Mapping[Partition, int]],
    ends: Mapping[Partition, int],
    max_series: int,
    timestamp: float,
) -> LagSample:
    """Lag per (group, topic) and per partition where it is known, within the series budget."""
    topic_lag: dict[tuple[str, str], int] = {}
    partition_lag: dict[tuple[str, str, int], int] = {}
    unknown_topics: set[tuple[str, str]] = set()
    for group, offsets in committed.items():
        for (topic, partition), offset in offsets.items():
            end = ends.get((topic, partition))
            if end is None or end < offset:
                unknown_topics.add((group, topic))
                continue
            lag = end - offset
            partition_lag[(group, topic, partition)] = lag
            key = (group, topic)
            topic_lag[key] = topic_lag.get(key, 0) + lag
    for key in unknown_topics:
        topic_lag.pop(key, None)
    topic_keys = sorted(topic_lag)[:max_series]
    room = max_series - len(topic_keys)
    partition_keys = sorted(partition_lag)[:room] if room > 0 else []
    dropped = len(topic_lag) - len(topic_keys) + len(partition_lag) - len(partition_keys)
    return LagSample(
        {k: topic_lag[k] for k in topic_keys},
        {k: partition_lag[k] for k in partition_keys},
        dropped,
        timestamp,
    )


class LagSampler:
    """Samples lag every ``interval_ms`` and exposes it to Prometheus through ``register``.

    ``committed`` reads the committed offsets (``shard_committed_offsets`` for a running server);
    ``end_offsets`` answers the log-end offset of the partitions it knows (in gateway mode the
    upstream client's ListOffsets(latest)). ``clock`` (wall seconds) and ``sleep`` are injectable
    for tests. A sample that takes longer than the interval is abandoned as failed.
    """

    def __init__(
        self,
        committed: CommittedOffsets,
        end_offsets: EndOffsets,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        max_series: int = DEFAULT_MAX_SERIES,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_sample: SampleListener | None = None,
    ) -> None:
        if interval_ms < 1 or max_series < 1:
            raise ValueError("interval_ms and max_series must be positive")
        self._committed = committed
        self._end_offsets = end_offsets
        self.interval_ms = interval_ms
        self.max_series = max_series
        self._clock = clock
        self._sleep = sleep
        self._on_sample = on_sample
        self.latest: LagSample | None = None
        self.samples_ok = 0
        self.samples_failed = 0
        self.dropped_total = 0
        self._failing = False
        self._told_about_dropping = False
        self._told_end_behind = False
        self._task: asyncio.Task[None] | None = None

    async def sample_once(self) -> LagSample | None:
        """Take one sample; None (and no lag series) when the log ends could not be had."""
        try:
            committed = await self._committed()
            partitions = sorted({tp for offsets in committed.values() for tp in offsets})
            ends = (
                await asyncio.wait_for(self._end_offsets(partitions), self.interval_ms / 1000)
                if partitions
                else {}
            )
        except Exception as exc:  # the data cluster's failure must not stop the sampler
            self.samples_failed += 1
            self.latest = None
            if not self._failing:
                self._failing = True
                log.warning("lag sampling failed, no lag metrics until it succeeds again: %r", exc)
            return None
        if self._failing:
            self._failing = False
            log.info("lag sampling succeeds again")
        # In a worker thread: with many groups this takes tens of milliseconds, and the interpreter
        # hands the event loop its turn every few milliseconds meanwhile.
        now = self._clock()
        sample = await asyncio.to_thread(compute_lag, committed, ends, self.max_series, now)
        if self._on_sample is not None:
            self._on_sample(committed, ends, int(now * 1000))
        self.samples_ok += 1
        self.dropped_total += sample.dropped
        if sample.dropped and not self._told_about_dropping:
            self._told_about_dropping = True
            log.warning(
                "lag metrics limited to %d series (lag.metric.max.series): %d left out; "
                "counted in coordinator_group_lag_series_dropped_total from now on",
                self.max_series,
                sample.dropped,
            )
        if not self._told_end_behind:
            self._tell_end_behind(committed, ends)
        self.latest = sample
        return sample

    def _tell_end_behind(
        self, committed: Mapping[str, Mapping[Partition, int]], ends: Mapping[Partition, int]
    ) -> None:
        """Once: a log end before a committed offset is no log end of the log that offset was read
        from, so that partition's lag is left out (docs/gateway.md#log-ends-and-lag)."""
        for group, offsets in committed.items():
            for tp, offset in offsets.items():
                end = ends.get(tp)
                if end is not None and end < offset:
                    self._told_end_behind = True
                    log.warning(
                        "the log end reported for %s-%d (%d) is behind group %s's committed offset %d: "
                        "its lag is left out. Through a gateway, the upstream cluster answers "
                        "ListOffsets(latest) behind its log (Tansu 0.6 answers the last batch's base "
                        "offset + 1) and no client has fetched the partition through the gateway yet",
                        tp[0], tp[1], end, group, offset,
                    )  # fmt: skip
                    return

    async def run(self) -> None:
        while True:
            await self.sample_once()
            await self._sleep(self.interval_ms / 1000)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run(), name="lag-sampler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def register(self, registry: CollectorRegistry) -> None:
        registry.register(_LagCollector(self))


class _LagCollector(Collector):
    """The latest sample, read at scrape time."""

    def __init__(self, sampler: LagSampler) -> None:
        self._sampler = sampler

    def collect(self) -> Iterable[Any]:
        sampler = self._sampler
        sample = sampler.latest or LagSample()
        by_topic = GaugeMetricFamily(
            "coordinator_group_lag",
            "Records between the committed offsets and the log ends, per group and topic",
            labels=["group", "topic"],
        )
        for (group, topic), lag in sample.topic_lag.items():
            by_topic.add_metric([group, topic], lag)
        yield by_topic
        by_partition = GaugeMetricFamily(
            "coordinator_group_partition_lag",
            "Records between the committed offset and the log end, per partition",
            labels=["group", "topic", "partition"],
        )
        for (group, topic, partition), lag in sample.partition_lag.items():
            by_partition.add_metric([group, topic, str(partition)], lag)
        yield by_partition
        if sampler.latest is not None:
            yield GaugeMetricFamily(
                "coordinator_group_lag_sample_timestamp_seconds",
                "When the lag metrics were sampled (wall clock)",
                value=sampler.latest.timestamp,
            )
        samples = CounterMetricFamily(
            "coordinator_group_lag_samples", "Lag samples taken, by result", labels=["result"]
        )
        samples.add_metric(["ok"], sampler.samples_ok)
        samples.add_metric(["failed"], sampler.samples_failed)
        yield samples
        yield CounterMetricFamily(
            "coordinator_group_lag_series_dropped",
            "Lag series left out of samples by lag.metric.max.series",
            value=sampler.dropped_total,
        )
