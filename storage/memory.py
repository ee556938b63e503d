"""In-memory backend for tests and simulation, with latency and failure injection.

Semantics match the SQL backends, including the value checks their schemas enforce (int
widths, partition >= 0, 16-byte topic ids), so a batch one backend rejects the others reject
too. The data lives in a ``MemoryData`` object that outlives the store: pass it to a new
``MemoryStore`` to "reopen" the same database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from storage.base import StoreError
from storage.batch import OffsetKey
from storage.codec import CodecError, encode_configs, encode_consumer_topics, encode_members
from storage.records import (
    AclRecord,
    AclTombstone,
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    ConsumerMemberTombstone,
    GroupMetadataRecord,
    GroupTombstone,
    LoadedState,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    TopicRecord,
    TopicTombstone,
    UserCredentialRecord,
    UserCredentialTombstone,
)

_INT32 = range(-(2**31), 2**31)
_INT64 = range(-(2**63), 2**63)


@dataclass(slots=True)
class MemoryData:
    offsets: dict[OffsetKey, OffsetCommitRecord] = field(default_factory=dict)
    groups: dict[str, GroupMetadataRecord] = field(default_factory=dict)
    topics: dict[str, TopicRecord] = field(default_factory=dict)
    history: list[OffsetCommitRecord] = field(default_factory=list)
    credentials: dict[tuple[str, str], UserCredentialRecord] = field(default_factory=dict)
    acls: dict[AclRecord, None] = field(default_factory=dict)
    consumer_groups: dict[str, ConsumerGroupRecord] = field(default_factory=dict)
    # group_id -> member_id -> member, so a ConsumerGroupTombstone drops the group's members at once
    consumer_members: dict[str, dict[str, ConsumerMemberRecord]] = field(default_factory=dict)


class MemoryStore:
    def __init__(
        self,
        data: MemoryData | None = None,
        *,
        latency_ms: float = 0.0,
        history: bool = False,
    ) -> None:
        """``latency_ms``: artificial delay of every ``write`` (before it lands).
        ``history``: also append every offset commit to ``data.history``."""
        self.data = data if data is not None else MemoryData()
        self.latency_ms = latency_ms
        self.history = history
        # Failure injection: while ``broken`` every call raises StoreError; otherwise the
        # next ``fail_next_writes(n)`` writes raise it.
        self.broken = False
        self._fail_writes = 0
        # Observability for tests.
        self.write_calls = 0
        self.batch_sizes: list[int] = []
        self._opened = False
        self._closed = False

    def fail_next_writes(self, n: int = 1) -> None:
        self._fail_writes += n

    async def open(self) -> None:
        if self._closed:
            raise StoreError("MemoryStore is closed")
        if self.broken:
            raise StoreError("MemoryStore is broken (injected)")
        self._opened = True

    async def load(self) -> LoadedState:
        self._check_usable()
        return LoadedState(
            topics=list(self.data.topics.values()),
            groups=list(self.data.groups.values()),
            offsets=list(self.data.offsets.values()),
            credentials=list(self.data.credentials.values()),
            acls=list(self.data.acls),
            consumer_groups=list(self.data.consumer_groups.values()),
            consumer_members=[m for members in self.data.consumer_members.values() for m in members.values()],
        )

    async def load_credentials(self, user: str | None = None) -> list[UserCredentialRecord]:
        self._check_usable()
        return [c for c in self.data.credentials.values() if user is None or c.user == user]

    async def write(self, records: Sequence[Record]) -> None:
        self._check_usable()
        self.write_calls += 1
        self.batch_sizes.append(len(records))
        # Decided when the write starts, like a real backend that fails mid-transaction.
        fail = self._fail_writes > 0
        if fail:
            self._fail_writes -= 1
        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000)
        if fail or self.broken:
            raise StoreError("injected write failure")
        for record in records:
            _validate(record)
        self._apply(records)

    async def close(self) -> None:
        self._closed = True

    def _check_usable(self) -> None:
        if self._closed:
            raise StoreError("MemoryStore is closed")
        if not self._opened:
            raise StoreError("MemoryStore is not open")
        if self.broken:
            raise StoreError("MemoryStore is broken (injected)")

    def _apply(self, records: Sequence[Record]) -> None:
        data = self.data
        for r in records:
            if isinstance(r, OffsetCommitRecord):
                data.offsets[(r.group_id, r.topic, r.partition)] = r
                if self.history:
                    data.history.append(r)
            elif isinstance(r, OffsetTombstone):
                data.offsets.pop((r.group_id, r.topic, r.partition), None)
            elif isinstance(r, GroupMetadataRecord):
                data.groups[r.group_id] = r
            elif isinstance(r, GroupTombstone):
                data.groups.pop(r.group_id, None)
            elif isinstance(r, TopicRecord):
                data.topics[r.name] = r
            elif isinstance(r, TopicTombstone):
                data.topics.pop(r.name, None)
            elif isinstance(r, UserCredentialRecord):
                data.credentials[(r.user, r.mechanism)] = r
            elif isinstance(r, UserCredentialTombstone):
                data.credentials.pop((r.user, r.mechanism), None)
            elif isinstance(r, AclRecord):
                data.acls[r] = None
            elif isinstance(r, AclTombstone):
                data.acls.pop(r.acl, None)
            elif isinstance(r, ConsumerMemberRecord):
                data.consumer_members.setdefault(r.group_id, {})[r.member_id] = r
            elif isinstance(r, ConsumerMemberTombstone):
                members = data.consumer_members.get(r.group_id)
                if members is not None:
                    members.pop(r.member_id, None)
                    if not members:
                        del data.consumer_members[r.group_id]
            elif isinstance(r, ConsumerGroupRecord):
                data.consumer_groups[r.group_id] = r
            elif isinstance(r, ConsumerGroupTombstone):
                data.consumer_groups.pop(r.group_id, None)
                data.consumer_members.pop(r.group_id, None)


def _validate(r: Record) -> None:
    """Reject what the SQL schemas reject, before anything of the batch is applied."""
    try:
        if isinstance(r, OffsetCommitRecord):
            _check(isinstance(r.metadata, str), "metadata must be a str")
            _check(r.partition >= 0, "partition must be >= 0")
            _check(r.partition in _INT32 and r.leader_epoch in _INT32, "int32 out of range")
            _check(r.offset in _INT64 and r.commit_ms in _INT64, "int64 out of range")
            _check(r.expire_ms is None or r.expire_ms in _INT64, "int64 out of range")
        elif isinstance(r, GroupMetadataRecord):
            _check(r.generation_id in _INT32, "int32 out of range")
            _check(r.state_ms in _INT64, "int64 out of range")
            encode_members(r.members)
        elif isinstance(r, TopicRecord):
            _check(len(r.topic_id) == 16, "topic_id must be 16 bytes")
            _check(r.num_partitions in _INT32 and r.replication_factor in _INT32, "int32 out of range")
            encode_configs(r.configs)
        elif isinstance(r, UserCredentialRecord):
            _check(r.iterations in _INT32, "int32 out of range")
            _check(
                all(isinstance(b, bytes) for b in (r.salt, r.stored_key, r.server_key)), "keys must be bytes"
            )
        elif isinstance(r, AclRecord):
            _check(r.resource_type in _INT32 and r.pattern_type in _INT32, "int32 out of range")
            _check(r.operation in _INT32 and r.permission in _INT32, "int32 out of range")
        elif isinstance(r, ConsumerGroupRecord):
            _check(r.group_epoch in _INT32 and r.assignment_epoch in _INT32, "int32 out of range")
            _check(r.state_ms in _INT64, "int64 out of range")
        elif isinstance(r, ConsumerMemberRecord):
            _check(r.rebalance_timeout_ms in _INT32 and r.state in _INT32, "int32 out of range")
            _check(r.member_epoch in _INT32 and r.previous_member_epoch in _INT32, "int32 out of range")
            encode_consumer_topics(r.subscribed_topic_names, r.assigned, r.pending_revocation, r.target)
        elif not isinstance(
            r,
            OffsetTombstone
            | GroupTombstone
            | TopicTombstone
            | UserCredentialTombstone
            | AclTombstone
            | ConsumerMemberTombstone
            | ConsumerGroupTombstone,
        ):
            raise TypeError(f"not a storage record: {r!r}")
    except CodecError as exc:
        raise StoreError(f"cannot store {r!r}: {exc}") from exc
    except StoreError as exc:
        raise StoreError(f"cannot store {r!r}: {exc}") from None


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise StoreError(message)
