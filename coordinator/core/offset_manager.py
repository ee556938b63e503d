"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, topic deletion and the KIP-211
retention rules (Kafka's OffsetMetadataManager; see docs/commit-path.md).

The cache mirrors storage: a change is applied when its records are durable, the way Kafka
replays its log, and a failed write applies nothing. A commit is *in flight* from the request
until its write settles: a RequireStable fetch reports such partitions as UNSTABLE_OFFSET_COMMIT,
the retention sweep leaves them alone and a deletion tombstones them (its tombstone lands after
the commit, so replaying both in order leaves the partition deleted, as storage has it).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Iterable, Sequence
from itertools import groupby, repeat
from operator import attrgetter, itemgetter
from typing import Final, TypeVar

from coordinator.core.clock import ShardClock
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    GROUP_SUBSCRIBED_TO_TOPIC,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    UNSTABLE_OFFSET_COMMIT,
    admin_write_error,
    offset_write_error,
)
from coordinator.core.group import OffsetExpiry
from coordinator.core.group_offsets import GroupOffsets
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.registry import GroupRegistry
from coordinator.core.shared_values import shared_value
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from storage.records import OffsetCommitRecord, OffsetRow, OffsetTombstone

log = logging.getLogger(__name__)

INVALID_OFFSET: Final = -1

# One partition of an OffsetFetch answer (its class differs between versions).
_Entry = TypeVar("_Entry")


class _CommitWrite:
    """The in-flight marks of one commit's records, released once when the write settles (it is
    durable, it failed, or it timed out; a timed-out write that lands later is applied all the
    same, but its marks are gone already)."""

    __slots__ = ("group_id", "keys", "manager")

    def __init__(self, manager: OffsetManager, group_id: str, keys: list[tuple[str, int]]) -> None:
        self.manager = manager
        self.group_id = group_id
        self.keys: list[tuple[str, int]] | None = keys

    def settle(self) -> None:
        keys, self.keys = self.keys, None
        offsets = self.manager.offsets.get(self.group_id)
        if keys is None or offsets is None:
            return
        in_flight = offsets.in_flight
        if in_flight is not None:
            for key in keys:
                count = in_flight.get(key, 0) - 1
                if count > 0:
                    in_flight[key] = count
                else:
                    in_flight.pop(key, None)
            if not in_flight:
                offsets.in_flight = None
        if not offsets.has_offsets():
            del self.manager.offsets[self.group_id]


def _never(group_id: str, topic: str, partition: int) -> bool:
    return False


def _absent(partition: int) -> int:
    """The position of a partition in a topic without offsets."""
    return -1


def metadata_too_large(metadata: str, max_bytes: int) -> bool:
    """Kafka compares Java's String.length(): UTF-16 code units, not bytes or code points."""
    length = len(metadata)
    if length > max_bytes:
        return True
    if 2 * length <= max_bytes or metadata.isascii():
        return False
    return length + sum(1 for c in metadata if c > "\uffff") > max_bytes


