"""Lag per topic (rpk's `group describe --print-lag-per-topic`): partitions and summed lag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class LagLine(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def lag(self) -> int | None: ...
    @property
    def lag_seconds(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class TopicLag:
    topic: str
    partitions: int
    lag: int | None  # None when some partition's lag is unknown: a partial sum would understate it
    unknown: int  # partitions whose lag is unknown
    max_lag_seconds: float | None


def lag_per_topic(lines: list[LagLine]) -> list[TopicLag]:
    by_topic: dict[str, list[LagLine]] = {}
    for line in lines:
        by_topic.setdefault(line.topic, []).append(line)
    summary = []
    for topic, rows in sorted(by_topic.items()):
        lags = [row.lag for row in rows]
        known = [lag for lag in lags if lag is not None]
        seconds = [row.lag_seconds for row in rows if row.lag_seconds is not None]
        summary.append(
            TopicLag(
                topic,
                len(rows),
                sum(known) if len(known) == len(lags) else None,
                len(lags) - len(known),
                max(seconds) if seconds else None,
            )
        )
    return summary
