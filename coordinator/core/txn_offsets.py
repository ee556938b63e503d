"""Transactional offsets: TxnOffsetCommit, and the pending offsets it leaves until the
transaction's outcome is known (Kafka's OffsetMetadataManager, pendingTransactionalOffsets;
docs/transactions.md).

A TxnOffsetCommit stores its offsets as *pending* for (group, producer id): persisted
(``TxnOffsetRecord``) so a restart keeps them pending, invisible to OffsetFetch, and reported
as UNSTABLE_OFFSET_COMMIT to a fetch that requires stable offsets. When the transaction of
(producer id, producer epoch) completes, its pending offsets become committed offsets (commit)
or are deleted (abort), in one write. Who learns the outcome is not the core's business: the
gateway tells it (coordinator/gateway/transactions.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INVALID_GROUP_ID,
    NONE,
    OFFSET_METADATA_TOO_LARGE,
    offset_write_error,
)
from coordinator.core.offset_manager import OffsetManager, metadata_too_large
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from storage.records import OffsetCommitRecord, Record, TxnOffsetRecord, TxnOffsetTombstone

PartitionKey = tuple[str, int]  # (topic, partition)
# KIP-890: a producer on transaction version 2 sends TxnOffsetCommit v5+.
TRANSACTION_V2_REQUEST_VERSION = 5


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """One producer's transaction with pending offsets in some group (read-only view)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    partitions: int
    first_commit_ms: int
    transaction_version: int = 1


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a transaction's outcome did: partitions resolved, or the write's error code."""

    partitions: int
    error_code: int


class TransactionalOffsets:
    """Pending transactional offsets of every group, by group, then producer id, then partition."""

    def __init__(self, offsets: OffsetManager) -> None:
        self.offsets = offsets
        self.pending: dict[str, dict[int, dict[PartitionKey, TxnOffsetRecord]]] = {}

    # -- TxnOffsetCommit (v0-6) ---------------------------------------------------------------------
    # v0-2: no member, generation -1; v3+: GenerationId, MemberId, GroupInstanceId (KIP-447),
    # checked by the group's kind; v6: topic ids (resolved to names before the core).

    def commit(self, ctx: RequestContext, req: TxnOffsetCommitRequest, fx: Effects) -> None:
        group_id = req.group_id
        registry = self.offsets.registry
        if not group_id:
            fx.reply(ctx.reply_to, _response(req, None, INVALID_GROUP_ID))
            return
        kind = registry.holder(group_id)
        generation = req.generation_id_or_member_epoch
        if kind is not None:
            code = kind.validate_txn_offset_commit(group_id, req.member_id, req.group_instance_id, generation)
        elif generation >= 0:
            code = ILLEGAL_GENERATION
        elif registry.at_group_limit():
            code = GROUP_MAX_SIZE_REACHED
        else:
            registry.create_offsets_group(group_id)  # a "simple" group, as OffsetCommit makes
            code = NONE
        if code:
            fx.reply(ctx.reply_to, _response(req, None, code))
            return
        wall_ms = self.offsets.clock.wall_ms
        max_metadata = self.offsets.config.offset_metadata_max_bytes
        records: list[TxnOffsetRecord] = []
        codes: list[int] = []
        for topic in req.topics:
            for p in topic.partitions:
                metadata = p.committed_metadata or ""
                if metadata_too_large(metadata, max_metadata):
                    codes.append(OFFSET_METADATA_TOO_LARGE)
                    continue
                codes.append(NONE)
                records.append(
                    TxnOffsetRecord(
                        group_id=group_id,
                        producer_id=req.producer_id,
                        topic=topic.name,
                        partition=p.partition_index,
                        producer_epoch=req.producer_epoch,
                        transactional_id=req.transactional_id,
                        offset=p.committed_offset,
                        leader_epoch=p.committed_leader_epoch,
                        metadata=metadata,
                        commit_ms=wall_ms,
                        transaction_version=2 if ctx.api_version >= TRANSACTION_V2_REQUEST_VERSION else 1,
                    )
                )
        response = _response(req, codes, NONE)
        if not records:
            fx.reply(ctx.reply_to, response)
            return

        def failed_response(error_code: int) -> TxnOffsetCommitResponse:
            code = offset_write_error(error_code)
            return _response(req, [c if c else code for c in codes], NONE)

        fx.reply(ctx.reply_to, response, failed_response)
        fx.write(records, on_durable=lambda out: self.load(records))

    # -- the transaction's outcome ------------------------------------------------------------------

    def complete(self, producer_id: int, producer_epoch: int, committed: bool, fx: Effects) -> int:
        """The transaction of (producer id, epoch) committed or aborted: its pending offsets of
        every group become committed offsets or go, once durable. Only offsets of that exact
        epoch are resolved: pending offsets of another epoch belong to another transaction,
        whose outcome this one says nothing about. Returns the number of partitions resolved."""
        records: list[Record] = []
        for group_id, producers in self.pending.items():
            partitions = producers.get(producer_id)
            if partitions is None:
                continue
            for record in partitions.values():
                if record.producer_epoch != producer_epoch:
                    continue
                records.append(TxnOffsetTombstone(group_id, producer_id, record.topic, record.partition))
                if committed:
                    records.append(_committed(record))
        if records:
            fx.write(records, on_durable=lambda out: self._apply(records))
        return sum(1 for r in records if isinstance(r, TxnOffsetTombstone))

    def _apply(self, records: Iterable[Record]) -> None:
        for record in records:
            if isinstance(record, TxnOffsetTombstone):
                self._remove(record.group_id, record.producer_id, (record.topic, record.partition))
            elif isinstance(record, OffsetCommitRecord):
                self.offsets.replay(record)

    def _remove(self, group_id: str, producer_id: int, key: PartitionKey) -> None:
        producers = self.pending.get(group_id)
        if producers is None:
            return
        partitions = producers.get(producer_id)
        if partitions is None:
            return
        partitions.pop(key, None)
        if not partitions:
            del producers[producer_id]
            if not producers:
                del self.pending[group_id]

    # -- what the rest of the core asks ---------------------------------------------------------------

    def is_pending(self, group_id: str, topic: str, partition: int) -> bool:
        producers = self.pending.get(group_id)
        if producers is None:
            return False
        key = (topic, partition)
        return any(key in partitions for partitions in producers.values())

    def has_pending(self, group_id: str) -> bool:
        return group_id in self.pending

    def pending_count(self) -> int:
        return sum(len(p) for producers in self.pending.values() for p in producers.values())

    def group_tombstones(self, group_id: str) -> list[TxnOffsetTombstone]:
        """Tombstones of a deleted group's pending offsets (Kafka deletes them with the group)."""
        producers = self.pending.get(group_id, {})
        return [
            TxnOffsetTombstone(group_id, producer_id, topic, partition)
            for producer_id, partitions in producers.items()
            for topic, partition in partitions
        ]

    def apply_tombstones(self, tombstones: Iterable[TxnOffsetTombstone]) -> None:
        self._apply(tombstones)

    def open_transactions(self) -> list[OpenTransaction]:
        """One entry per (group, producer id, producer epoch) with pending offsets."""
        found: dict[tuple[str, int, int], list[TxnOffsetRecord]] = {}
        for group_id, producers in self.pending.items():
            for producer_id, partitions in producers.items():
                for record in partitions.values():
                    found.setdefault((group_id, producer_id, record.producer_epoch), []).append(record)
        return [
            OpenTransaction(
                transactional_id=records[0].transactional_id,
                producer_id=producer_id,
                producer_epoch=epoch,
                group_id=group_id,
                partitions=len(records),
                first_commit_ms=min(r.commit_ms for r in records),
                transaction_version=max(r.transaction_version for r in records),
            )
            for (group_id, producer_id, epoch), records in sorted(found.items())
        ]

    def pending_of(self, group_id: str) -> list[TxnOffsetRecord]:
        producers = self.pending.get(group_id, {})
        return sorted(
            (r for partitions in producers.values() for r in partitions.values()),
            key=lambda r: (r.producer_id, r.topic, r.partition),
        )

    # -- load and replay ----------------------------------------------------------------------------

    def load(self, records: Iterable[TxnOffsetRecord]) -> None:
        for record in records:
            self.offsets.ensure_group(record.group_id)
            producers = self.pending.setdefault(record.group_id, {})
            producers.setdefault(record.producer_id, {})[(record.topic, record.partition)] = record

    def unload(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            self.pending.pop(group_id, None)

    def clear(self) -> None:
        self.pending.clear()


def _committed(record: TxnOffsetRecord) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        group_id=record.group_id,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        leader_epoch=record.leader_epoch,
        metadata=record.metadata,
        commit_ms=record.commit_ms,
        expire_ms=None,
    )


def _response(req: TxnOffsetCommitRequest, codes: list[int] | None, code: int) -> TxnOffsetCommitResponse:
    """One entry per requested partition, in request order: ``codes`` or ``code`` for all."""
    topics = []
    index = 0
    for topic in req.topics:
        partitions = []
        for p in topic.partitions:
            partitions.append(
                TxnOffsetCommitResponsePartition(p.partition_index, code if codes is None else codes[index])
            )
            index += 1
        topics.append(
            TxnOffsetCommitResponseTopic(name=topic.name, topic_id=topic.topic_id, partitions=partitions)
        )
    return TxnOffsetCommitResponse(topics=topics)