class OffsetManager:
    def __init__(self, config: BrokerGroupSettings, clock: ShardClock, registry: GroupRegistry) -> None:
        self.config = config
        self.clock = clock
        self.registry = registry
        # Every group with offsets is a group of some kind (simple groups are created for them).
        self.offsets: dict[str, GroupOffsets] = {}
        # Whether (group, topic, partition) has a transactional offset waiting for its
        # transaction's outcome (coordinator/core/txn_offsets.py, plugged in by the coordinator).
        self.txn_pending: Callable[[str, str, int], bool] = _never

    def has_offsets(self, group_id: str) -> bool:
        offsets = self.offsets.get(group_id)
        return offsets is not None and offsets.has_offsets()

    def offset_count(self) -> int:
        return sum(len(offsets) for offsets in self.offsets.values())

    # -- OffsetCommit (v0-9) -----------------------------------------------------------------------
    # v0 is handled as v1 with generation -1 (Kafka 0.8 stored v0 commits in ZooKeeper); v1: per-
    # partition CommitTimestamp; v2-4: RetentionTimeMs (an explicit expire timestamp, pre-KIP-211);
    # v6+: CommittedLeaderEpoch; v7+: GroupInstanceId; v9: GROUP_ID_NOT_FOUND for unknown groups.

    def commit_offsets(self, ctx: RequestContext, req: OffsetCommitRequest, fx: Effects) -> None:
        version = ctx.api_version
        group_id = req.group_id
        generation = req.generation_id_or_member_epoch
        registry = self.registry
        kind = registry.holder(group_id)
        if kind is not None:
            code = kind.validate_offset_commit(group_id, req, version)
        elif generation >= 0:
            code = GROUP_ID_NOT_FOUND if version >= 9 else ILLEGAL_GENERATION
        elif registry.at_group_limit():
            code = GROUP_MAX_SIZE_REACHED
        else:
            registry.create_offsets_group(group_id)  # a "simple" group: no protocol type
            code = NONE
        if code:
            fx.reply(ctx.reply_to, _commit_response(req, None, code))
            return
        self.store_offsets(ctx, req, fx)

    def store_offsets(self, ctx: RequestContext, req: OffsetCommitRequest, fx: Effects) -> None:
        """Write the commit of a validated request; reply once durable."""
        wall_ms = self.clock.wall_ms
        max_metadata = self.config.offset_metadata_max_bytes
        expire_ms = None
        if 2 <= ctx.api_version <= 4 and req.retention_time_ms != -1:
            expire_ms = wall_ms + req.retention_time_ms
        records: list[OffsetCommitRecord] = []
        codes: list[int] = []
        # The group's own id object and one topic name object for all groups, not the request's
        # copies: the records stay in memory as the group's offsets
        # (docs/performance.md#memory-per-idle-group).
        offsets = self.offsets.get(req.group_id)
        if offsets is not None:
            group_id = offsets.group_id
        else:
            group = self.registry.group(req.group_id)
            group_id = req.group_id if group is None else group.group_id
        add_code = codes.append
        add_record = records.append
        for topic in req.topics:
            topic_name = shared_value(topic.name)
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                # metadata_too_large is False whenever twice the length fits: called only otherwise
                if 2 * len(metadata) > max_metadata and metadata_too_large(metadata, max_metadata):
                    add_code(OFFSET_METADATA_TOO_LARGE)
                    continue
                add_code(NONE)
                commit_ms = p.commit_timestamp
                add_record(
                    OffsetCommitRecord(
                        group_id,
                        topic_name,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        metadata,
                        commit_ms if commit_ms != -1 else wall_ms,
                        expire_ms,
                    )
                )
        response = _commit_response(req, codes, NONE)
        if not records:
            fx.reply(ctx.reply_to, response)
            return
        write = self._begin_commit(group_id, offsets, records)

        def on_durable(out: Effects) -> None:
            write.settle()
            self.replay_group(group_id, records)

        def on_failed(out: Effects, error_code: int) -> None:
            write.settle()

        def failed_response(error_code: int) -> OffsetCommitResponse:
            code = offset_write_error(error_code)
            return _commit_response(req, [c if c else code for c in codes], NONE)

        fx.reply(ctx.reply_to, response, failed_response)
        fx.write(records, on_durable, on_failed)

    # -- OffsetFetch (v0-9) ------------------------------------------------------------------------
    # v0-1: no top-level error; v2+: null Topics = all partitions, top-level ErrorCode; v5+: leader
    # epoch; v7+: RequireStable; v8+: several groups, per-group errors; v9: MemberId/MemberEpoch,
    # which classic groups ignore. Offsets are returned in every group state; unknown groups and
    # partitions answer offset -1 with no error.

    def fetch_offsets(self, ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
        require_stable = ctx.api_version >= 7 and req.require_stable
        if ctx.api_version >= 8:
            return OffsetFetchResponse(
                groups=[self._fetch_group(g, require_stable, ctx.api_version) for g in req.groups]
            )
        requested = None if req.topics is None else [(t.name, t.partition_indexes) for t in req.topics]
        topics = [
            OffsetFetchResponseTopic(
                name,
                parts,
            )
            for name, parts in self._lookup(
                req.group_id, requested, require_stable, OffsetFetchResponsePartition
            )
        ]
        return OffsetFetchResponse(topics=topics, error_code=NONE)

    def _fetch_group(
        self, req: OffsetFetchRequestGroup, require_stable: bool, version: int
    ) -> OffsetFetchResponseGroup:
        if version >= 9:
            kind = self.registry.holder(req.group_id)
            if kind is not None:
                code = kind.validate_offset_fetch(req.group_id, req.member_id, req.member_epoch)
                if code:
                    return OffsetFetchResponseGroup(group_id=req.group_id, topics=[], error_code=code)
        requested = None if req.topics is None else [(t.name, t.partition_indexes) for t in req.topics]
        topics = [
            OffsetFetchResponseTopics(
                name=name,
                partitions=parts,
            )
            for name, parts in self._lookup(
                req.group_id, requested, require_stable, OffsetFetchResponsePartitions
            )
        ]
        return OffsetFetchResponseGroup(group_id=req.group_id, topics=topics, error_code=NONE)

    def _lookup(
        self,
        group_id: str,
        requested: list[tuple[str, list[int]]] | None,
        require_stable: bool,
        make: Callable[[int, int, int, str, int], _Entry],
    ) -> list[tuple[str, list[_Entry]]]:
        """Per requested topic, ``make(partition, offset, leader epoch, metadata, error code)``
        of each requested partition."""
        offsets = self.offsets.get(group_id)
        if requested is None:
            if offsets is None:
                return []
            requested = [(t.topic, t.partitions()) for t in offsets.topic_offsets]
        # Per partition this is the hot loop of an OffsetFetch: the lookups are inlined, and
        # the pending checks run only when the request asks for stable offsets.
        result = []
        txn_pending = self.txn_pending if require_stable else None
        in_flight = None if offsets is None or not require_stable else offsets.in_flight
        empty = array("q")
        for topic, partitions in requested:
            entry = None if offsets is None else offsets.topic(topic)
            if entry is None:
                columns = empty
                n = 0
                index = _absent
                texts = None
            else:
                columns = entry.columns
                n = len(columns) >> 2
                index = entry.index
                texts = entry.metadata
                if (
                    txn_pending is None
                    and in_flight is None
                    and len(partitions) == n
                    and columns[:n].tolist() == partitions
                ):
                    # Every committed partition of the topic, in order (a consumer's usual
                    # fetch): the answers built column by column.
                    values = list(
                        map(
                            make,
                            partitions,
                            columns[n : 2 * n].tolist(),
                            columns[2 * n : 3 * n].tolist(),
                            repeat("", n) if texts is None else texts,
                            repeat(NONE, n),
                        )
                    )
                    result.append((topic, values))
                    continue
            values = []
            append = values.append
            for p in partitions:
                if (txn_pending is not None and txn_pending(group_id, topic, p)) or (
                    in_flight is not None and (topic, p) in in_flight
                ):
                    # Retriable: the client asks again once the transaction has completed or the
                    # commit is durable.
                    append(make(p, INVALID_OFFSET, -1, "", UNSTABLE_OFFSET_COMMIT))
                    continue
                i = p if 0 <= p < n and columns[p] == p else index(p)
                if i < 0:
                    append(make(p, INVALID_OFFSET, -1, "", NONE))
                else:
                    text = "" if texts is None else texts[i]
                    append(make(p, columns[n + i], columns[2 * n + i], text, NONE))
            result.append((topic, values))
        return result

    # -- OffsetDelete (v0, KIP-496) --------------------------------------------------------------

    def delete_offsets(self, ctx: RequestContext, req: OffsetDeleteRequest, fx: Effects) -> None:
        group_id = req.group_id
        kind = self.registry.holder(group_id) if group_id else None
        subscribed_to = None
        if not group_id:
            code = INVALID_GROUP_ID
        elif kind is None:
            code = GROUP_ID_NOT_FOUND
        else:
            code, subscribed_to = kind.offset_delete_rule(group_id)
        if code:
            fx.reply(ctx.reply_to, OffsetDeleteResponse(error_code=code))
            return
        offsets = self.offsets.get(group_id)
        tombstones: list[OffsetTombstone] = []
        topics = []
        for topic in req.topics:
            subscribed = subscribed_to is not None and subscribed_to(topic.name)
            known = () if offsets is None else offsets.partitions(topic.name)
            partitions = []
            for p in topic.partitions:
                if subscribed:
                    partitions.append(
                        OffsetDeleteResponsePartition(p.partition_index, GROUP_SUBSCRIBED_TO_TOPIC)
                    )
                    continue
                # NONE even when there was nothing to delete; tombstones only for real offsets.
                partitions.append(OffsetDeleteResponsePartition(p.partition_index, NONE))
                if p.partition_index in known:
                    tombstones.append(OffsetTombstone(group_id, topic.name, p.partition_index))
            topics.append(OffsetDeleteResponseTopic(topic.name, partitions))
        response = OffsetDeleteResponse(error_code=NONE, topics=topics)
        if not tombstones:
            fx.reply(ctx.reply_to, response)
            return
        fx.reply(
            ctx.reply_to, response, lambda error: OffsetDeleteResponse(error_code=admin_write_error(error))
        )
        fx.write(tombstones, on_durable=lambda out: self.apply_tombstones(tombstones))

    # -- deletions and expiry: tombstones now, applied once durable --------------------------------

    def group_tombstones(self, group_id: str) -> list[OffsetTombstone]:
        """Tombstones for every offset of a group (deleted, or removed by the retention sweep)."""
        offsets = self.offsets.get(group_id)
        if offsets is None:
            return []
        return [
            OffsetTombstone(group_id, topic, partition)
            for topic in offsets.topics()
            for partition in offsets.partitions(topic)
        ]

    def topic_tombstones(self, topics: Iterable[str]) -> list[OffsetTombstone]:
        """docs/groups.md#offsets-and-retention: tombstones for the offsets of deleted topics, in every group."""
        wanted = sorted(set(topics))
        return [
            OffsetTombstone(group_id, topic, partition)
            for group_id, offsets in self.offsets.items()
            for topic in wanted
            for partition in offsets.partitions(topic)
        ]

    def expired_offsets(self, group_id: str, expiry: OffsetExpiry, now_wall_ms: int) -> list[OffsetTombstone]:
        """KIP-211: tombstones for this group's expired offsets (docs/groups.md#offsets-and-retention)."""
        offsets = self.offsets.get(group_id)
        if offsets is None or not offsets.has_committed():
            return []
        return self._expired(group_id, offsets, expiry.keep_topics, expiry.base_ms, now_wall_ms)

    def _expired(
        self,
        group_id: str,
        offsets: GroupOffsets,
        keep_topics: frozenset[str],
        base_ms: int | None,
        now_wall_ms: int,
    ) -> list[OffsetTombstone]:
        retention_ms = self.config.offsets_retention_ms
        expired: list[OffsetTombstone] = []
        for entry in offsets.topic_offsets:
            topic = entry.topic
            if topic in keep_topics:
                continue
            columns = entry.columns
            n = len(columns) >> 2
            expire = entry.expire_ms
            for i in range(n):
                partition = columns[i]
                if offsets.is_pending(topic, partition) or self.txn_pending(group_id, topic, partition):
                    continue  # Kafka keeps an offset whose partition has a transaction open
                expire_ms = None if expire is None else expire[i]
                if expire_ms is not None:
                    if now_wall_ms >= expire_ms:
                        expired.append(OffsetTombstone(group_id, topic, partition))
                elif now_wall_ms - (columns[3 * n + i] if base_ms is None else base_ms) >= retention_ms:
                    expired.append(OffsetTombstone(group_id, topic, partition))
        return expired

    def keeps_offsets_after(self, group_id: str, tombstones: Sequence[OffsetTombstone]) -> bool:
        """Whether the group still has an offset (or a commit in flight) once these are applied."""
        offsets = self.offsets.get(group_id)
        if offsets is None:
            return False
        if offsets.in_flight:
            return True
        removed = {(t.topic, t.partition) for t in tombstones if t.group_id == group_id}
        return any(key not in removed for key in offsets.committed_keys())

    def apply_tombstones(self, tombstones: Iterable[OffsetTombstone]) -> None:
        """Replay durable tombstones: those partitions have no offset any more."""
        for tombstone in tombstones:
            offsets = self.offsets.get(tombstone.group_id)
            if offsets is None:
                continue
            offsets.discard(tombstone.topic, tombstone.partition)
            if not offsets.has_offsets():
                del self.offsets[tombstone.group_id]

    # -- replay and load ---------------------------------------------------------------------------

    def _begin_commit(
        self, group_id: str, offsets: GroupOffsets | None, records: list[OffsetCommitRecord]
    ) -> _CommitWrite:
        if offsets is None:
            offsets = self.offsets[group_id] = GroupOffsets(group_id)
        keys = [(r.topic, r.partition) for r in records]
        in_flight = offsets.in_flight
        if in_flight is None:
            in_flight = offsets.in_flight = {}
        for key in keys:
            in_flight[key] = in_flight.get(key, 0) + 1
        return _CommitWrite(self, group_id, keys)

    def replay(self, record: OffsetCommitRecord) -> None:
        """Apply a durable offset; offsets without a group make an Empty "simple" group."""
        self._group_offsets(record.group_id).put(record)

    def replay_group(self, group_id: str, records: Sequence[OffsetCommitRecord]) -> None:
        """``replay`` of durable offsets that all belong to ``group_id`` (one commit's records)."""
        offsets = self._group_offsets(group_id)
        topic = records[0].topic
        if len(records) == 1 or [r.topic for r in records].count(topic) == len(records):
            entry = offsets.topic(topic)  # one topic: no runs to split
            if entry is not None:
                entry.update(records)
                return
        for topic, run in groupby(records, key=_RECORD_TOPIC):
            entry = offsets.topic(topic)
            if entry is None:
                # A topic's first commit: its columns built at once, at their exact size.
                offsets.load_topic(topic, [_row(r) for r in run])
            else:
                entry.update(list(run))

    def load(self, records: Iterable[OffsetCommitRecord]) -> None:
        """Storage rows as records, one per key (the last one wins): ``load_rows`` of their fields."""
        self.load_rows(map(_row, records))

    def load_rows(self, rows: Iterable[OffsetRow]) -> None:
        """Storage rows, one per key (the last one wins). The stores read them in key order, so a
        group's rows come together, and a topic's within them: the group is checked and its
        offsets found once per run of rows, and each topic's columns are built in one go at
        their exact size (any order still gives the same state, in more runs;
        docs/performance.md#offsets-in-parallel-arrays)."""
        for group_id, group_rows in groupby(rows, key=_GROUP_ID):
            offsets = self._group_offsets(group_id)
            for topic, topic_rows in groupby(group_rows, key=_TOPIC):
                offsets.load_topic(topic, list(topic_rows))

    def _group_offsets(self, group_id: str) -> GroupOffsets:
        """The group's offsets, made (and its group, a simple one without) when it has none."""
        self.ensure_group(group_id)
        offsets = self.offsets.get(group_id)
        if offsets is not None:
            return offsets
        # The registry group's own id object, not the record's copy (it may be of a kind the
        # registry hands no group object for).
        group = self.registry.group(group_id)
        offsets = self.offsets[group_id] = GroupOffsets(group_id if group is None else group.group_id)
        return offsets

    def ensure_group(self, group_id: str) -> None:
        """Offsets belong to a group of some kind; without one, a simple group of the default kind."""
        if not self.registry.holds(group_id):
            self.registry.create_offsets_group(group_id)


_GROUP_ID: Final = itemgetter(0)
_RECORD_TOPIC: Final = attrgetter("topic")


def _row(r: OffsetCommitRecord) -> OffsetRow:
    return (r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_ms, r.expire_ms)


_TOPIC: Final = itemgetter(1)


def _commit_response(req: OffsetCommitRequest, codes: list[int] | None, code: int) -> OffsetCommitResponse:
    """One entry per requested partition, in request order: ``codes`` or ``code`` for all."""
    topics = []
    next_code = None if codes is None else iter(codes).__next__
    for topic in req.topics:
        if next_code is None:
            partitions = [OffsetCommitResponsePartition(p.partition_index, code) for p in topic.partitions]
        else:
            partitions = [
                OffsetCommitResponsePartition(p.partition_index, next_code()) for p in topic.partitions
            ]
        topics.append(OffsetCommitResponseTopic(name=topic.name, partitions=partitions))
    return OffsetCommitResponse(topics=topics)
