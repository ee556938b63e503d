"""PostgreSQL backend (asyncpg).

Writes go through one dedicated connection, serialised by a lock, so batches land in the
order they were issued. A batch is one transaction of bulk statements, each taking whole
columns as arrays (``unnest``): one round trip per table whatever the batch size. A batch that
needs a single statement is sent without BEGIN/COMMIT (a statement is its own transaction).

Failures never hang: every command is bounded by ``command_timeout``, connecting by
``connect_timeout``. A write that fails because the connection broke (server down,
restarted, timed out) drops the connection; the next write reconnects. A StoreError raised
while COMMIT was in flight means the outcome is unknown; the caller reloads to reconcile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Final, Literal

import asyncpg

from storage.base import StoreError
from storage.batch import BatchPlan, ConsumerPlan, plan_batch
from storage.codec import (
    CONSUMER_MEMBER_COLUMNS,
    CodecError,
    consumer_member_from_row,
    consumer_member_row,
    decode_configs,
    decode_members,
    encode_configs,
    encode_members,
)
from storage.records import (
    AclRecord,
    ConsumerGroupRecord,
    ConsumerMemberRecord,
    GroupMetadataRecord,
    LoadedState,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    TopicRecord,
    UserCredentialRecord,
)
from storage.redact import redact_url
from storage.schema import load_migrations

log = logging.getLogger(__name__)

SynchronousCommit = Literal["on", "off", "local", "remote_write", "remote_apply"]
_SYNCHRONOUS_COMMIT: Final = ("on", "off", "local", "remote_write", "remote_apply")

# Everything asyncpg and the socket layer raise for a failed command or connection.
# InternalClientError shows up when the server goes away mid-protocol ("cannot switch to
# state ..."), so it counts as a lost connection too.
_PG_ERRORS: Final = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    TimeoutError,
)
# Server-side errors after which the session is gone: reconnect on the next write.
_SESSION_LOST: Final = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, crash, query cancelled
)
_MIGRATION_LOCK: Final = 0x6B6763_0001  # pg_advisory_xact_lock key ("kgc" + 1)
_FETCH_ROWS: Final = 50_000

_UPSERT_OFFSETS: Final = """
INSERT INTO offsets AS o
    (group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, expire_ms)
SELECT * FROM unnest(
    $1::text[], $2::text[], $3::int4[], $4::int8[], $5::int4[], $6::bytea[], $7::int8[], $8::int8[])
ON CONFLICT (group_id, topic, partition) DO UPDATE SET
    committed_offset = EXCLUDED.committed_offset,
    leader_epoch = EXCLUDED.leader_epoch,
    metadata = EXCLUDED.metadata,
    commit_ms = EXCLUDED.commit_ms,
    expire_ms = EXCLUDED.expire_ms
"""
_DELETE_OFFSETS: Final = """
DELETE FROM offsets AS o
USING unnest($1::text[], $2::text[], $3::int4[]) AS d (group_id, topic, partition)
WHERE o.group_id = d.group_id AND o.topic = d.topic AND o.partition = d.partition
"""
_UPSERT_GROUPS: Final = """
INSERT INTO groups (group_id, protocol_type, generation_id, protocol_name, leader_id, state_ms, members)
SELECT * FROM unnest($1::text[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::int8[], $7::bytea[])
ON CONFLICT (group_id) DO UPDATE SET
    protocol_type = EXCLUDED.protocol_type,
    generation_id = EXCLUDED.generation_id,
    protocol_name = EXCLUDED.protocol_name,
    leader_id = EXCLUDED.leader_id,
    state_ms = EXCLUDED.state_ms,
    members = EXCLUDED.members
"""
_DELETE_GROUPS: Final = "DELETE FROM groups WHERE group_id = ANY($1::text[])"
_UPSERT_TOPICS: Final = """
INSERT INTO topics (name, topic_id, num_partitions, replication_factor, configs)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::int4[], $4::int4[], $5::text[])
ON CONFLICT (name) DO UPDATE SET
    topic_id = EXCLUDED.topic_id,
    num_partitions = EXCLUDED.num_partitions,
    replication_factor = EXCLUDED.replication_factor,
    configs = EXCLUDED.configs
