"""Persisted record types: the contract between the coordinator core and every storage backend.

Storage is a state table, not a log: each record is an upsert keyed by its identity, each
tombstone a delete. Loading returns the surviving rows, which the core replays to rebuild
its in-memory state.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


@dataclass(slots=True, frozen=True)
class UserCredentialRecord:
    """A SASL/SCRAM credential (RFC 5802); key (user, mechanism). Never a plain password:
    only the salt, the iteration count and the derived StoredKey and ServerKey."""

    user: str
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keep key material out of logs and tracebacks
        return f"UserCredentialRecord(user={self.user!r}, mechanism={self.mechanism!r}, iterations={self.iterations})"


@dataclass(slots=True, frozen=True)
class UserCredentialTombstone:
    user: str
    mechanism: str


@dataclass(slots=True, frozen=True)
class AclRecord:
    """An ACL binding (Kafka's model; the codes are Kafka's enums); the whole binding is the key."""

    resource_type: int  # 2 TOPIC, 3 GROUP, 4 CLUSTER, ...
    resource_name: str
    pattern_type: int  # 3 LITERAL, 4 PREFIXED
    principal: str  # User:name or User:*
    host: str  # an address or *
    operation: int  # 2 ALL, 3 READ, 6 DELETE, 8 DESCRIBE, ...
    permission: int  # 2 DENY, 3 ALLOW


@dataclass(slots=True, frozen=True)
class AclTombstone:
    acl: AclRecord


# ((topic name, sorted partitions), ...) sorted by topic.
TopicPartitionList = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(slots=True, frozen=True)
class ConsumerGroupRecord:
    """KIP-848 consumer group metadata; key group_id.

    Lives apart from the classic groups: a group converted from classic to consumer is a
    ``GroupTombstone`` plus a ``ConsumerGroupRecord`` of the same id (and the reverse)."""

    group_id: str
    group_epoch: int
    assignment_epoch: int
    state_ms: int  # wall-clock ms of the last change to the member set (retention of Empty groups)


@dataclass(slots=True, frozen=True)
class ConsumerMemberRecord:
    """A consumer group member, its subscription, current and target assignment; key
    (group_id, member_id)."""

    group_id: str
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int
    member_epoch: int
    previous_member_epoch: int
    state: int  # 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    assigned: TopicPartitionList
    pending_revocation: TopicPartitionList
    target: TopicPartitionList


@dataclass(slots=True, frozen=True)
class ConsumerMemberTombstone:
    group_id: str
    member_id: str


@dataclass(slots=True, frozen=True)
class ConsumerGroupTombstone:
    """Deletes the group row AND every member row of the group.

    Within a batch it also cancels the group's member records that precede it; member
    records that follow it are stored."""

    group_id: str


Record = (
    OffsetCommitRecord
    | OffsetTombstone
    | GroupMetadataRecord
    | GroupTombstone
    | TopicRecord
    | TopicTombstone
    | UserCredentialRecord
    | UserCredentialTombstone
    | AclRecord
    | AclTombstone
    | ConsumerGroupRecord
    | ConsumerGroupTombstone
    | ConsumerMemberRecord
    | ConsumerMemberTombstone
)


@dataclass(slots=True)
class LoadedState:
    """Everything a backend holds, as returned by ``Store.load``."""

    topics: list[TopicRecord]
    groups: list[GroupMetadataRecord]
    offsets: list[OffsetCommitRecord]
    credentials: list[UserCredentialRecord] = field(default_factory=list)
    acls: list[AclRecord] = field(default_factory=list)
    consumer_groups: list[ConsumerGroupRecord] = field(default_factory=list)
    consumer_members: list[ConsumerMemberRecord] = field(default_factory=list)
