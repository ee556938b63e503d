"""Lag evaluation: lag in records and in seconds, and a Burrow-style status per group.

A sampler (gateway mode) reads each partition's log-end offset and the group's committed offset
on an interval and calls :meth:`LagTracker.observe`; everything here is pure, with the sample
times given by the caller.

*Lag in seconds* is estimated the way kafka-lag-exporter does: each partition keeps a table of
(log-end offset, first time it was seen); the time at which the log end passed the committed
offset is interpolated between the two points around it (extrapolated at the table's average
rate when the committed offset is older than the table), and the lag is now minus that time.

*Status* follows Burrow's rules over a window of (time, committed, log end) samples per partition:

* ``ERR``: the committed offset is past the log end or went backwards;
* ``OK``: the latest lag is zero (an idle consumer with nothing to read is fine);
* ``STOP``: the group's last commit is older than the window while lag is non-zero;
* ``STALL``: the committed offset did not move over the window while lag is non-zero;
* ``WARNING``: the committed offset moves but the lag grew between every two samples;
* ``OK`` otherwise. A group's status is its worst partition's.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import Final

OK: Final = "OK"
WARNING: Final = "WARNING"
STALL: Final = "STALL"
STOP: Final = "STOP"
ERR: Final = "ERR"
STATUSES: Final = (OK, WARNING, STALL, STOP, ERR)  # worst last
_RANK: Final = {status: rank for rank, status in enumerate(STATUSES)}

DEFAULT_WINDOW_MS: Final = 10 * 60_000
DEFAULT_MAX_SAMPLES: Final = 30
DEFAULT_MAX_POINTS: Final = 60


@dataclass(frozen=True, slots=True)
class Sample:
    time_ms: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


class LogEndTable:
    """(log-end offset, first time seen) points of one partition, oldest first, bounded."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS) -> None:
        if max_points < 2:
            raise ValueError("max_points must be at least 2")
        self.points: deque[tuple[int, int]] = deque(maxlen=max_points)

    def add(self, time_ms: int, log_end: int) -> None:
        if self.points and log_end <= self.points[-1][0]:
            if log_end < self.points[-1][0]:  # the log was truncated or recreated: start over
                self.points.clear()
                self.points.append((log_end, time_ms))
            return
        self.points.append((log_end, time_ms))

    def time_of(self, offset: int) -> float | None:
        """When the log end reached ``offset`` (ms), or None if the table cannot tell."""
        points = self.points
        if not points:
            return None
        if offset >= points[-1][0]:
            return None
        if offset < points[0][0]:
            if len(points) < 2:
                return None
            (o1, t1), (o2, t2) = points[0], points[-1]
            return t1 - (o1 - offset) * (t2 - t1) / (o2 - o1)
        for (o1, t1), (o2, t2) in itertools.pairwise(points):
            if o1 <= offset < o2:
                return t1 + (offset - o1) * (t2 - t1) / (o2 - o1)
        return None  # unreachable: offsets increase and offset < the last one

    def lag_seconds(self, committed: int, now_ms: int) -> float | None:
        if self.points and committed >= self.points[-1][0]:
            return 0.0
        produced_at = self.time_of(committed)
        if produced_at is None:
            return None
        return max(now_ms - produced_at, 0.0) / 1000


def partition_status(samples: list[Sample], now_ms: int, window_ms: int, last_commit_ms: int | None) -> str:
    """Burrow's rules over one partition's samples (oldest first; at least one)."""
    latest = samples[-1]
    if any(s.committed > s.log_end for s in samples) or any(
        b.committed < a.committed for a, b in itertools.pairwise(samples)
    ):
        return ERR
    if latest.lag == 0:
        return OK
    if last_commit_ms is not None and now_ms - last_commit_ms > window_ms:
        return STOP
    if len(samples) < 2:
        return OK
    first = samples[0]
    if latest.committed == first.committed:
        return STALL
    lags = [s.lag for s in samples]
    if all(b >= a for a, b in itertools.pairwise(lags)) and lags[-1] > lags[0]:
        return WARNING
    return OK


