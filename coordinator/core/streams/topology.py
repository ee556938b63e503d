"""The topology of a streams group and its configuration against the topic catalog
(docs/streams-groups.md#the-topology).

A topology is what the application sends when a member joins: subtopologies, each with its
source topics, the repartition topics it reads and writes, its changelog topics and the groups of
topics that must be copartitioned. Configuring it against the catalog decides the partition count
of every internal topic, the number of tasks of each subtopology, and the internal topics still to
create -- or finds the problem that keeps the group NOT_READY (a status of the heartbeat, not an
error), as Kafka's InternalTopicManager does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from protocol.messages import streams_group_heartbeat as sgh

# StreamsGroupHeartbeatResponse.Status codes.
STABLE_TOPOLOGY: Final = 0
MISSING_SOURCE_TOPICS: Final = 1
INCORRECTLY_PARTITIONED_TOPICS: Final = 2
MISSING_INTERNAL_TOPICS: Final = 3
SHUTDOWN_APPLICATION: Final = 4
ASSIGNMENT_DELAYED: Final = 5
MISSING_CLIENT_TAGS: Final = 6


class InvalidTopology(Exception):
    """A topology Kafka refuses with STREAMS_INVALID_TOPOLOGY."""


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """A repartition or changelog topic: its fixed partition count (0: decided by the
    coordinator), replication factor (0: the default) and topic configs."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[InternalTopic, ...] = ()
    changelog_topics: tuple[InternalTopic, ...] = ()
    # Each group: topic names (source or repartition source) that must be copartitioned.
    copartition_groups: tuple[frozenset[str], ...] = ()

    @property
    def stateful(self) -> bool:
        return bool(self.changelog_topics)


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def by_id(self) -> dict[str, Subtopology]:
        return {s.subtopology_id: s for s in self.subtopologies}


@dataclass(slots=True)
class ConfiguredTopology:
    """The topology configured against one version of the catalog.

    ``tasks``: the number of tasks of each subtopology (empty when not ready); ``to_create``:
    internal topics missing from the catalog, with the partition count decided for them;
    ``status``: the (code, detail) that keeps the group NOT_READY, None when ready."""

    tasks: dict[str, int] = field(default_factory=dict)
    to_create: dict[str, InternalTopic] = field(default_factory=dict)
    status: tuple[int, str] | None = None

    @property
    def ready(self) -> bool:
        return self.status is None


def _internal(info: sgh.TopicInfo) -> InternalTopic:
    return InternalTopic(
        info.name,
        info.partitions,
        info.replication_factor,
        tuple((kv.key, kv.value) for kv in info.topic_configs),
    )


def from_request(topology: sgh.Topology) -> Topology:
    """The topology a joining member sends, validated as Kafka does at the heartbeat."""
    subtopologies = []
    seen: set[str] = set()
    for sub in topology.subtopologies:
        if sub.subtopology_id in seen:
            raise InvalidTopology(f"Duplicate subtopology id {sub.subtopology_id}.")
        seen.add(sub.subtopology_id)
        for info in sub.state_changelog_topics:
            if info.partitions != 0:
                raise InvalidTopology(
                    f"Changelog topic {info.name} must have an undefined partition count, "
                    f"but it is set to {info.partitions}."
                )
        indexed_sources = list(sub.source_topics)
        indexed_repartition = [t.name for t in sub.repartition_source_topics]
        groups = []
        for group in sub.copartition_groups:
            try:
                names = {indexed_sources[i] for i in group.source_topics}
                names |= {indexed_repartition[i] for i in group.repartition_source_topics}
            except IndexError:
                raise InvalidTopology(
                    f"Copartition group of subtopology {sub.subtopology_id} refers to an unknown topic."
                ) from None
            groups.append(frozenset(names))
        subtopologies.append(
            Subtopology(
                sub.subtopology_id,
                tuple(sub.source_topics),
                tuple(sub.repartition_sink_topics),
                tuple(_internal(t) for t in sub.repartition_source_topics),
                tuple(_internal(t) for t in sub.state_changelog_topics),
                tuple(groups),
            )
        )
    return Topology(topology.epoch, tuple(subtopologies))


