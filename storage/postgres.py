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
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final, Literal

import asyncpg

from storage.base import StoreError
from storage.batch import BatchPlan, plan_batch
from storage.codec import CodecError
from storage.events import POSTGRES_LOAD, POSTGRES_PRUNE_EXCESS, POSTGRES_PRUNE_OLD
from storage.ownership import ACLS_COUNTER, BUMP_COUNTER, FENCE_CHECK, Fence, LeaseTable, ShardFenced
from storage.pg_errors import PG_ERRORS
from storage.records import (
    GroupEventRecord,
    LoadedState,
    OffsetCommitRecord,
    Record,
    StoredIdentity,
    UserCredentialRecord,
)
from storage.redact import redact_url
from storage.schema import load_migrations
from storage.sql import postgres_columns, postgres_key_columns, postgres_reader, postgres_sql
from storage.tables import (
    ACLS,
    CLUSTER,
    GROUP_EVENTS,
    GROUP_TABLES,
    OFFSET_COMMIT_HISTORY,
    OFFSETS,
    SERVED_STATE_TABLES,
    SERVING_MODE,
    STATE_TABLES,
    TOPICS,
    UNSHARDED_TABLES,
    USER_CREDENTIALS,
    Table,
    loaded_state,
)

log = logging.getLogger(__name__)

SynchronousCommit = Literal["on", "off", "local", "remote_write", "remote_apply"]
_SYNCHRONOUS_COMMIT: Final = ("on", "off", "local", "remote_write", "remote_apply")

# Server-side errors after which the session is gone: reconnect on the next write.
_SESSION_LOST: Final = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, crash, query cancelled
)
_MIGRATION_LOCK: Final = 0x6B6763_0001  # pg_advisory_xact_lock key ("kgc" + 1)
_FETCH_ROWS: Final = 50_000