def worst(statuses: list[str]) -> str:
    return max(statuses, key=_RANK.__getitem__) if statuses else OK


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int
    log_end: int
    lag: int
    lag_seconds: float | None
    status: str

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "log_end": self.log_end,
            "lag": self.lag,
            "lag_seconds": self.lag_seconds,
            "status": self.status,
        }


@dataclass(frozen=True, slots=True)
class GroupLag:
    group_id: str
    status: str
    total_lag: int
    max_lag_seconds: float | None
    partitions: tuple[PartitionLag, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "group_id": self.group_id,
            "status": self.status,
            "total_lag": self.total_lag,
            "max_lag_seconds": self.max_lag_seconds,
            "partitions": [p.to_json() for p in self.partitions],
        }


class LagTracker:
    """Samples per (group, topic, partition) and log-end tables per (topic, partition).

    ``observe`` is the sampler's only entry point; ``partition`` and ``status`` are what the HTTP
    API, the console and metrics read. ``forget_group`` drops a deleted group's samples.
    """

    def __init__(
        self,
        window_ms: int = DEFAULT_WINDOW_MS,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        max_points: int = DEFAULT_MAX_POINTS,
    ) -> None:
        if window_ms <= 0 or max_samples < 1:
            raise ValueError("window_ms must be positive and max_samples at least 1")
        self.window_ms = window_ms
        self.max_samples = max_samples
        self.max_points = max_points
        self._samples: dict[str, dict[tuple[str, int], deque[Sample]]] = {}
        self._last_commit_ms: dict[str, int] = {}
        self._tables: dict[tuple[str, int], LogEndTable] = {}
        self._now_ms = 0

    def observe(
        self,
        group_id: str,
        topic: str,
        partition: int,
        now_ms: int,
        committed: int,
        log_end: int,
        commit_time_ms: int | None = None,
    ) -> None:
        """One sample: the group's committed offset and the partition's log end at ``now_ms``;
        ``commit_time_ms`` is when that offset was committed, if known (for STOP)."""
        self._now_ms = max(self._now_ms, now_ms)
        tp = (topic, partition)
        table = self._tables.get(tp)
        if table is None:
            table = self._tables[tp] = LogEndTable(self.max_points)
        table.add(now_ms, log_end)
        ring = self._samples.setdefault(group_id, {}).get(tp)
        if ring is None:
            ring = self._samples[group_id][tp] = deque(maxlen=self.max_samples)
        ring.append(Sample(now_ms, committed, log_end))
        while ring[0].time_ms < now_ms - self.window_ms:
            ring.popleft()
        if commit_time_ms is not None:
            self._last_commit_ms[group_id] = max(
                self._last_commit_ms.get(group_id, commit_time_ms), commit_time_ms
            )

    def groups(self) -> list[str]:
        return sorted(self._samples)

    def forget_group(self, group_id: str) -> None:
        self._samples.pop(group_id, None)
        self._last_commit_ms.pop(group_id, None)

    def partition(self, group_id: str, topic: str, partition: int) -> PartitionLag | None:
        ring = self._samples.get(group_id, {}).get((topic, partition))
        if not ring:
            return None
        samples = list(ring)
        latest = samples[-1]
        table = self._tables[(topic, partition)]
        return PartitionLag(
            topic,
            partition,
            latest.committed,
            latest.log_end,
            latest.lag,
            table.lag_seconds(latest.committed, self._now_ms),
            partition_status(samples, self._now_ms, self.window_ms, self._last_commit_ms.get(group_id)),
        )

    def status(self, group_id: str) -> GroupLag | None:
        """The group's lag and status, or None when it has no samples (standalone mode)."""
        by_tp = self._samples.get(group_id)
        if not by_tp:
            return None
        partitions = [
            lag for topic, p in sorted(by_tp) if (lag := self.partition(group_id, topic, p)) is not None
        ]
        seconds = [p.lag_seconds for p in partitions if p.lag_seconds is not None]
        return GroupLag(
            group_id,
            worst([p.status for p in partitions]),
            sum(p.lag for p in partitions),
            max(seconds) if seconds else None,
            tuple(partitions),
        )
