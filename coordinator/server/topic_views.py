"""The console's per-topic view: a topic's partitions, the groups consuming it, and lag rolled up
per group and in total (docs/observability.md#the-console).

A group consumes a topic when it has committed offsets on it or members assigned partitions of
it. Lag comes from the lag tracker (sampled in gateway mode); where it is not sampled it is
None, never 0: unknown lag must not read as no lag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.lag_status import LagTracker, PartitionLag, worst
from storage.records import TopicRecord


class TopicCatalog(Protocol):
    """What this view reads of the topic catalog (the Cluster): name -> record."""

    @property
    def topics(self) -> Mapping[str, TopicRecord]: ...


@dataclass(slots=True)
class _GroupOnTopic:
    group_id: str
    committed: dict[int, int] = field(default_factory=dict)  # partition -> committed offset
    assigned: dict[int, str] = field(default_factory=dict)  # partition -> member id
    lag: dict[int, PartitionLag] = field(default_factory=dict)


class TopicViews:
    def __init__(self, shard: GroupCoordinator, lag: LagTracker, catalog: TopicCatalog | None) -> None:
        self.shard = shard
        self.lag = lag
        self.catalog = catalog

    def _consumers(self) -> dict[str, dict[str, _GroupOnTopic]]:
        """topic -> group id -> what the group has of it."""
        shard = self.shard
        found: dict[str, dict[str, _GroupOnTopic]] = {}

        def entry(topic: str, group_id: str) -> _GroupOnTopic:
            groups = found.setdefault(topic, {})
            on = groups.get(group_id)
            if on is None:
                on = groups[group_id] = _GroupOnTopic(group_id)
            return on

        for group_id in sorted(shard.held_group_ids()):
            for record in shard.committed_offsets(group_id):
                entry(record.topic, group_id).committed[record.partition] = record.offset
            group = shard.group_view(group_id)
            for topic, p, member_id in () if group is None else group.assigned():
                entry(topic, group_id).assigned[p] = member_id
            status = self.lag.status(group_id)
            for sampled in () if status is None else status.partitions:
                entry(sampled.topic, group_id).lag[sampled.partition] = sampled
        return found

    def _partitions(self, topic: str, groups: Mapping[str, _GroupOnTopic]) -> int | None:
        record = None if self.catalog is None else self.catalog.topics.get(topic)
        if record is not None:
            return record.num_partitions
        seen = [p for on in groups.values() for p in (*on.committed, *on.assigned)]
        return max(seen) + 1 if seen else None

    def list_topics(self) -> list[dict[str, object]]:
        consumers = self._consumers()
        names = set(consumers) | (set(self.catalog.topics) if self.catalog is not None else set())
        rows: list[dict[str, object]] = []
        for name in sorted(names):
            groups = consumers.get(name, {})
            rolled = [_group_row(self.shard, on) for on in groups.values()]
            rows.append(
                {
                    "topic": name,
                    "partitions": self._partitions(name, groups),
                    "groups": len(groups),
                    "lag": _sum_known([r["lag"] for r in rolled]),
                    "lag_seconds": _max_known([r["lag_seconds"] for r in rolled]),
                }
            )
        return rows

    def describe(self, topic: str) -> dict[str, object] | None:
        groups = self._consumers().get(topic, {})
        known = self.catalog is not None and topic in self.catalog.topics
        if not groups and not known:
            return None
        count = self._partitions(topic, groups)
        rows = [_group_row(self.shard, on) for on in groups.values()]
        partitions = []
        for p in range(count or 0):
            sampled = [on.lag[p] for on in groups.values() if p in on.lag]
            partitions.append(
                {
                    "partition": p,
                    "log_end": max((s.log_end for s in sampled), default=None),
                    "groups": {
                        on.group_id: {
                            "committed": on.committed.get(p),
                            "member_id": on.assigned.get(p),
                            "lag": on.lag[p].lag if p in on.lag else None,
                        }
                        for on in groups.values()
                    },
                }
            )
        return {
            "topic": topic,
            "partitions": count,
            "groups": rows,
            "lag": _sum_known([r["lag"] for r in rows]),
            "lag_seconds": _max_known([r["lag_seconds"] for r in rows]),
            "partition_rows": partitions,
        }


def _group_row(shard: GroupCoordinator, on: _GroupOnTopic) -> dict[str, object]:
    group = shard.group(on.group_id)
    state = "Dead" if group is None else group.state_name
    kind = None if group is None else group.group_type
    sampled = list(on.lag.values())
    return {
        "group_id": on.group_id,
        "type": kind,
        "state": state,
        "committed_partitions": len(on.committed),
        "assigned_partitions": len(on.assigned),
        "members": len(set(on.assigned.values())),
        "lag": sum(s.lag for s in sampled) if sampled else None,
        "lag_seconds": _max_known([s.lag_seconds for s in sampled]),
        "status": worst([s.status for s in sampled]) if sampled else None,
    }


def _sum_known(values: list[object]) -> int | None:
    known = [v for v in values if isinstance(v, int)]
    return sum(known) if known else None


def _max_known(values: list[object]) -> float | None:
    known = [float(v) for v in values if isinstance(v, int | float)]
    return max(known) if known else None
