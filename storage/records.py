"""Persisted record types: the contract between the coordinator core and every storage backend.

Storage is a state table, not a log: each record is an upsert keyed by its identity, each
tombstone a delete. Loading returns the surviving rows, which the core replays to rebuild
its in-memory state.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class OffsetCommitRecord:
    """A committed offset; key (group_id, topic, partition)."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str
    commit_ms: int  # wall-clock milliseconds
    expire_ms: int | None  # explicit expiry (OffsetCommit v2-4 retention time), else None


@dataclass(slots=True, frozen=True)
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int


@dataclass(slots=True, frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # metadata of the selected protocol
    assignment: bytes


@dataclass(slots=True, frozen=True)
class GroupMetadataRecord:
    """Classic group metadata; key group_id. Written when the leader's assignment is stored,
    when the group becomes Empty, and when a static member is replaced."""

    group_id: str
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_ms: int  # wall-clock time of the last state transition
    members: tuple[MemberRecord, ...]


@dataclass(slots=True, frozen=True)
class GroupTombstone:
    group_id: str


@dataclass(slots=True, frozen=True)
class TopicRecord:
    """An entry of the topic catalog; key name."""

    name: str
    topic_id: bytes  # 16-byte UUID
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str | None], ...]


@dataclass(slots=True, frozen=True)
class TopicTombstone:
    name: str


Record = (
    OffsetCommitRecord | OffsetTombstone | GroupMetadataRecord | GroupTombstone | TopicRecord | TopicTombstone
)


@dataclass(slots=True)
class LoadedState:
    """Everything a backend holds, as returned by ``Store.load``."""

    topics: list[TopicRecord]
    groups: list[GroupMetadataRecord]
    offsets: list[OffsetCommitRecord]