_PRUNE_HISTORY: Final = "DELETE FROM offset_commit_history WHERE commit_ms < $1"
_DELETE_TOPIC_OFFSETS: Final = "DELETE FROM offsets WHERE topic = ANY($1::text[])"

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
        # Several nodes (docs/multinode.md): writes of group records check the leases.
        self.fence: Fence | None = None
        self._transaction_idle_timeout_ms: int | None = None
        # Several nodes: a topic's tombstone also deletes its offsets in every group (off with
        # offsets.retain.on.topic.deletion).
        self.delete_offsets_with_topics = True
        self._schema_version_at_open = 0

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
                rows = {
                    table.name: await _fetch(conn, table, postgres_sql(table).select)
                    for table in STATE_TABLES
                }
        except PG_ERRORS as exc:
            raise StoreError(f"cannot load from PostgreSQL {self.where}: {exc!r}") from exc
        except (CodecError, UnicodeDecodeError) as exc:
            raise StoreError(f"corrupt row in PostgreSQL {self.where}: {exc}") from exc
        finally:
            await self._close_connection(conn)
        return loaded_state(rows, offset_rows=True)

    async def load_unsharded(self) -> LoadedState:
        """Topics, credentials, ACLs and the cluster id (the group lists are empty)."""
        return await self._load_tables(UNSHARDED_TABLES, None)

    async def group_ids(self) -> list[str]:
        """Every group id with a row in any group table (one snapshot)."""
        self._check_open()
        conn = await self._connect()
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                ids: set[str] = set()
                for table in GROUP_TABLES:
                    ids.update(r[0] for r in await conn.fetch(f"SELECT DISTINCT group_id FROM {table.name}"))
        except PG_ERRORS as exc:
            raise StoreError(f"cannot read group ids from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)
        return list(ids)

    async def load_groups(self, group_ids: Collection[str]) -> LoadedState:
        """The rows of exactly these groups in every group table, one snapshot (the other lists
        are empty)."""
        return await self._load_tables(GROUP_TABLES, list(group_ids))

    async def _load_tables(self, tables: tuple[Table[Any], ...], group_ids: list[str] | None) -> LoadedState:
        self._check_open()
        conn = await self._connect()
        rows: dict[str, list[Any]] = {table.name: [] for table in STATE_TABLES}
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                for table in tables:
                    if group_ids is None:
                        rows[table.name] = await _fetch(conn, table, postgres_sql(table).select)
                    else:
                        query = postgres_sql(table).select + " WHERE group_id = ANY($1::text[])"
                        rows[table.name] = await _fetch(conn, table, query, group_ids)
        except PG_ERRORS as exc:
            raise StoreError(f"cannot load from PostgreSQL {self.where}: {exc!r}") from exc
        except (CodecError, UnicodeDecodeError) as exc:
            raise StoreError(f"corrupt row in PostgreSQL {self.where}: {exc}") from exc
        finally:
            await self._close_connection(conn)
        return loaded_state(rows, offset_rows=True)

    async def load_identity(self) -> StoredIdentity:
        self._check_open()
        conn = await self._connect()
        try:
            async with conn.transaction(readonly=True):
                cluster = await _fetch(conn, CLUSTER, postgres_sql(CLUSTER).select)
                serving_mode = await _fetch(conn, SERVING_MODE, postgres_sql(SERVING_MODE).select)
                has_state = False
                for table in SERVED_STATE_TABLES:
                    has_state = has_state or await conn.fetchval(
                        f"SELECT EXISTS (SELECT 1 FROM {table.name})"
                    )
        except PG_ERRORS as exc:
            raise StoreError(f"cannot read the cluster id from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)
        # No schema before this open: a brand-new database (a dropped schema looks the same).
        created = self._schema_version_at_open == 0
        return StoredIdentity(cluster, created, self._schema_version_at_open, bool(has_state), serving_mode)

    async def load_credentials(self, user: str | None = None) -> list[UserCredentialRecord]:
        self._check_open()
        conn = await self._connect()
        try:
            query = postgres_sql(USER_CREDENTIALS).select
            rows = await (
                conn.fetch(query) if user is None else conn.fetch(query + " WHERE user_name = $1", user)
            )
        except PG_ERRORS as exc:
            raise StoreError(f"cannot read credentials from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)
        return list(map(postgres_reader(USER_CREDENTIALS), rows))

    async def write(self, records: Sequence[Record]) -> None:
        self._check_open()
        if not records:
            return
        try:
            statements = self._statements(plan_batch(records))
        except CodecError as exc:
            raise StoreError(f"cannot encode batch: {exc}") from exc
        fenced = self._fenced_epochs(records)
        async with self._lock:
            self._check_open()
            conn = await self._write_connection()
            try:
                if len(statements) == 1 and fenced is None:
                    sql, args = statements[0]
                    await conn.execute(sql, *args)
                else:
                    await conn.execute("BEGIN")
                    if self.fence is not None and fenced is not None:
                        await _check_fence(conn, self.fence, fenced)
                    for sql, args in statements:
                        await conn.execute(sql, *args)
                    await conn.execute("COMMIT")
            except ShardFenced:
                try:
                    await conn.execute("ROLLBACK")
                except PG_ERRORS:
                    self._drop(conn)
                raise
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
                query = postgres_sql(OFFSET_COMMIT_HISTORY).select + " WHERE group_id = $1 ORDER BY seq"
                history: list[OffsetCommitRecord] = await _fetch(conn, OFFSET_COMMIT_HISTORY, query, group_id)
                return history
        except PG_ERRORS as exc:
            raise StoreError(f"cannot read commit history from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)

    async def append_events(self, events: Sequence[GroupEventRecord]) -> None:
        """Append group events (one statement, one transaction), in the order given."""
        if events:
            rows = list(map(GROUP_EVENTS.to_row, events))
            columns = postgres_columns(GROUP_EVENTS.written, rows)
            await self._on_own_connection(
                "write group events to",
                lambda conn: conn.execute(postgres_sql(GROUP_EVENTS).insert, *columns),
            )

    async def load_events(self, per_group: int, since_ms: int = 0) -> list[GroupEventRecord]:
        """The newest ``per_group`` events of every group since ``since_ms``, oldest first."""
        self._check_open()
        conn = await self._connect()
        try:
            async with conn.transaction(readonly=True):
                events: list[GroupEventRecord] = await _fetch(
                    conn, GROUP_EVENTS, POSTGRES_LOAD, since_ms, per_group
                )
                return events
        except PG_ERRORS as exc:
            raise StoreError(f"cannot read group events from PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)

    async def prune_events(self, before_ms: int, keep_rows: int) -> None:
        """Delete events older than ``before_ms``, then all but the newest ``keep_rows``."""

        async def prune(conn: Any) -> None:
            await conn.execute(POSTGRES_PRUNE_OLD, before_ms)
            await conn.execute(POSTGRES_PRUNE_EXCESS, keep_rows)

        await self._on_own_connection("prune group events in", prune)

    async def _on_own_connection(self, what: str, work: Callable[[Any], Awaitable[Any]]) -> None:
        """Group events go through a connection of their own: never in the way of state writes."""
        self._check_open()
        conn = await self._connect()
        try:
            async with conn.transaction():
                await work(conn)
        except PG_ERRORS as exc:
            raise StoreError(f"cannot {what} PostgreSQL {self.where}: {exc!r}") from exc
        finally:
            await self._close_connection(conn)

    # -- internals -----------------------------------------------------------------------

    def _fenced_epochs(self, records: Sequence[Record]) -> dict[int, int] | None:
        """The lease epochs a batch must still hold (None: no group records or no fence)."""
        fence = self.fence
        if fence is None:
            return None
        shards = fence.shards_of(records)
        if not shards:
            return None
        missing = shards - fence.epochs.keys()
        if missing:
            raise ShardFenced(missing, f"shards {sorted(missing)} are not owned by node {fence.node_id}")
        return {shard: fence.epochs[shard] for shard in shards}

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("PostgresStore is closed")
        if not self._opened:
            raise StoreError("PostgresStore is not open")

    def lease_table(self, node_id: int, shards: int, lease_ms: int) -> LeaseTable:
        """The ownership statements of a node, on a connection of their own (docs/multinode.md)."""
        return LeaseTable(self._connect, node_id, shards, lease_ms, self.where)

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
        except PG_ERRORS as exc:
            raise StoreError(f"cannot connect to PostgreSQL {self.where}: {exc!r}") from exc

    def use_fence(self, fence: Fence, transaction_idle_timeout_ms: int) -> None:
        """Check ``fence`` in every write of group records (docs/multinode.md#leases-locks-and-fencing).

        A write transaction holds its lease rows FOR SHARE, so a takeover waits for it. The
        server ends a write session idle inside a transaction for ``transaction_idle_timeout_ms``
        (its process paused mid-transaction): its locks go and nothing of it lands, so a paused
        node cannot hold a takeover up for longer than that."""
        self.fence = fence
        self._transaction_idle_timeout_ms = transaction_idle_timeout_ms
        conn, self._conn = self._conn, None
        if conn is not None:  # reconnect with the setting at the next write
            conn.terminate()

    async def _write_connection(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.is_closed():
            return conn
        self._conn = None
        if conn is not None:
            conn.terminate()
        conn = await self._connect()
        if self._transaction_idle_timeout_ms is not None:
            try:
                await conn.execute(
                    f"SET idle_in_transaction_session_timeout = {int(self._transaction_idle_timeout_ms)}"
                )
            except PG_ERRORS as exc:
                conn.terminate()
                raise StoreError(
                    f"cannot set up the write session on PostgreSQL {self.where}: {exc!r}"
                ) from exc
            except BaseException:
                conn.terminate()
                raise
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
            except PG_ERRORS as rollback_exc:
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
        except PG_ERRORS:
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
                self._schema_version_at_open = int(current)
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
        except PG_ERRORS as exc:
            raise StoreError(f"cannot migrate PostgreSQL schema at {self.where}: {exc!r}") from exc

    def _statements(self, plan: BatchPlan) -> list[_Statement]:
        statements: list[_Statement] = []
        for changes in plan.tables:
            table = changes.table
            sql = postgres_sql(table)
            # The parent-wide deletes first: child records kept by plan_batch follow them.
            if changes.wipes:
                statements.append((sql.wipe, (changes.wipes,)))
            if changes.deletes:
                statements.append((sql.delete, postgres_key_columns(table, changes.deletes)))
            if changes.upserts:
                rows = list(map(table.to_row, changes.upserts))
                statements.append((sql.upsert, postgres_columns(table.written, rows)))
        if self.fence is not None:  # several nodes share the database (docs/multinode.md)
            topics = plan.changes(TOPICS)
            if topics is not None and topics.deletes and self.delete_offsets_with_topics:
                # A deleted topic's offsets go in every group, those of shards other nodes
                # hold (or none does) too.
                statements.append((_DELETE_TOPIC_OFFSETS, (list(topics.deletes),)))
            if plan.changes(ACLS) is not None:  # the others' polls see the counter move
                statements.append((BUMP_COUNTER, (ACLS_COUNTER,)))
        if self.history_retention_ms is not None:
            if plan.commits:
                rows = list(map(OFFSETS.to_row, plan.commits))
                history = postgres_sql(OFFSET_COMMIT_HISTORY).insert
                statements.append((history, postgres_columns(OFFSET_COMMIT_HISTORY.written, rows)))
            now = time.monotonic()
            if now >= self._next_prune:
                self._next_prune = now + self.history_prune_interval_ms / 1000
                cutoff = int(time.time() * 1000) - self.history_retention_ms
                statements.append((_PRUNE_HISTORY, (cutoff,)))
        return statements


async def _fetch(conn: Any, table: Table[Any], query: str, *args: Any) -> list[Any]:
    records: list[Any] = []
    # Offsets are kept as rows: the core loads them straight into its columns
    # (docs/performance.md#offsets-in-parallel-arrays).
    read = postgres_reader(table, keep_rows=table is OFFSETS)
    # A cursor keeps the client's memory bounded to one chunk of asyncpg Records; it needs
    # the caller's transaction.
    cursor = await conn.cursor(query, *args)
    while rows := await cursor.fetch(_FETCH_ROWS):
        records.extend(map(read, rows))
    return records


async def _check_fence(conn: Any, fence: Fence, epochs: dict[int, int]) -> None:
    """In the write's transaction: every written shard's lease is still ours, at our epoch."""
    shards = list(epochs)
    rows = await conn.fetch(FENCE_CHECK, fence.node_id, shards, [epochs[s] for s in shards])
    lost = epochs.keys() - {row["shard"] for row in rows}
    if lost:
        raise ShardFenced(lost, f"node {fence.node_id} no longer holds the lease of shards {sorted(lost)}")