class _NotReady(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _summary(topics: set[str] | list[str]) -> str:
    """Kafka's summarizeTopics: up to three names (sorted here), then how many more."""
    names = sorted(topics)
    more = f" and {len(names) - 3} additional topics" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def configure(topology: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """Decide partition counts and tasks against the catalog (``partitions_of``: a topic's
    partition count, None when it does not exist). Raises InvalidTopology for a topology that
    cannot be configured whatever the catalog holds."""
    try:
        return _configure(topology, partitions_of)
    except _NotReady as not_ready:
        return ConfiguredTopology(status=(not_ready.code, not_ready.detail))


def _configure(topology: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    repartition = {t.name: t for s in topology.subtopologies for t in s.repartition_source_topics}
    missing = {
        topic
        for s in topology.subtopologies
        for topic in s.source_topics
        if topic not in repartition and partitions_of(topic) is None
    }
    if missing:
        raise _NotReady(MISSING_SOURCE_TOPICS, f"Source topics {_summary(missing)} are missing.")

    decided: dict[str, int] = {}

    def count(topic: str) -> int | None:
        existing = partitions_of(topic)
        return existing if existing is not None else decided.get(topic)

    _decide_repartition_counts(topology, repartition, count, decided)
    _enforce_copartitioning(topology, repartition, count, decided)

    tasks: dict[str, int] = {}
    for sub in topology.subtopologies:
        inputs = [*sub.source_topics, *(t.name for t in sub.repartition_source_topics)]
        counts = [c for c in (count(t) for t in inputs) if c is not None]
        if not counts:
            raise InvalidTopology(f"No source topics found for subtopology {sub.subtopology_id}")
        tasks[sub.subtopology_id] = max(counts)
        for changelog in sub.changelog_topics:
            if changelog.name not in sub.source_topics:
                decided[changelog.name] = tasks[sub.subtopology_id]

    wanted = {
        t.name: t
        for s in topology.subtopologies
        for t in (*s.repartition_source_topics, *s.changelog_topics)
        if t.name not in s.source_topics or t.name in repartition
    }
    to_create: dict[str, InternalTopic] = {}
    for name, topic in sorted(wanted.items()):
        expected = decided.get(name, topic.partitions)
        existing = partitions_of(name)
        if existing is None:
            to_create[name] = InternalTopic(name, expected, topic.replication_factor, topic.configs)
        elif existing != expected:
            raise _NotReady(
                INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {name} has different number of partitions: expected {expected}, found {existing}",
            )
    status = None
    if to_create:
        status = (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {_summary(list(to_create))}")
    return ConfiguredTopology(tasks, to_create, status)


def _decide_repartition_counts(
    topology: Topology,
    repartition: Mapping[str, InternalTopic],
    count: Callable[[str], int | None],
    decided: dict[str, int],
) -> None:
    """A repartition topic without a fixed count gets the largest input count of the
    subtopologies writing to it (iterated until nothing changes, as subtopologies chain)."""
    for name, topic in repartition.items():
        if topic.partitions > 0:
            decided[name] = topic.partitions
    changed = True
    while changed:
        changed = False
        for name in repartition:
            if name in decided:
                continue
            writers = [s for s in topology.subtopologies if name in s.repartition_sink_topics]
            counts = [
                c
                for s in writers
                for c in (
                    count(t) for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))
                )
                if c is not None
            ]
            if counts:
                decided[name] = max(counts)
                changed = True
    undecided = [name for name in repartition if name not in decided and count(name) is None]
    if undecided:
        raise InvalidTopology(
            "Failed to compute number of partitions for all repartition topics, because "
            "a repartition source topic is never used as a sink topic."
        )


def _enforce_copartitioning(
    topology: Topology,
    repartition: Mapping[str, InternalTopic],
    count: Callable[[str], int | None],
    decided: dict[str, int],
) -> None:
    """Topics of a copartition group have one partition count: external topics must agree
    (else INCORRECTLY_PARTITIONED_TOPICS), repartition topics without a fixed count take it."""
    for sub in topology.subtopologies:
        for group in sub.copartition_groups:
            external = {t: count(t) for t in group if t not in repartition}
            fixed = {
                t: repartition[t].partitions for t in group if t in repartition and repartition[t].partitions
            }
            counts = {c for c in (*external.values(), *fixed.values()) if c is not None}
            if len(counts) > 1:
                raise _NotReady(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: {_summary(list(group))}",
                )
            if counts:
                target = counts.pop()
            else:
                flexible = [decided[t] for t in group if t in decided]
                if not flexible:
                    continue
                target = max(flexible)
            for topic in group:
                if topic in repartition and not repartition[topic].partitions:
                    decided[topic] = target
