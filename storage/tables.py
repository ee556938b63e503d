"""The stored tables, described once: columns, types, key, and how a record maps to a row.

Both SQL backends derive every statement they run from these descriptions (``storage/sql.py``)
and the in-memory store keeps one mapping per table. The migrations under
``storage/migrations/`` create the tables; ``tests/storage/test_tables.py`` checks that a
migrated SQLite and PostgreSQL database has exactly these columns, types, nullability and
primary keys, so a new migration without a matching change here (or the reverse) fails.

A row is a tuple of Python values in column order; composite values (a group's members, a
topic's configs, a consumer member's topic lists) are encoded by ``storage/codec.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from storage.codec import (
    CodecError,
    decode_classic_protocols,
    decode_configs,
    decode_consumer_topics,
    decode_members,
    decode_share_batches,
    encode_classic_protocols,
    encode_configs,
    encode_consumer_topics,
    encode_members,
    encode_share_batches,
)
from storage.records import (
    AclRecord,
    ClusterRecord,
    ConsumerGroupRecord,
    ConsumerMemberRecord,
    GroupConfigRecord,
    GroupEventRecord,
    GroupMetadataRecord,
    LoadedState,
    OffsetCommitRecord,
    ServingModeRecord,
    ShareGroupRecord,
    ShareMemberRecord,
    SharePartitionStateRecord,
    StoredOffsets,
    StreamsGroupRecord,
    StreamsMemberRecord,
    TopicRecord,
    TxnOffsetRecord,
    UserCredentialRecord,
)

R = TypeVar("R")
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class SqlType:
    """A column type in each dialect (``postgres_array`` casts a whole column sent as an array)."""

    sqlite: str
    postgres: str
    postgres_array: str
    # Client strings that may hold U+0000, which PostgreSQL's text cannot: stored there as
    # their UTF-8 bytes.
    postgres_utf8_bytes: bool = False


TEXT: Final = SqlType("TEXT", "text", "text[]")
INT32: Final = SqlType("INTEGER", "integer", "int4[]")
INT64: Final = SqlType("INTEGER", "bigint", "int8[]")
BLOB: Final = SqlType("BLOB", "bytea", "bytea[]")
CLIENT_TEXT: Final = SqlType("TEXT", "bytea", "bytea[]", postgres_utf8_bytes=True)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: SqlType
    nullable: bool = False
    generated: bool = False  # filled by the database (a sequence), never written
    # CHECK constraints of the migrations: the smallest value, the exact length in bytes.
    minimum: int | None = None
    length: int | None = None


@dataclass(frozen=True, slots=True, eq=False)  # one object per table: hashed by identity
class Table(Generic[R]):
    """One stored table and the record type whose upserts fill it."""

    name: str
    columns: tuple[Column, ...]  # every column of the table, in table order
    key: tuple[str, ...]  # the primary key columns, the leading columns in order
    # A record as the row of its written (not generated) columns, and back: ``from_row`` is
    # called with the row's values as positional arguments.
    to_row: Callable[[R], Row]
    from_row: Callable[..., R]
    # The key column values of a record's ``key``.
    key_values: Callable[[Any], Row]
    # A tombstone of a row of the parent table deletes every row here whose first key column
    # equals the parent row's key.
    parent: str | None = None
    # Columns naming what a row is (a topic's id): an upsert changes a stored row only when
    # they match, else the stored row stays ("create if absent": of two nodes creating the
    # same topic at once, the first write wins, docs/multinode.md). A row deleted and written
    # again in one batch is deleted first (storage/batch.py).
    identity: tuple[str, ...] = ()
    written: tuple[Column, ...] = field(init=False)  # the columns a row holds, in order

    def __post_init__(self) -> None:
        object.__setattr__(self, "written", tuple(c for c in self.columns if not c.generated))
        if tuple(c.name for c in self.columns[: len(self.key)]) != self.key:
            raise ValueError(f"table {self.name}: the key {self.key} must be the leading columns")


def _single(key: str) -> Row:
    return (key,)


def _same(key: Row) -> Row:
    return key


def _offset_row(r: OffsetCommitRecord) -> Row:
    return (r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_ms, r.expire_ms)


def _group_row(g: GroupMetadataRecord) -> Row:
    members = encode_members(g.members)
    return (g.group_id, g.protocol_type, g.generation_id, g.protocol_name, g.leader_id, g.state_ms, members)


def _group_from_row(
    group_id: str,
    protocol_type: str | None,
    generation_id: int,
    protocol_name: str | None,
    leader_id: str | None,
    state_ms: int,
    members: bytes,
) -> GroupMetadataRecord:
    try:
        decoded = decode_members(members)
    except CodecError as exc:
        raise CodecError(f"group {group_id!r}: {exc}") from exc
    return GroupMetadataRecord(
        group_id, protocol_type, generation_id, protocol_name, leader_id, state_ms, decoded
    )


def _topic_row(t: TopicRecord) -> Row:
    return (t.name, t.topic_id, t.num_partitions, t.replication_factor, encode_configs(t.configs))


def _topic_from_row(
    name: str, topic_id: bytes, num_partitions: int, replication_factor: int, configs: str
) -> TopicRecord:
    return TopicRecord(name, topic_id, num_partitions, replication_factor, decode_configs(configs))


def _credential_row(c: UserCredentialRecord) -> Row:
    return (c.user, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations)


def _acl_row(a: AclRecord) -> Row:
    return (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission)


def _cluster_row(c: ClusterRecord) -> Row:
    return (c.cluster_id, c.formatted_ms)


def _consumer_group_row(g: ConsumerGroupRecord) -> Row:
    return (g.group_id, g.group_epoch, g.assignment_epoch, g.state_ms)


def consumer_member_row(m: ConsumerMemberRecord) -> Row:
    topics = encode_consumer_topics(m.subscribed_topic_names, m.assigned, m.pending_revocation, m.target)
    return (m.group_id, m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host,
            m.subscribed_topic_regex, m.server_assignor, m.rebalance_timeout_ms, m.member_epoch,
            m.previous_member_epoch, m.state, topics, m.classic_session_timeout_ms,
            None if m.classic_protocols is None else encode_classic_protocols(m.classic_protocols))  # fmt: skip


def consumer_member_from_row(
    group_id: str,
    member_id: str,
    instance_id: str | None,
    rack_id: str | None,
    client_id: str,
    client_host: str,
    regex: str | None,
    assignor: str | None,
    rebalance_timeout_ms: int,
    member_epoch: int,
    previous_member_epoch: int,
    state: int,
    topics: bytes,
    classic_session_timeout_ms: int | None = None,
    classic_protocols: bytes | None = None,
) -> ConsumerMemberRecord:
    try:
        subscribed, assigned, pending_revocation, target = decode_consumer_topics(topics)
        protocols = None if classic_protocols is None else decode_classic_protocols(classic_protocols)
    except CodecError as exc:
        raise CodecError(f"consumer member {member_id!r} of group {group_id!r}: {exc}") from exc
    return ConsumerMemberRecord(group_id, member_id, instance_id, rack_id, client_id, client_host, subscribed,
                                regex, assignor, rebalance_timeout_ms, member_epoch, previous_member_epoch,
                                state, assigned, pending_revocation, target, classic_session_timeout_ms,
                                protocols)  # fmt: skip


def share_member_row(m: ShareMemberRecord) -> Row:
    topics = encode_consumer_topics(m.subscribed_topic_names, m.assigned, (), m.target)
    return (m.group_id, m.member_id, m.rack_id, m.client_id, m.client_host, m.member_epoch,
            m.previous_member_epoch, topics)  # fmt: skip


def share_member_from_row(
    group_id: str,
    member_id: str,
    rack_id: str | None,
    client_id: str,
    client_host: str,
    member_epoch: int,
    previous_member_epoch: int,
    topics: bytes,
) -> ShareMemberRecord:
    try:
        subscribed, assigned, _, target = decode_consumer_topics(topics)
    except CodecError as exc:
        raise CodecError(f"share member {member_id!r} of group {group_id!r}: {exc}") from exc
    return ShareMemberRecord(group_id, member_id, rack_id, client_id, client_host, subscribed, member_epoch,
                             previous_member_epoch, assigned, target)  # fmt: skip


_OFFSET_COLUMNS: Final = (
    Column("group_id", TEXT),
    Column("topic", TEXT),
    Column("partition", INT32, minimum=0),
    Column("committed_offset", INT64),
    Column("leader_epoch", INT32),
    Column("metadata", CLIENT_TEXT),
    Column("commit_ms", INT64),
    Column("expire_ms", INT64, nullable=True),
)

OFFSETS: Final[Table[OffsetCommitRecord]] = Table(
    "offsets",
    _OFFSET_COLUMNS,
    key=("group_id", "topic", "partition"),
    to_row=_offset_row,
    from_row=OffsetCommitRecord,  # the columns are in field order
    key_values=_same,
)
GROUPS: Final[Table[GroupMetadataRecord]] = Table(
    "groups",
    (
        Column("group_id", TEXT),
        Column("protocol_type", TEXT, nullable=True),
        Column("generation_id", INT32),
        Column("protocol_name", TEXT, nullable=True),
        Column("leader_id", TEXT, nullable=True),
        Column("state_ms", INT64),
        Column("members", BLOB),
    ),
    key=("group_id",),
    to_row=_group_row,
    from_row=_group_from_row,
    key_values=_single,
)
TOPICS: Final[Table[TopicRecord]] = Table(
    "topics",
    (
        Column("name", TEXT),
        Column("topic_id", BLOB, length=16),
        Column("num_partitions", INT32),
        Column("replication_factor", INT32),
        Column("configs", TEXT),
    ),
    key=("name",),
    to_row=_topic_row,
    from_row=_topic_from_row,
    key_values=_single,
    identity=("topic_id",),
)
USER_CREDENTIALS: Final[Table[UserCredentialRecord]] = Table(
    "user_credentials",
    (
        Column("user_name", TEXT),
        Column("mechanism", TEXT),
        Column("salt", BLOB),
        Column("stored_key", BLOB),
        Column("server_key", BLOB),
        Column("iterations", INT32),
    ),
    key=("user_name", "mechanism"),
    to_row=_credential_row,
    from_row=UserCredentialRecord,
    key_values=_same,
)
ACLS: Final[Table[AclRecord]] = Table(
    "acls",
    (
        Column("resource_type", INT32),
        Column("resource_name", TEXT),
        Column("pattern_type", INT32),
        Column("principal", TEXT),
        Column("host", TEXT),
        Column("operation", INT32),
        Column("permission", INT32),
    ),
    key=("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"),
    to_row=_acl_row,
    from_row=AclRecord,
    key_values=_acl_row,
)
CONSUMER_GROUPS: Final[Table[ConsumerGroupRecord]] = Table(
    "consumer_groups",
    (
        Column("group_id", TEXT),
        Column("group_epoch", INT32),
        Column("assignment_epoch", INT32),
        Column("state_ms", INT64),
    ),
    key=("group_id",),
    to_row=_consumer_group_row,
    from_row=ConsumerGroupRecord,
    key_values=_single,
)
CONSUMER_MEMBERS: Final[Table[ConsumerMemberRecord]] = Table(
    "consumer_members",
    (
        Column("group_id", TEXT),
        Column("member_id", TEXT),
        Column("instance_id", TEXT, nullable=True),
        Column("rack_id", TEXT, nullable=True),
        Column("client_id", TEXT),
        Column("client_host", TEXT),
        Column("subscribed_topic_regex", TEXT, nullable=True),
        Column("server_assignor", TEXT, nullable=True),
        Column("rebalance_timeout_ms", INT32),
        Column("member_epoch", INT32),
        Column("previous_member_epoch", INT32),
        Column("state", INT32),
        Column("topics", BLOB),
        Column("classic_session_timeout_ms", INT32, nullable=True),
        Column("classic_protocols", BLOB, nullable=True),
    ),
    key=("group_id", "member_id"),
    to_row=consumer_member_row,
    from_row=consumer_member_from_row,
    key_values=_same,
    parent="consumer_groups",
)
SHARE_GROUPS: Final[Table[ShareGroupRecord]] = Table(
    "share_groups",
    (Column("group_id", TEXT), Column("group_epoch", INT32), Column("assignment_epoch", INT32)),
    key=("group_id",),
    to_row=lambda g: (g.group_id, g.group_epoch, g.assignment_epoch),
    from_row=ShareGroupRecord,
    key_values=_single,
)
SHARE_MEMBERS: Final[Table[ShareMemberRecord]] = Table(
    "share_members",
    (
        Column("group_id", TEXT),
        Column("member_id", TEXT),
        Column("rack_id", TEXT, nullable=True),
        Column("client_id", TEXT),
        Column("client_host", TEXT),
        Column("member_epoch", INT32),
        Column("previous_member_epoch", INT32),
        Column("topics", BLOB),
    ),
    key=("group_id", "member_id"),
    to_row=share_member_row,
    from_row=share_member_from_row,
    key_values=_same,
    parent="share_groups",
)
SHARE_PARTITIONS: Final[Table[SharePartitionStateRecord]] = Table(
    "share_partitions",
    (
        Column("group_id", TEXT),
        Column("topic", TEXT),
        Column("partition", INT32, minimum=0),
        Column("start_offset", INT64),
        Column("state_epoch", INT32),
        Column("batches", BLOB),
    ),
    key=("group_id", "topic", "partition"),
    to_row=lambda s: (
        s.group_id,
        s.topic,
        s.partition,
        s.start_offset,
        s.state_epoch,
        encode_share_batches(s.batches),
    ),
    from_row=lambda g, t, p, start, epoch, blob: SharePartitionStateRecord(
        g, t, p, start, epoch, decode_share_batches(blob)
    ),
    key_values=_same,
    parent="share_groups",
)
STREAMS_GROUPS: Final[Table[StreamsGroupRecord]] = Table(
    "streams_groups",
    (
        Column("group_id", TEXT),
        Column("group_epoch", INT32),
        Column("assignment_epoch", INT32),
        Column("state_ms", INT64),
        Column("topology", TEXT),
    ),
    key=("group_id",),
    to_row=lambda g: (g.group_id, g.group_epoch, g.assignment_epoch, g.state_ms, g.topology),
    from_row=StreamsGroupRecord,
    key_values=_single,
)
STREAMS_MEMBERS: Final[Table[StreamsMemberRecord]] = Table(
    "streams_members",
    (
        Column("group_id", TEXT),
        Column("member_id", TEXT),
        Column("instance_id", TEXT, nullable=True),
        Column("member_epoch", INT32),
        Column("previous_member_epoch", INT32),
        Column("state", INT32),
        Column("process_id", TEXT),
        Column("details", TEXT),
    ),
    key=("group_id", "member_id"),
    to_row=lambda m: (
        m.group_id,
        m.member_id,
        m.instance_id,
        m.member_epoch,
        m.previous_member_epoch,
        m.state,
        m.process_id,
        m.details,
    ),
    from_row=StreamsMemberRecord,
    key_values=_same,
    parent="streams_groups",
)
GROUP_CONFIGS: Final[Table[GroupConfigRecord]] = Table(
    "group_configs",
    (Column("group_id", TEXT), Column("name", TEXT), Column("value", TEXT)),
    key=("group_id", "name"),
    to_row=lambda c: (c.group_id, c.name, c.value),
    from_row=GroupConfigRecord,
    key_values=_same,
)
# Transactional offsets waiting for their transaction's outcome (docs/transactions.md).
TXN_OFFSETS: Final[Table[TxnOffsetRecord]] = Table(
    "txn_offsets",
    (
        Column("group_id", TEXT),
        Column("producer_id", INT64),
        Column("topic", TEXT),
        Column("partition", INT32, minimum=0),
        Column("producer_epoch", INT32),
        Column("transactional_id", TEXT),
        Column("committed_offset", INT64),
        Column("leader_epoch", INT32),
        Column("metadata", CLIENT_TEXT),
        Column("commit_ms", INT64),
        Column("transaction_version", INT32, minimum=1),
    ),
    key=("group_id", "producer_id", "topic", "partition"),
    to_row=lambda r: (
        r.group_id,
        r.producer_id,
        r.topic,
        r.partition,
        r.producer_epoch,
        r.transactional_id,
        r.offset,
        r.leader_epoch,
        r.metadata,
        r.commit_ms,
        r.transaction_version,
    ),
    from_row=TxnOffsetRecord,  # the columns are in field order
    key_values=_same,
)

CLUSTER: Final[Table[ClusterRecord]] = Table(
    "cluster",
    (Column("cluster_id", TEXT), Column("formatted_ms", INT64)),
    key=("cluster_id",),
    to_row=_cluster_row,
    from_row=ClusterRecord,
    key_values=_single,
)

SERVING_MODE: Final[Table[ServingModeRecord]] = Table(
    "serving_mode",
    (Column("mode", TEXT), Column("upstream", TEXT), Column("recorded_ms", INT64)),
    key=("mode",),
    to_row=lambda m: (m.mode, m.upstream, m.recorded_ms),
    from_row=ServingModeRecord,
    key_values=_single,
)

# Every state table, in the order a batch's statements run (any order is correct: a batch
# touches each key once, and a parent's tombstone wipes its children in the child table).
STATE_TABLES: Final[tuple[Table[Any], ...]] = (
    OFFSETS,
    GROUPS,
    TOPICS,
    USER_CREDENTIALS,
    ACLS,
    CONSUMER_GROUPS,
    CONSUMER_MEMBERS,
    SHARE_GROUPS,
    SHARE_MEMBERS,
    SHARE_PARTITIONS,
    STREAMS_GROUPS,
    STREAMS_MEMBERS,
    GROUP_CONFIGS,
    CLUSTER,
    TXN_OFFSETS,
    SERVING_MODE,
)
# The tables whose rows belong to a group, hence to the group's shard (group configs too: the
# shard's owner serves and writes them). Every one's primary key starts with the group id.
GROUP_TABLES: Final[tuple[Table[Any], ...]] = (
    OFFSETS,
    GROUPS,
    CONSUMER_GROUPS,
    CONSUMER_MEMBERS,
    SHARE_GROUPS,
    SHARE_MEMBERS,
    SHARE_PARTITIONS,
    STREAMS_GROUPS,
    STREAMS_MEMBERS,
    GROUP_CONFIGS,
    TXN_OFFSETS,
)
# What a node needs before it serves anything: the state of no shard.
UNSHARDED_TABLES: Final[tuple[Table[Any], ...]] = tuple(t for t in STATE_TABLES if t not in GROUP_TABLES)
# The tables a served database has rows in (the admin tools only add credentials and ACLs).
SERVED_STATE_TABLES: Final[tuple[Table[Any], ...]] = (TOPICS, GROUPS, OFFSETS, CONSUMER_GROUPS)
BY_NAME: Final[Mapping[str, Table[Any]]] = {t.name: t for t in STATE_TABLES}
# The child tables of each table: a tombstone there deletes their rows too.
CHILDREN: Final[Mapping[str, tuple[Table[Any], ...]]] = {
    t.name: tuple(c for c in STATE_TABLES if c.parent == t.name) for t in STATE_TABLES
}

# The audit trail of offset commits: a generated sequence number, then the offsets columns;
# append-only (rows are inserted in commit order and pruned by commit_ms, never updated).
OFFSET_COMMIT_HISTORY: Final[Table[OffsetCommitRecord]] = Table(
    "offset_commit_history",
    (Column("seq", INT64, generated=True), *_OFFSET_COLUMNS),
    key=("seq",),
    to_row=_offset_row,
    from_row=OffsetCommitRecord,
    key_values=_same,
)


def _event_row(e: GroupEventRecord) -> Row:
    return (
        e.group_id,
        e.seq,
        e.time_ms,
        e.kind,
        e.protocol,
        e.state,
        e.generation,
        e.member_id,
        e.message,
        e.details,
    )


# Group events, when the server persists them: a generated row id, then the event; append-only,
# pruned by time_ms and by row count (storage/events.py), never updated.
GROUP_EVENTS: Final[Table[GroupEventRecord]] = Table(
    "group_events",
    (
        Column("row_id", INT64, generated=True),
        Column("group_id", TEXT),
        Column("seq", INT64),
        Column("time_ms", INT64),
        Column("kind", TEXT),
        Column("protocol", TEXT),
        Column("state", TEXT),
        Column("generation", INT32),
        Column("member_id", CLIENT_TEXT, nullable=True),
        Column("message", CLIENT_TEXT),
        Column("details", CLIENT_TEXT),
    ),
    key=("row_id",),
    to_row=_event_row,
    from_row=GroupEventRecord,
    key_values=_same,
)


def loaded_state(rows: Mapping[str, Sequence[Any]], offset_rows: bool = False) -> LoadedState:
    """The records of every state table, by table name, as ``Store.load`` returns them; with
    ``offset_rows`` the offsets table holds the rows as read, kept so (``StoredOffsets``)."""
    offsets = rows[OFFSETS.name]
    return LoadedState(
        topics=list(rows[TOPICS.name]),
        groups=list(rows[GROUPS.name]),
        offsets=StoredOffsets(offsets if isinstance(offsets, list) else list(offsets))
        if offset_rows
        else list(offsets),
        credentials=list(rows[USER_CREDENTIALS.name]),
        acls=list(rows[ACLS.name]),
        consumer_groups=list(rows[CONSUMER_GROUPS.name]),
        consumer_members=list(rows[CONSUMER_MEMBERS.name]),
        share_groups=list(rows[SHARE_GROUPS.name]),
        share_members=list(rows[SHARE_MEMBERS.name]),
        share_partitions=list(rows[SHARE_PARTITIONS.name]),
        streams_groups=list(rows[STREAMS_GROUPS.name]),
        streams_members=list(rows[STREAMS_MEMBERS.name]),
        group_configs=list(rows[GROUP_CONFIGS.name]),
        cluster=list(rows[CLUSTER.name]),
        txn_offsets=list(rows[TXN_OFFSETS.name]),
    )
