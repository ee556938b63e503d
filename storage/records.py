"""Persisted record types: the contract between the coordinator core and every storage backend.

Storage is a state table, not a log: each record is an upsert of one row of its ``table``,
keyed by ``key``; each tombstone a delete of the row with that key. Loading returns the
surviving rows, which the core replays to rebuild its in-memory state.

Every record knows its table and key and applies itself to a mapping of that table's rows
(``apply_to``); the batch reducer, the backends and the in-memory views all go through that
instead of keying records on their own. One rule crosses tables: a tombstone of a row that is
a ``parent`` in ``storage/tables.py`` (a consumer group) also deletes its child rows (the
group's members).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from itertools import starmap
from typing import ClassVar, Generic, Self, TypeVar, overload

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class Upsert(Generic[K]):
    """A record that inserts or replaces the row ``key`` of ``table``."""

    __slots__ = ()
    table: ClassVar[str]
    is_tombstone: ClassVar[bool] = False

    @property
    def key(self) -> K:
        raise NotImplementedError

    def apply_to(self, rows: MutableMapping[K, Self]) -> Self | None:
        """Store this record as its key's row; returns the row it replaced."""
        key = self.key
        old = rows.get(key)
        rows[key] = self
        return old


class Tombstone(Generic[K, R]):
    """A record that deletes the row ``key`` of ``table`` (a no-op when there is none)."""

    __slots__ = ()
    table: ClassVar[str]
    is_tombstone: ClassVar[bool] = True

    @property
    def key(self) -> K:
        raise NotImplementedError

    def apply_to(self, rows: MutableMapping[K, R]) -> R | None:
        """Delete the key's row; returns the row it deleted."""
        return rows.pop(self.key, None)


OffsetKey = tuple[str, str, int]  # (group_id, topic, partition)
CredentialKey = tuple[str, str]  # (user, mechanism)
ConsumerMemberKey = tuple[str, str]  # (group_id, member_id)
StreamsMemberKey = tuple[str, str]  # (group_id, member_id)
GroupConfigKey = tuple[str, str]  # (group_id, config name)
TxnOffsetKey = tuple[str, int, str, int]  # (group_id, producer_id, topic, partition)
ShareMemberKey = tuple[str, str]  # (group_id, member_id)