"""
_DELETE_TOPICS: Final = "DELETE FROM topics WHERE name = ANY($1::text[])"
_UPSERT_CREDENTIALS: Final = """
INSERT INTO user_credentials (user_name, mechanism, salt, stored_key, server_key, iterations)
SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bytea[], $5::bytea[], $6::int4[])
ON CONFLICT (user_name, mechanism) DO UPDATE SET
    salt = EXCLUDED.salt,
    stored_key = EXCLUDED.stored_key,
    server_key = EXCLUDED.server_key,
    iterations = EXCLUDED.iterations
"""
_DELETE_CREDENTIALS: Final = """
DELETE FROM user_credentials AS c
USING unnest($1::text[], $2::text[]) AS d (user_name, mechanism)
WHERE c.user_name = d.user_name AND c.mechanism = d.mechanism
"""
_CREDENTIAL_COLUMNS: Final = "user_name, mechanism, salt, stored_key, server_key, iterations"
_ACL_COLUMNS: Final = "resource_type, resource_name, pattern_type, principal, host, operation, permission"
_INSERT_ACLS: Final = f"""
INSERT INTO acls ({_ACL_COLUMNS})
SELECT * FROM unnest($1::int4[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::int4[], $7::int4[])
ON CONFLICT DO NOTHING
"""
_DELETE_ACLS: Final = """
DELETE FROM acls AS a
USING unnest($1::int4[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::int4[], $7::int4[])
    AS d (resource_type, resource_name, pattern_type, principal, host, operation, permission)
WHERE a.resource_type = d.resource_type AND a.resource_name = d.resource_name
    AND a.pattern_type = d.pattern_type AND a.principal = d.principal AND a.host = d.host
    AND a.operation = d.operation AND a.permission = d.permission
"""
_UPSERT_CONSUMER_GROUPS: Final = """
INSERT INTO consumer_groups (group_id, group_epoch, assignment_epoch, state_ms)
SELECT * FROM unnest($1::text[], $2::int4[], $3::int4[], $4::int8[])
ON CONFLICT (group_id) DO UPDATE SET
    group_epoch = EXCLUDED.group_epoch,
    assignment_epoch = EXCLUDED.assignment_epoch,
    state_ms = EXCLUDED.state_ms
"""
_DELETE_CONSUMER_GROUPS: Final = "DELETE FROM consumer_groups WHERE group_id = ANY($1::text[])"
_UPSERT_CONSUMER_MEMBERS: Final = f"""
INSERT INTO consumer_members ({CONSUMER_MEMBER_COLUMNS})
SELECT * FROM unnest(
    $1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
    $9::int4[], $10::int4[], $11::int4[], $12::int4[], $13::bytea[])
ON CONFLICT (group_id, member_id) DO UPDATE SET
    instance_id = EXCLUDED.instance_id,
    rack_id = EXCLUDED.rack_id,
    client_id = EXCLUDED.client_id,
    client_host = EXCLUDED.client_host,
    subscribed_topic_regex = EXCLUDED.subscribed_topic_regex,
    server_assignor = EXCLUDED.server_assignor,
    rebalance_timeout_ms = EXCLUDED.rebalance_timeout_ms,
    member_epoch = EXCLUDED.member_epoch,
    previous_member_epoch = EXCLUDED.previous_member_epoch,
    state = EXCLUDED.state,
    topics = EXCLUDED.topics
"""
_DELETE_CONSUMER_MEMBERS: Final = """
DELETE FROM consumer_members AS m
USING unnest($1::text[], $2::text[]) AS d (group_id, member_id)
WHERE m.group_id = d.group_id AND m.member_id = d.member_id
"""
_WIPE_CONSUMER_MEMBERS: Final = "DELETE FROM consumer_members WHERE group_id = ANY($1::text[])"
_INSERT_HISTORY: Final = """
INSERT INTO offset_commit_history
    (group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, expire_ms)
SELECT g, t, p, o, e, m, c, x
FROM unnest($1::text[], $2::text[], $3::int4[], $4::int8[], $5::int4[], $6::bytea[], $7::int8[], $8::int8[])
    WITH ORDINALITY AS u (g, t, p, o, e, m, c, x, n)
ORDER BY n
"""
_PRUNE_HISTORY: Final = "DELETE FROM offset_commit_history WHERE commit_ms < $1"
_OFFSET_COLUMNS: Final = (
    "group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, expire_ms"
)

_Statement = tuple[str, tuple[Any, ...]]


class PostgresStore:
    def __init__(
        self,
        dsn: str,
        *,
        command_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        synchronous_commit: SynchronousCommit = "on",
        history_retention_ms: int | None = None,
        history_prune_interval_ms: int = 60_000,
    ) -> None:
        """``dsn``: ``postgresql://user:password@host:port/database`` (libpq-style options in the
        query string are passed to asyncpg).

        ``command_timeout``: seconds any single statement may take before the write fails with
        StoreError (and the connection is replaced). ``connect_timeout``: seconds to establish
        a connection. ``synchronous_commit``: the session's ``synchronous_commit`` — ``"on"``
        (default: COMMIT returns once the WAL is flushed locally, and on synchronous standbys
        if configured), ``"remote_write"``/``"remote_apply"`` (stronger replica guarantees),
        ``"local"`` (local flush only), ``"off"`` (COMMIT does not wait for the flush: a crash
        of PostgreSQL can lose the last ~wal_writer_delay of acknowledged commits; never
        corrupts). ``history_retention_ms``: when set, every offset commit is also appended to
        ``offset_commit_history`` and rows older than this (by ``commit_ms``) are pruned at most
        once per ``history_prune_interval_ms``.
        """
        if synchronous_commit not in _SYNCHRONOUS_COMMIT:
            raise ValueError(
                f"synchronous_commit must be one of {_SYNCHRONOUS_COMMIT}, not {synchronous_commit!r}"
            )
        if command_timeout <= 0 or connect_timeout <= 0:
            raise ValueError("command_timeout and connect_timeout must be positive")
        if history_retention_ms is not None and history_retention_ms <= 0:
            raise ValueError("history_retention_ms must be positive (or None to disable history)")
        self._dsn = dsn
        self.where = redact_url(dsn)
        self.command_timeout = command_timeout
        self.connect_timeout = connect_timeout
        self.synchronous_commit: SynchronousCommit = synchronous_commit
        self.history_retention_ms = history_retention_ms
        self.history_prune_interval_ms = history_prune_interval_ms
        self._conn: Any = None  # the write connection (asyncpg.Connection), None when dropped
        self._lock = asyncio.Lock()
        self._opened = False
        self._closed = False
        self._next_prune = 0.0

    # -- Store protocol ------------------------------------------------------------------

    async def open(self) -> None:
        if self._closed:
            raise StoreError("PostgresStore is closed")
        if self._opened:
            return
        async with self._lock:
            conn = await self._connect()
            try:
                await self._migrate(conn)
            except BaseException:
                await self._close_connection(conn)
                raise
            self._conn = conn
            self._opened = True

    async def load(self) -> LoadedState:
        self._check_open()
        # A connection of its own, so a long load does not sit on the write connection.
        conn = await self._connect()
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                topics = [
                    TopicRecord(r[0], r[1], r[2], r[3], decode_configs(r[4]))
                    for r in await conn.fetch(
                        "SELECT name, topic_id, num_partitions, replication_factor, configs FROM topics"
                    )
                ]
                groups = [
                    GroupMetadataRecord(r[0], r[1], r[2], r[3], r[4], r[5], _decode_members(r[0], r[6]))
                    for r in await conn.fetch(
                        "SELECT group_id, protocol_type, generation_id, protocol_name, leader_id, "
                        "state_ms, members FROM groups"
                    )
                ]
                offsets = await _fetch_offsets(conn, f"SELECT {_OFFSET_COLUMNS} FROM offsets")
                credentials = [
                    UserCredentialRecord(*r)
                    for r in await conn.fetch(f"SELECT {_CREDENTIAL_COLUMNS} FROM user_credentials")
                ]
                acls = [AclRecord(*r) for r in await conn.fetch(f"SELECT {_ACL_COLUMNS} FROM acls")]
                consumer_groups = [
                    ConsumerGroupRecord(*r)
                    for r in await conn.fetch(
                        "SELECT group_id, group_epoch, assignment_epoch, state_ms FROM consumer_groups"
                    )
                ]
                consumer_members: list[ConsumerMemberRecord] = []
                cursor = await conn.cursor(f"SELECT {CONSUMER_MEMBER_COLUMNS} FROM consumer_members")
                while rows := await cursor.fetch(_FETCH_ROWS):
                    consumer_members.extend(map(consumer_member_from_row, rows))
        except _PG_ERRORS as exc:
            raise StoreError(f"cannot load from PostgreSQL {self.where}: {exc!r}") from exc
        except (CodecError, UnicodeDecodeError) as exc:
            raise StoreError(f"corrupt row in PostgreSQL {self.where}: {exc}") from exc
        finally:
            await self._close_connection(conn)
        return LoadedState(
            topics=topics,
            groups=groups,
            offsets=offsets,
            credentials=credentials,
            acls=acls,
            consumer_groups=consumer_groups,
            consumer_members=consumer_members,
        )

    async def load_credentials(self, user: str | None = None) -> list[UserCredentialRecord]:
        self._check_open()
        conn = await self._connect()
        try:
            query = f"SELECT {_CREDENTIAL_COLUMNS} FROM user_credentials"
            rows = await (
                conn.fetch(query) if user is None else conn.fetch(query + " WHERE user_name = $1", user)
            )
        except _PG_ERRORS as exc:
            raise StoreError(f"cannot read credentials from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)
        return [UserCredentialRecord(*r) for r in rows]

    async def write(self, records: Sequence[Record]) -> None:
        self._check_open()
        if not records:
            return
        try:
            statements = self._statements(plan_batch(records))
        except CodecError as exc:
            raise StoreError(f"cannot encode batch: {exc}") from exc
        async with self._lock:
            self._check_open()
            conn = await self._write_connection()
            try:
                if len(statements) == 1:
                    sql, args = statements[0]
                    await conn.execute(sql, *args)
                else:
                    await conn.execute("BEGIN")
                    for sql, args in statements:
                        await conn.execute(sql, *args)
                    await conn.execute("COMMIT")
            except Exception as exc:  # only asyncpg and socket calls in the try block
                await self._recover(conn, exc)
                raise StoreError(f"PostgreSQL write of {len(records)} records failed: {exc!r}") from exc
            except BaseException:  # cancelled mid-transaction: the session state is unknown
                self._drop(conn)
                raise

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        async with self._lock:  # a write in flight finishes first (bounded by the timeouts)
            conn, self._conn = self._conn, None
            if conn is not None:
                await self._close_connection(conn)

    async def commit_history(self, group_id: str) -> list[OffsetCommitRecord]:
        """Every recorded commit of a group, oldest first (empty when history is off)."""
        self._check_open()
        conn = await self._connect()
        try:
            async with conn.transaction(readonly=True):
                return await _fetch_offsets(
                    conn,
                    f"SELECT {_OFFSET_COLUMNS} FROM offset_commit_history WHERE group_id = $1 ORDER BY seq",
                    group_id,
                )
        except _PG_ERRORS as exc:
            raise StoreError(f"cannot read commit history from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)

    # -- internals -----------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("PostgresStore is closed")
        if not self._opened:
            raise StoreError("PostgresStore is not open")

    async def _connect(self) -> Any:
        try:
            return await asyncpg.connect(
                self._dsn,
                timeout=self.connect_timeout,
                command_timeout=self.command_timeout,
                server_settings={
                    "synchronous_commit": self.synchronous_commit,
                    "application_name": "kafka-group-coordinator",
                },
            )
        except _PG_ERRORS as exc:
            raise StoreError(f"cannot connect to PostgreSQL {self.where}: {exc!r}") from exc

    async def _write_connection(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.is_closed():
            return conn
        self._conn = None
        if conn is not None:
            conn.terminate()
        conn = await self._connect()
        self._conn = conn
        log.info("connected to PostgreSQL %s", self.where)
        return conn

    async def _recover(self, conn: Any, exc: Exception) -> None:
        """After a failed write: roll back if the server rejected the batch on a healthy
        session (constraint, bad value); drop the connection on anything else."""
        healthy = isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, _SESSION_LOST)
        if not healthy or conn.is_closed():
            log.warning("PostgreSQL connection %s lost (%r); reconnecting on the next write", self.where, exc)
            self._drop(conn)
            return
        if conn.is_in_transaction():
            try:
                await conn.execute("ROLLBACK")
            except _PG_ERRORS as rollback_exc:
                log.warning("PostgreSQL rollback failed (%r); dropping the connection", rollback_exc)
                self._drop(conn)

    def _drop(self, conn: Any) -> None:
        # terminate() closes the socket at once; the server rolls back any open transaction.
        conn.terminate()
        if self._conn is conn:
            self._conn = None

    async def _close_connection(self, conn: Any) -> None:
        try:
            await conn.close(timeout=self.command_timeout)
        except _PG_ERRORS:
            conn.terminate()
        except BaseException:
            conn.terminate()
            raise

    async def _migrate(self, conn: Any) -> None:
        migrations = load_migrations("postgres")
        try:
            async with conn.transaction():
                # Serialises concurrent openers; released at COMMIT.
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version "
                    "(version integer PRIMARY KEY, name text NOT NULL, applied_ms bigint NOT NULL)"
                )
                current = await conn.fetchval("SELECT coalesce(max(version), 0) FROM schema_version")
                if current > len(migrations):
                    raise StoreError(
                        f"PostgreSQL {self.where} has schema version {current}, newer than this code "
                        f"(knows up to {len(migrations)}); refusing to use it"
                    )
                for migration in migrations[current:]:
                    await conn.execute(migration.sql, timeout=max(self.command_timeout, 60.0))
                    await conn.execute(
                        "INSERT INTO schema_version (version, name, applied_ms) VALUES ($1, $2, $3)",
                        migration.version,
                        migration.name,
                        int(time.time() * 1000),
                    )
                    log.info(
                        "applied PostgreSQL migration %03d_%s to %s",
                        migration.version,
                        migration.name,
                        self.where,
                    )
        except _PG_ERRORS as exc:
            raise StoreError(f"cannot migrate PostgreSQL schema at {self.where}: {exc!r}") from exc

    def _statements(self, plan: BatchPlan) -> list[_Statement]:
        statements: list[_Statement] = []
        if plan.offset_deletes:
            g, t, p = zip(*plan.offset_deletes, strict=True)
            statements.append((_DELETE_OFFSETS, (g, t, p)))
        if plan.group_deletes:
            statements.append((_DELETE_GROUPS, (plan.group_deletes,)))
        if plan.topic_deletes:
            statements.append((_DELETE_TOPICS, (plan.topic_deletes,)))
        if plan.topic_upserts:
            ts = plan.topic_upserts
            statements.append(
                (
                    _UPSERT_TOPICS,
                    (
                        [t.name for t in ts],
                        [t.topic_id for t in ts],
                        [t.num_partitions for t in ts],
                        [t.replication_factor for t in ts],
                        [encode_configs(t.configs) for t in ts],
                    ),
                )
            )
        if plan.group_upserts:
            gs = plan.group_upserts
            statements.append(
                (
                    _UPSERT_GROUPS,
                    (
                        [g.group_id for g in gs],
                        [g.protocol_type for g in gs],
                        [g.generation_id for g in gs],
                        [g.protocol_name for g in gs],
                        [g.leader_id for g in gs],
                        [g.state_ms for g in gs],
                        [encode_members(g.members) for g in gs],
                    ),
                )
            )
        if plan.offset_upserts:
            statements.append((_UPSERT_OFFSETS, _offset_columns(plan.offset_upserts)))
        if plan.credential_deletes:
            users, mechanisms = zip(*plan.credential_deletes, strict=True)
            statements.append((_DELETE_CREDENTIALS, (list(users), list(mechanisms))))
        if plan.acl_deletes:
            statements.append((_DELETE_ACLS, _acl_columns(plan.acl_deletes)))
        if plan.acl_upserts:
            statements.append((_INSERT_ACLS, _acl_columns(plan.acl_upserts)))
        if plan.credential_upserts:
            cs = plan.credential_upserts
            statements.append(
                (
                    _UPSERT_CREDENTIALS,
                    (
                        [c.user for c in cs],
                        [c.mechanism for c in cs],
                        [c.salt for c in cs],
                        [c.stored_key for c in cs],
                        [c.server_key for c in cs],
                        [c.iterations for c in cs],
                    ),
                )
            )
        if plan.consumer is not None:
            _consumer_statements(plan.consumer, statements)
        if self.history_retention_ms is not None:
            if plan.commits:
                statements.append((_INSERT_HISTORY, _offset_columns(plan.commits)))
            now = time.monotonic()
            if now >= self._next_prune:
                self._next_prune = now + self.history_prune_interval_ms / 1000
                cutoff = int(time.time() * 1000) - self.history_retention_ms
                statements.append((_PRUNE_HISTORY, (cutoff,)))
        return statements


def _consumer_statements(plan: ConsumerPlan, statements: list[_Statement]) -> None:
    # The group-wide member deletes first: member records kept by plan_batch follow the wipe.
    if plan.member_wipes:
        statements.append((_WIPE_CONSUMER_MEMBERS, (plan.member_wipes,)))
    if plan.member_deletes:
        groups, members = zip(*plan.member_deletes, strict=True)
        statements.append((_DELETE_CONSUMER_MEMBERS, (list(groups), list(members))))
    if plan.member_upserts:
        rows = [consumer_member_row(m) for m in plan.member_upserts]
        statements.append((_UPSERT_CONSUMER_MEMBERS, tuple(map(list, zip(*rows, strict=True)))))
    if plan.group_deletes:
        statements.append((_DELETE_CONSUMER_GROUPS, (plan.group_deletes,)))
    if plan.group_upserts:
        gs = plan.group_upserts
        statements.append(
            (
                _UPSERT_CONSUMER_GROUPS,
                (
                    [g.group_id for g in gs],
                    [g.group_epoch for g in gs],
                    [g.assignment_epoch for g in gs],
                    [g.state_ms for g in gs],
                ),
            )
        )


def _acl_columns(acls: list[AclRecord]) -> tuple[list[Any], ...]:
    return (
        [a.resource_type for a in acls],
        [a.resource_name for a in acls],
        [a.pattern_type for a in acls],
        [a.principal for a in acls],
        [a.host for a in acls],
        [a.operation for a in acls],
        [a.permission for a in acls],
    )


def _offset_columns(rs: list[OffsetCommitRecord]) -> tuple[list[Any], ...]:
    return (
        [r.group_id for r in rs],
        [r.topic for r in rs],
        [r.partition for r in rs],
        [r.offset for r in rs],
        [r.leader_epoch for r in rs],
        [r.metadata.encode() for r in rs],
        [r.commit_ms for r in rs],
        [r.expire_ms for r in rs],
    )


async def _fetch_offsets(conn: Any, query: str, *args: Any) -> list[OffsetCommitRecord]:
    offsets: list[OffsetCommitRecord] = []
    append = offsets.append
    # A cursor keeps the client's memory bounded to one chunk of asyncpg Records; it needs
    # the caller's transaction.
    cursor = await conn.cursor(query, *args)
    while rows := await cursor.fetch(_FETCH_ROWS):
        for group_id, topic, partition, offset, leader_epoch, metadata, commit_ms, expire_ms in rows:
            append(
                OffsetCommitRecord(
                    group_id,
                    topic,
                    partition,
                    offset,
                    leader_epoch,
                    metadata.decode(),
                    commit_ms,
                    expire_ms,
                )
            )
    return offsets


def _decode_members(group_id: str, blob: bytes) -> tuple[MemberRecord, ...]:
    try:
        return decode_members(blob)
    except CodecError as exc:
        raise CodecError(f"group {group_id!r}: {exc}") from exc
