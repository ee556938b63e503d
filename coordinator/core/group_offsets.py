"""One group's committed offsets held compactly: per topic, parallel columns in one array instead
of an object per offset and a dict per topic (docs/performance.md#offsets-in-parallel-arrays).

A topic's ``columns`` is one ``array('q')`` of four columns of ``n`` values each, partitions in
ascending order: ``[partitions | offsets | leader epochs | commit timestamps]``, so partition
``columns[i]`` has its offset at ``columns[n + i]``. Metadata and explicit expire timestamps
are lists beside it, ``None`` while every partition has none (no metadata, no v2-4 retention
time), which is what nearly every client commits. Records (``OffsetCommitRecord``) are built
only for the views that hand them out.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Final

from coordinator.core.shared_values import shared_value
from storage.records import OffsetCommitRecord, OffsetRow

# Groups with more topics than this look them up in a dict; fewer are scanned (a dict costs
# more than the scan of a handful of shared topic names).
_INDEXED_TOPICS: Final = 8


class TopicOffsets:
    """The committed offsets of one topic of one group (see the module docstring)."""

    __slots__ = ("columns", "expire_ms", "metadata", "topic")

    def __init__(self, topic: str, rows: Sequence[OffsetRow]) -> None:
        """``rows``: this topic's offsets, in ascending partition order, one per partition."""
        self.topic = topic
        _, _, partitions, offsets, epochs, metadata, commits, expiry = zip(*rows, strict=True)
        self.columns = array("q", partitions + offsets + epochs + commits)
        self.metadata: list[str] | None = list(metadata) if any(metadata) else None
        self.expire_ms: list[int | None] | None = list(expiry) if expiry.count(None) != len(expiry) else None

    def __len__(self) -> int:
        return len(self.columns) >> 2

    def index(self, partition: int) -> int:
        """Position of ``partition`` in the columns, -1 when it has no offset."""
        columns = self.columns
        n = len(columns) >> 2
        if 0 <= partition < n and columns[partition] == partition:
            return partition  # partitions 0..n-1 all committed: the usual case
        i = bisect_left(columns, partition, 0, n)
        return i if i < n and columns[i] == partition else -1

    def partitions(self) -> list[int]:
        columns = self.columns
        return columns[: len(columns) >> 2].tolist()

    def put(
        self,
        partition: int,
        offset: int,
        leader_epoch: int,
        metadata: str,
        commit_ms: int,
        expire_ms: int | None,
    ) -> None:
        i = self.index(partition)
        if i < 0:
            i = self._insert(partition)
        columns = self.columns
        n = len(columns) >> 2
        columns[n + i] = offset
        columns[2 * n + i] = leader_epoch
        columns[3 * n + i] = commit_ms
        texts = self.metadata
        if texts is not None:
            replaced = texts[i]
            texts[i] = metadata
            if replaced and not metadata and not any(texts):
                self.metadata = None  # the last partition with metadata has none now
        elif metadata:
            self.metadata = [""] * n
            self.metadata[i] = metadata
        expiry = self.expire_ms
        if expiry is not None:
            had_expiry = expiry[i] is not None
            expiry[i] = expire_ms
            if had_expiry and expire_ms is None and all(e is None for e in expiry):
                self.expire_ms = None
        elif expire_ms is not None:
            self.expire_ms = [None] * n
            self.expire_ms[i] = expire_ms

    def update(self, records: Sequence[OffsetCommitRecord]) -> None:
        """``put`` of each record (all of this topic, in request order). The usual commit, every
        partition already committed and in ascending order without metadata or expiry, is
        copied column by column (docs/performance.md#offsets-in-parallel-arrays)."""
        columns = self.columns
        n = len(columns) >> 2
        k = len(records)
        first = records[0].partition
        i = first if 0 <= first < n and columns[first] == first else self.index(first)
        if k == 1:
            r = records[0]
            if (
                i >= 0
                and self.metadata is None
                and self.expire_ms is None
                and not r.metadata
                and r.expire_ms is None
            ):
                columns[n + i] = r.offset
                columns[2 * n + i] = r.leader_epoch
                columns[3 * n + i] = r.commit_ms
                return
        elif (
            i >= 0
            and i + k <= n
            and self.metadata is None
            and self.expire_ms is None
            and columns[i : i + k].tolist() == [r.partition for r in records]
            and not [r for r in records if r.metadata or r.expire_ms is not None]
        ):
            columns[n + i : n + i + k] = array("q", [r.offset for r in records])
            columns[2 * n + i : 2 * n + i + k] = array("q", [r.leader_epoch for r in records])
            columns[3 * n + i : 3 * n + i + k] = array("q", [r.commit_ms for r in records])
            return
        for r in records:
            self.put(r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_ms, r.expire_ms)

    def _insert(self, partition: int) -> int:
        """Make room for a new partition (its values zero until set); returns its position.
        The array is rebuilt at its exact size: an insert would over-allocate it."""
        columns = self.columns
        n = len(columns) >> 2
        i = bisect_left(columns, partition, 0, n)
        values = columns.tolist()
        for start in (3 * n, 2 * n, n):  # the last column first: earlier positions stay put
            values.insert(start + i, 0)
        values.insert(i, partition)
        self.columns = array("q", values)
        if self.metadata is not None:
            self.metadata.insert(i, "")
        if self.expire_ms is not None:
            self.expire_ms.insert(i, None)
        return i

    def discard(self, partition: int) -> bool:
        """Remove the partition's offset; whether it had one."""
        i = self.index(partition)
        if i < 0:
            return False
        columns = self.columns
        n = len(columns) >> 2
        values = columns.tolist()
        for start in (3 * n, 2 * n, n, 0):
            del values[start + i]
        self.columns = array("q", values)
        if self.metadata is not None:
            del self.metadata[i]
            if not any(self.metadata):
                self.metadata = None
        if self.expire_ms is not None:
            del self.expire_ms[i]
            if all(e is None for e in self.expire_ms):
                self.expire_ms = None
        return True

    def row(self, group_id: str, i: int) -> OffsetRow:
        columns = self.columns
        n = len(columns) >> 2
        return (
            group_id,
            self.topic,
            columns[i],
            columns[n + i],
            columns[2 * n + i],
            "" if self.metadata is None else self.metadata[i],
            columns[3 * n + i],
            None if self.expire_ms is None else self.expire_ms[i],
        )

    def rows(self, group_id: str) -> Iterator[OffsetRow]:
        return (self.row(group_id, i) for i in range(len(self)))