@dataclass(slots=True, frozen=True)
class OffsetCommitRecord(Upsert[OffsetKey]):
    """A committed offset; key (group_id, topic, partition)."""

    table: ClassVar[str] = "offsets"

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str
    commit_ms: int  # wall-clock milliseconds
    expire_ms: int | None  # explicit expiry (OffsetCommit v2-4 retention time), else None

    @property
    def key(self) -> OffsetKey:
        return (self.group_id, self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class OffsetTombstone(Tombstone[OffsetKey, OffsetCommitRecord]):
    table: ClassVar[str] = "offsets"

    group_id: str
    topic: str
    partition: int

    @property
    def key(self) -> OffsetKey:
        return (self.group_id, self.topic, self.partition)


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
class GroupMetadataRecord(Upsert[str]):
    """Classic group metadata; key group_id. Written when the leader's assignment is stored,
    when the group becomes Empty, and when a static member is replaced."""

    table: ClassVar[str] = "groups"

    group_id: str
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_ms: int  # wall-clock time of the last state transition
    members: tuple[MemberRecord, ...]

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class GroupTombstone(Tombstone[str, GroupMetadataRecord]):
    table: ClassVar[str] = "groups"

    group_id: str

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class TopicRecord(Upsert[str]):
    """An entry of the topic catalog; key name."""

    table: ClassVar[str] = "topics"

    name: str
    topic_id: bytes  # 16-byte UUID
    num_partitions: int
    replication_factor: int
    configs: tuple[tuple[str, str | None], ...]

    @property
    def key(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class TopicTombstone(Tombstone[str, TopicRecord]):
    table: ClassVar[str] = "topics"

    name: str

    @property
    def key(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class UserCredentialRecord(Upsert[CredentialKey]):
    """A SASL/SCRAM credential (RFC 5802); key (user, mechanism). Never a plain password:
    only the salt, the iteration count and the derived StoredKey and ServerKey."""

    table: ClassVar[str] = "user_credentials"

    user: str
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @property
    def key(self) -> CredentialKey:
        return (self.user, self.mechanism)

    def __repr__(self) -> str:  # keep key material out of logs and tracebacks
        return f"UserCredentialRecord(user={self.user!r}, mechanism={self.mechanism!r}, iterations={self.iterations})"


@dataclass(slots=True, frozen=True)
class UserCredentialTombstone(Tombstone[CredentialKey, UserCredentialRecord]):
    table: ClassVar[str] = "user_credentials"

    user: str
    mechanism: str

    @property
    def key(self) -> CredentialKey:
        return (self.user, self.mechanism)


@dataclass(slots=True, frozen=True)
class AclRecord(Upsert["AclRecord"]):
    """An ACL binding (Kafka's model; the codes are Kafka's enums); the whole binding is the key."""

    table: ClassVar[str] = "acls"

    resource_type: int  # 2 TOPIC, 3 GROUP, 4 CLUSTER, ...
    resource_name: str
    pattern_type: int  # 3 LITERAL, 4 PREFIXED
    principal: str  # User:name or User:*
    host: str  # an address or *
    operation: int  # 2 ALL, 3 READ, 6 DELETE, 8 DESCRIBE, ...
    permission: int  # 2 DENY, 3 ALLOW

    @property
    def key(self) -> AclRecord:
        return self


@dataclass(slots=True, frozen=True)
class AclTombstone(Tombstone[AclRecord, AclRecord]):
    table: ClassVar[str] = "acls"

    acl: AclRecord

    @property
    def key(self) -> AclRecord:
        return self.acl


# ((topic name, sorted partitions), ...) sorted by topic.
TopicPartitionList = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(slots=True, frozen=True)
class ConsumerGroupRecord(Upsert[str]):
    """KIP-848 consumer group metadata; key group_id.

    Lives apart from the classic groups: a group converted from classic to consumer is a
    ``GroupTombstone`` plus a ``ConsumerGroupRecord`` of the same id (and the reverse)."""

    table: ClassVar[str] = "consumer_groups"

    group_id: str
    group_epoch: int
    assignment_epoch: int
    state_ms: int  # wall-clock ms of the last change to the member set (retention of Empty groups)

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class ConsumerMemberRecord(Upsert[ConsumerMemberKey]):
    """A consumer group member, its subscription, current and target assignment; key
    (group_id, member_id)."""

    table: ClassVar[str] = "consumer_members"

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
    # A member that joined with the classic protocol (JoinGroup inside a consumer group): its
    # session timeout and its (protocol name, metadata) pairs in preference order; None otherwise.
    classic_session_timeout_ms: int | None = None
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None

    @property
    def key(self) -> ConsumerMemberKey:
        return (self.group_id, self.member_id)


@dataclass(slots=True, frozen=True)
class ConsumerMemberTombstone(Tombstone[ConsumerMemberKey, ConsumerMemberRecord]):
    table: ClassVar[str] = "consumer_members"

    group_id: str
    member_id: str

    @property
    def key(self) -> ConsumerMemberKey:
        return (self.group_id, self.member_id)


@dataclass(slots=True, frozen=True)
class ConsumerGroupTombstone(Tombstone[str, ConsumerGroupRecord]):
    """Deletes the group row AND every member row of the group (``consumer_members`` has
    ``consumer_groups`` as its parent table).

    Within a batch it also cancels the group's member records that precede it; member
    records that follow it are stored."""

    table: ClassVar[str] = "consumer_groups"

    group_id: str

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class ShareGroupRecord(Upsert[str]):
    """KIP-932 share group metadata; key group_id (docs/share-groups.md, "Membership")."""

    table: ClassVar[str] = "share_groups"

    group_id: str
    group_epoch: int
    assignment_epoch: int

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class ShareMemberRecord(Upsert[ShareMemberKey]):
    """A share group member, its subscription and assignment (its target: share groups have no
    revocation); key (group_id, member_id)."""

    table: ClassVar[str] = "share_members"

    group_id: str
    member_id: str
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    member_epoch: int
    previous_member_epoch: int
    assigned: TopicPartitionList
    # The member's part of the target assignment: ahead of ``assigned`` until its next heartbeat.
    target: TopicPartitionList = ()

    @property
    def key(self) -> ShareMemberKey:
        return (self.group_id, self.member_id)


@dataclass(slots=True, frozen=True)
class ShareMemberTombstone(Tombstone[ShareMemberKey, ShareMemberRecord]):
    table: ClassVar[str] = "share_members"

    group_id: str
    member_id: str

    @property
    def key(self) -> ShareMemberKey:
        return (self.group_id, self.member_id)


@dataclass(slots=True, frozen=True)
class ShareGroupTombstone(Tombstone[str, ShareGroupRecord]):
    """Deletes the share group row and every member row of the group (``share_members`` has
    ``share_groups`` as its parent table)."""

    table: ClassVar[str] = "share_groups"

    group_id: str

    @property
    def key(self) -> str:
        return self.group_id


# (first offset, last offset, delivery state, delivery count) runs, Kafka's state ids.
ShareStateBatches = tuple[tuple[int, int, int, int], ...]


@dataclass(slots=True, frozen=True)
class SharePartitionStateRecord(Upsert[OffsetKey]):
    """The persisted state of one share-partition (Kafka's share coordinator record): its start
    offset, state epoch and in-flight batches; key (group_id, topic, partition)."""

    table: ClassVar[str] = "share_partitions"

    group_id: str
    topic: str
    partition: int
    start_offset: int
    state_epoch: int
    batches: ShareStateBatches

    @property
    def key(self) -> OffsetKey:
        return (self.group_id, self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class SharePartitionStateTombstone(Tombstone[OffsetKey, SharePartitionStateRecord]):
    table: ClassVar[str] = "share_partitions"

    group_id: str
    topic: str
    partition: int

    @property
    def key(self) -> OffsetKey:
        return (self.group_id, self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class StreamsGroupRecord(Upsert[str]):
    """A KIP-1071 streams group: its epochs and its topology (a JSON document,
    coordinator/core/streams/records.py); key group_id."""

    table: ClassVar[str] = "streams_groups"

    group_id: str
    group_epoch: int
    assignment_epoch: int
    state_ms: int
    topology: str  # JSON; "" while the group has none

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class StreamsGroupTombstone(Tombstone[str, StreamsGroupRecord]):
    """Deletes the streams group row AND every member row of the group."""

    table: ClassVar[str] = "streams_groups"

    group_id: str

    @property
    def key(self) -> str:
        return self.group_id


@dataclass(slots=True, frozen=True)
class StreamsMemberRecord(Upsert[StreamsMemberKey]):
    """A streams group member, its current and target tasks; key (group_id, member_id). The
    tasks and the member's metadata are a JSON document (coordinator/core/streams/records.py)."""

    table: ClassVar[str] = "streams_members"

    group_id: str
    member_id: str
    instance_id: str | None
    member_epoch: int
    previous_member_epoch: int
    state: int  # 0 STABLE, 1 UNREVOKED_TASKS, 2 UNRELEASED_TASKS
    process_id: str
    details: str  # JSON

    @property
    def key(self) -> StreamsMemberKey:
        return (self.group_id, self.member_id)


@dataclass(slots=True, frozen=True)
class StreamsMemberTombstone(Tombstone[StreamsMemberKey, StreamsMemberRecord]):
    table: ClassVar[str] = "streams_members"

    group_id: str
    member_id: str

    @property
    def key(self) -> StreamsMemberKey:
        return (self.group_id, self.member_id)


@dataclass(slots=True, frozen=True)
class GroupConfigRecord(Upsert[GroupConfigKey]):
    """A dynamic group config (e.g. ``consumer.session.timeout.ms``) set for one group; key
    (group_id, name). Lives apart from the group's state, as Kafka keeps it: it may name a group
    that does not exist (yet) and survives the group's deletion."""

    table: ClassVar[str] = "group_configs"

    group_id: str
    name: str
    value: str

    @property
    def key(self) -> GroupConfigKey:
        return (self.group_id, self.name)


@dataclass(slots=True, frozen=True)
class GroupConfigTombstone(Tombstone[GroupConfigKey, GroupConfigRecord]):
    """A group config set back to the broker-level default."""

    table: ClassVar[str] = "group_configs"

    group_id: str
    name: str

    @property
    def key(self) -> GroupConfigKey:
        return (self.group_id, self.name)


@dataclass(slots=True, frozen=True)
class TxnOffsetRecord(Upsert[TxnOffsetKey]):
    """An offset committed inside a transaction (TxnOffsetCommit) whose outcome is not known
    yet; key (group_id, producer_id, topic, partition). Becomes an ``OffsetCommitRecord`` when
    the transaction commits, is deleted when it aborts (docs/transactions.md)."""

    table: ClassVar[str] = "txn_offsets"

    group_id: str
    producer_id: int
    topic: str
    partition: int
    producer_epoch: int
    transactional_id: str
    offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str
    commit_ms: int  # wall-clock milliseconds of the TxnOffsetCommit
    # 2 when committed with TxnOffsetCommit v5+ (KIP-890: the producer uses transaction version
    # 2, every transaction end bumps its epoch), else 1.
    transaction_version: int = 1

    @property
    def key(self) -> TxnOffsetKey:
        return (self.group_id, self.producer_id, self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class TxnOffsetTombstone(Tombstone[TxnOffsetKey, TxnOffsetRecord]):
    table: ClassVar[str] = "txn_offsets"

    group_id: str
    producer_id: int
    topic: str
    partition: int

    @property
    def key(self) -> TxnOffsetKey:
        return (self.group_id, self.producer_id, self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class ClusterRecord(Upsert[str]):
    """The cluster id of this database (one row); key cluster_id."""

    table: ClassVar[str] = "cluster"

    cluster_id: str
    formatted_ms: int  # wall-clock milliseconds of the format (or of the re-label with --init)

    @property
    def key(self) -> str:
        return self.cluster_id


@dataclass(slots=True, frozen=True)
class ClusterTombstone(Tombstone[str, ClusterRecord]):
    table: ClassVar[str] = "cluster"

    cluster_id: str

    @property
    def key(self) -> str:
        return self.cluster_id


# The stored rows of groups, of every kind (each kind's manager loads its own).
GroupRow = (
    GroupMetadataRecord
    | ConsumerGroupRecord
    | ConsumerMemberRecord
    | ShareGroupRecord
    | ShareMemberRecord
    | SharePartitionStateRecord
    | StreamsGroupRecord
    | StreamsMemberRecord
)


@dataclass(frozen=True, slots=True)
class ServingModeRecord(Upsert[str]):
    """How this database is served (one row): ``standalone``, or ``gateway`` in front of the
    cluster at ``upstream`` (its bootstrap servers); key mode. Recorded at the first start and
    checked at every start (coordinator/server/serving_mode.py)."""

    table: ClassVar[str] = "serving_mode"

    mode: str
    upstream: str  # the upstream bootstrap servers in gateway mode, empty standalone
    recorded_ms: int  # wall-clock milliseconds of the first start in this mode

    @property
    def key(self) -> str:
        return self.mode


@dataclass(frozen=True, slots=True)
class ServingModeTombstone(Tombstone[str, ServingModeRecord]):
    table: ClassVar[str] = "serving_mode"

    mode: str

    @property
    def key(self) -> str:
        return self.mode


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
    | ShareGroupRecord
    | ShareGroupTombstone
    | ShareMemberRecord
    | ShareMemberTombstone
    | SharePartitionStateRecord
    | SharePartitionStateTombstone
    | StreamsGroupRecord
    | StreamsGroupTombstone
    | StreamsMemberRecord
    | StreamsMemberTombstone
    | GroupConfigRecord
    | GroupConfigTombstone
    | ClusterRecord
    | ClusterTombstone
    | TxnOffsetRecord
    | TxnOffsetTombstone
    | ServingModeRecord
    | ServingModeTombstone
)


@dataclass(frozen=True, slots=True)
class GroupEventRecord:
    """One group event kept in ``group_events`` (append-only; pruned by age and row count).

    Not a state record: events are written in their own batches, apart from the writes that
    carry acknowledged state, and only when the server persists events.
    """

    group_id: str
    seq: int  # the event's sequence number in the process that recorded it
    time_ms: int  # wall-clock milliseconds
    kind: str
    protocol: str
    state: str
    generation: int
    member_id: str | None
    message: str
    details: str  # a JSON object


# One offsets row as a store reads it, in OffsetCommitRecord's field order: (group id, topic,
# partition, offset, leader epoch, metadata, commit ms, expire ms or None).
OffsetRow = tuple[str, str, int, int, int, str, int, int | None]


class StoredOffsets(Sequence[OffsetCommitRecord]):
    """Loaded offset rows kept as the store read them (``rows``), seen as records: the core
    loads the rows straight into its columns, and a record is built only when one is read
    (docs/performance.md#offsets-in-parallel-arrays). Equal to any sequence of equal records."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[OffsetRow]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> OffsetCommitRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[OffsetCommitRecord]: ...

    def __getitem__(self, index: int | slice) -> OffsetCommitRecord | list[OffsetCommitRecord]:
        if isinstance(index, slice):
            return list(starmap(OffsetCommitRecord, self.rows[index]))
        return OffsetCommitRecord(*self.rows[index])

    def __iter__(self) -> Iterator[OffsetCommitRecord]:
        return starmap(OffsetCommitRecord, self.rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoredOffsets):
            return self.rows == other.rows
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == len(self.rows) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredOffsets({list(self)!r})"


def offset_rows(offsets: Sequence[OffsetCommitRecord]) -> Sequence[OffsetRow]:
    """The rows of loaded offsets (``OffsetRow``s), without records when the store kept them."""
    if isinstance(offsets, StoredOffsets):
        return offsets.rows
    return [
        (r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_ms, r.expire_ms)
        for r in offsets
    ]


@dataclass(slots=True)
class LoadedState:
    """Everything a backend holds, as returned by ``Store.load``."""

    topics: list[TopicRecord]
    groups: list[GroupMetadataRecord]
    # A list of records, or the rows as read (StoredOffsets; SQLite).
    offsets: Sequence[OffsetCommitRecord]
    credentials: list[UserCredentialRecord] = field(default_factory=list)
    acls: list[AclRecord] = field(default_factory=list)
    consumer_groups: list[ConsumerGroupRecord] = field(default_factory=list)
    consumer_members: list[ConsumerMemberRecord] = field(default_factory=list)
    share_groups: list[ShareGroupRecord] = field(default_factory=list)
    share_members: list[ShareMemberRecord] = field(default_factory=list)
    share_partitions: list[SharePartitionStateRecord] = field(default_factory=list)
    streams_groups: list[StreamsGroupRecord] = field(default_factory=list)
    streams_members: list[StreamsMemberRecord] = field(default_factory=list)
    group_configs: list[GroupConfigRecord] = field(default_factory=list)
    cluster: list[ClusterRecord] = field(default_factory=list)
    txn_offsets: list[TxnOffsetRecord] = field(default_factory=list)

    def group_rows(self) -> list[GroupRow]:
        """The rows of groups of every kind, in the order the coordinator loads them."""
        return [
            *self.groups,
            *self.consumer_groups,
            *self.consumer_members,
            *self.share_groups,
            *self.share_members,
            *self.share_partitions,
            *self.streams_groups,
            *self.streams_members,
        ]


@dataclass(slots=True)
class StoredIdentity:
    """What ``Store.load_identity`` returns: the stored cluster id rows, and how the store found
    the database when it opened it: ``created`` when it did not exist (no SQLite file, no schema
    yet, a new memory store); ``schema_version_at_open`` is the schema version before this
    open's migrations ran (0: no schema at all); ``has_state`` whether any topic, group or
    offset is stored (users and ACLs added before a first start do not count)."""

    cluster: list[ClusterRecord]
    created: bool
    schema_version_at_open: int
    has_state: bool = False
    serving_mode: list[ServingModeRecord] = field(default_factory=list)