class GroupOffsets:
    """Offsets of one group: durable ones by topic and partition, plus in-flight commit counts."""

    __slots__ = ("_index", "group_id", "in_flight", "topic_offsets")

    def __init__(self, group_id: str) -> None:
        # The group's own id object: records built for the views take it
        # (docs/performance.md#memory-per-idle-group).
        self.group_id = group_id
        # One entry per topic with an offset, in the order the topics were first committed.
        self.topic_offsets: tuple[TopicOffsets, ...] = ()
        # By topic name once there are more than _INDEXED_TOPICS topics, else None.
        self._index: dict[str, TopicOffsets] | None = None
        # None while no commit is in flight, i.e. in an idle group (an emptied dict keeps its table).
        self.in_flight: dict[tuple[str, int], int] | None = None

    def has_offsets(self) -> bool:
        return bool(self.topic_offsets) or self.in_flight is not None

    def has_committed(self) -> bool:
        return bool(self.topic_offsets)

    def __len__(self) -> int:
        return sum(len(t) for t in self.topic_offsets)

    def topic(self, name: str) -> TopicOffsets | None:
        index = self._index
        if index is not None:
            return index.get(name)
        for entry in self.topic_offsets:
            if entry.topic == name:
                return entry
        return None

    def get(self, topic: str, partition: int) -> OffsetCommitRecord | None:
        entry = self.topic(topic)
        if entry is None:
            return None
        i = entry.index(partition)
        return None if i < 0 else OffsetCommitRecord(*entry.row(self.group_id, i))

    def is_pending(self, topic: str, partition: int) -> bool:
        in_flight = self.in_flight
        return in_flight is not None and (topic, partition) in in_flight

    def put(self, record: OffsetCommitRecord) -> None:
        self.put_values(
            record.topic,
            record.partition,
            record.offset,
            record.leader_epoch,
            record.metadata,
            record.commit_ms,
            record.expire_ms,
        )

    def put_values(
        self,
        topic: str,
        partition: int,
        offset: int,
        leader_epoch: int,
        metadata: str,
        commit_ms: int,
        expire_ms: int | None,
    ) -> None:
        entry = self.topic(topic)
        if entry is None:
            row = (self.group_id, topic, partition, offset, leader_epoch, metadata, commit_ms, expire_ms)
            self._add_topic(TopicOffsets(shared_value(topic), [row]))
        else:
            entry.put(partition, offset, leader_epoch, metadata, commit_ms, expire_ms)

    def load_topic(self, topic: str, rows: Sequence[OffsetRow]) -> None:
        """Rows of one topic (a store's rows come in ascending partition order, one per
        partition; any order gives the same offsets, the last row of a partition winning):
        the columns are built at their exact size when the topic has no offsets yet."""
        entry = self.topic(topic)
        if entry is None:
            partitions = [r[2] for r in rows]
            if partitions != sorted(set(partitions)):  # not a store's order: the last row wins
                last = {r[2]: r for r in rows}
                rows = [last[p] for p in sorted(last)]
            self._add_topic(TopicOffsets(shared_value(topic), rows))
            return
        for r in rows:
            entry.put(r[2], r[3], r[4], r[5], r[6], r[7])

    def _add_topic(self, entry: TopicOffsets) -> None:
        self.topic_offsets = (*self.topic_offsets, entry)
        if self._index is not None:
            self._index[entry.topic] = entry
        elif len(self.topic_offsets) > _INDEXED_TOPICS:
            self._index = {t.topic: t for t in self.topic_offsets}

    def discard(self, topic: str, partition: int) -> None:
        entry = self.topic(topic)
        if entry is None or not entry.discard(partition) or len(entry):
            return
        self.topic_offsets = tuple(t for t in self.topic_offsets if t is not entry)
        if self._index is not None:
            del self._index[topic]
            if len(self.topic_offsets) <= _INDEXED_TOPICS:
                self._index = None

    def partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` with an offset or a commit in flight."""
        entry = self.topic(topic)
        found = set() if entry is None else set(entry.partitions())
        found.update(p for t, p in self.in_flight or () if t == topic)
        return sorted(found)

    def topics(self) -> list[str]:
        return sorted({t.topic for t in self.topic_offsets} | {t for t, _ in self.in_flight or ()})

    def committed_keys(self) -> Iterator[tuple[str, int]]:
        """(topic, partition) of every committed offset."""
        for entry in self.topic_offsets:
            topic = entry.topic
            for partition in entry.partitions():
                yield topic, partition

    def records(self) -> list[OffsetCommitRecord]:
        """Every committed offset as a record, by topic name and partition."""
        group_id = self.group_id
        return [
            OffsetCommitRecord(*row)
            for entry in sorted(self.topic_offsets, key=_TOPIC_NAME)
            for row in entry.rows(group_id)
        ]


def _topic_name(entry: TopicOffsets) -> str:
    return entry.topic


_TOPIC_NAME: Final = _topic_name
