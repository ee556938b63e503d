"""SQLite backend: one connection owned by one dedicated thread.

Every database call (open, migrations, load, write, close) is a job on a single-worker
``ThreadPoolExecutor``: the connection never crosses threads, jobs run in submission order, and
the event loop only awaits a future while ``sqlite3`` (which releases the GIL inside SQLite)
does the I/O and the fsync. One ``write()`` is one ``BEGIN IMMEDIATE ... COMMIT``.

Durability: WAL journal; ``synchronous=FULL`` fsyncs the WAL on every commit, ``NORMAL`` only
at checkpoints (a power loss may drop the last commits, the database stays consistent).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from storage.base import StoreError
from storage.batch import BatchPlan, plan_batch
from storage.codec import CodecError
from storage.events import SQLITE_LOAD, SQLITE_PRUNE_EXCESS, SQLITE_PRUNE_OLD
from storage.process_lock import ProcessLock, lock_database
from storage.records import (
    GroupEventRecord,
    LoadedState,
    OffsetCommitRecord,
    Record,
    StoredIdentity,
    UserCredentialRecord,
)
from storage.schema import load_migrations, split_sqlite_script
from storage.sql import sqlite_sql
from storage.tables import (
    CLUSTER,
    GROUP_EVENTS,
    GROUP_TABLES,
    OFFSET_COMMIT_HISTORY,
    OFFSETS,
    SERVED_STATE_TABLES,
    SERVING_MODE,
    STATE_TABLES,
    UNSHARDED_TABLES,
    USER_CREDENTIALS,
    Table,
    loaded_state,
)

log = logging.getLogger(__name__)

Synchronous = Literal["FULL", "NORMAL"]
_T = TypeVar("_T")

_FETCH_ROWS: Final = 50_000

_PRUNE_HISTORY: Final = "DELETE FROM offset_commit_history WHERE commit_ms < ?"
# The rows of a list of groups (a JSON array): index look-ups on the primary key's first column.
_OF_GROUPS: Final = " WHERE group_id IN (SELECT value FROM json_each(?))"

# Errors that mean "this batch cannot be stored": sqlite3's own (I/O, disk full, locked,
# constraint) and the binding errors for values SQLite cannot represent (ints beyond 64 bits).
_WRITE_ERRORS: Final = (sqlite3.Error, OverflowError, CodecError, UnicodeEncodeError)


class SQLiteStore:
    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout_ms: int = 5000,
        history_retention_ms: int | None = None,
        history_prune_interval_ms: int = 60_000,
        exclusive: bool = False,
    ) -> None:
        """``path``: database file (created if missing; its directory must exist).

        ``synchronous``: ``"FULL"`` (every commit fsynced) or ``"NORMAL"`` (fsync at WAL
        checkpoints only). ``busy_timeout_ms``: how long a write waits for a lock held by
        another connection before failing with StoreError. ``history_retention_ms``: when set,
        every offset commit is also appended to ``offset_commit_history`` and rows older than
        this (by ``commit_ms``) are pruned, at most once per ``history_prune_interval_ms``.
        ``exclusive``: hold ``<path>.lock`` while open, so that no second process opens the file
        with ``exclusive`` (the server does; CLI tools that edit the file beside it do not).
        """
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be 'FULL' or 'NORMAL', not {synchronous!r}")
        if history_retention_ms is not None and history_retention_ms <= 0:
            raise ValueError("history_retention_ms must be positive (or None to disable history)")
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError(f"SQLiteStore needs a database file path, not {str(path)!r}")
        self.path = Path(path)
        self.synchronous: Synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self.history_retention_ms = history_retention_ms
        self.history_prune_interval_ms = history_prune_interval_ms
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None  # touched only on the executor thread
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file we opened
        self._created = False  # the file did not exist: this open created it
        self._schema_version_at_open = 0
        self._closed = False
        self._next_prune = 0.0
        self.exclusive = exclusive
        self._process_lock: ProcessLock | None = None
        # Groups loaded after serving started read through a connection and thread of their
        # own, so that the writes of groups already served never queue behind a shard's read.
        self._reader: ThreadPoolExecutor | None = None
        self._reader_conn: sqlite3.Connection | None = None  # touched only on the reader thread

    # -- Store protocol ------------------------------------------------------------------

    async def open(self) -> None:
        if self._closed:
            raise StoreError("SQLiteStore is closed")
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        try:
            await self._run(self._open_sync)
        except BaseException:
            await self._shutdown()
            raise

    async def load(self) -> LoadedState:
        return await self._run(self._load_sync, STATE_TABLES, None)

    async def load_unsharded(self) -> LoadedState:
        """Topics, credentials, ACLs and the cluster id: what the server needs before it serves
        (the group lists are empty)."""
        return await self._run(self._load_sync, UNSHARDED_TABLES, None)

    async def group_ids(self) -> list[str]:
        """Every group id with a row in any group table (one read snapshot)."""
        return await self._read(self._group_ids_sync)

    async def load_groups(self, group_ids: Collection[str]) -> LoadedState:
        """The rows of exactly these groups in every group table, read in one snapshot
        (docs/performance.md#loading-in-the-background); the other lists are empty."""
        return await self._read(self._load_sync, GROUP_TABLES, list(group_ids))

    async def write(self, records: Sequence[Record]) -> None:
        if not records:
            self._check_open()
            return
        await self._run(self._write_sync, records)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._shutdown()

    async def commit_history(self, group_id: str) -> list[OffsetCommitRecord]:
        """Every recorded commit of a group, oldest first (empty when history is off)."""
        return await self._run(self._history_sync, group_id)

    async def append_events(self, events: Sequence[GroupEventRecord]) -> None:
        """Append group events (one transaction), in the order given."""
        if events:
            await self._run(self._append_events_sync, events)

    async def load_events(self, per_group: int, since_ms: int = 0) -> list[GroupEventRecord]:
        """The newest ``per_group`` events of every group since ``since_ms``, oldest first."""
        return await self._run(self._load_events_sync, per_group, since_ms)

    async def prune_events(self, before_ms: int, keep_rows: int) -> None:
        """Delete events older than ``before_ms``, then all but the newest ``keep_rows``."""
        await self._run(self._prune_events_sync, before_ms, keep_rows)

    # -- event-loop side -----------------------------------------------------------------

    def _check_open(self) -> ThreadPoolExecutor:
        if self._closed:
            raise StoreError("SQLiteStore is closed")
        if self._executor is None:
            raise StoreError("SQLiteStore is not open")
        return self._executor

    async def _run(self, fn: Callable[..., _T], *args: object) -> _T:
        executor = self._check_open()
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    async def _read(self, fn: Callable[..., _T], *args: object) -> _T:
        self._check_open()
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-reader")
        return await asyncio.get_running_loop().run_in_executor(self._reader, fn, *args)

    async def _shutdown(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await asyncio.get_running_loop().run_in_executor(reader, self._close_reader_sync)
            reader.shutdown(wait=True)
        executor, self._executor = self._executor, None
        if executor is None:
            return
        # Queued behind any write still in flight, so close() lets it finish first.
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_sync)
        finally:
            executor.shutdown(wait=True)

    # -- executor thread -----------------------------------------------------------------

    def _open_sync(self) -> None:
        if self.exclusive:
            self._process_lock = lock_database(self.path)
        try:
            self._created = _create_private(self.path)
            # isolation_level=None: no implicit transactions, we issue BEGIN/COMMIT ourselves.
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._conn = conn
        try:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if str(mode).lower() != "wal":
                raise StoreError(f"SQLite refused WAL mode for {self.path} (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._migrate(conn)
            _probe_write(conn)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot prepare SQLite database {self.path}: {exc}") from exc
        self._identity = _identity(self.path)

    def _check_identity(self) -> None:
        """The file we opened is still the one at our path (not deleted, moved or replaced)."""
        try:
            current: tuple[int, int] | None = _identity(self.path)
        except OSError:
            current = None
        if current != self._identity:
            raise StoreError(
                f"SQLite database {self.path} was deleted or replaced while the server was running; "
                "refusing to write to a file that the next start would not read (restart the server)"
            )

    def _migrate(self, conn: sqlite3.Connection) -> None:
        migrations = load_migrations("sqlite")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
        )
        for migration in migrations:
            # BEGIN IMMEDIATE takes the write lock before reading the version, so two
            # processes opening the same file cannot both apply a migration.
            conn.execute("BEGIN IMMEDIATE")
            try:
                (current,) = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
                if migration.version == 1:
                    self._schema_version_at_open = int(current)
                if current > len(migrations):
                    raise StoreError(
                        f"{self.path} has schema version {current}, newer than this code "
                        f"(knows up to {len(migrations)}); refusing to open it"
                    )
                if migration.version <= current:
                    conn.execute("ROLLBACK")
                    continue
                for statement in split_sqlite_script(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)",
                    (migration.version, migration.name, int(time.time() * 1000)),
                )
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
            log.info("applied SQLite migration %03d_%s to %s", migration.version, migration.name, self.path)

    def _load_sync(self, tables: tuple[Table[Any], ...], group_ids: list[str] | None) -> LoadedState:
        """The rows of ``tables`` in one read snapshot: all of them, or those of ``group_ids``
        (group tables, whose primary key starts with the group id). On the reader thread when
        ``group_ids`` is given."""
        conn = self._connection() if group_ids is None else self._reader_connection()
        rows: dict[str, list[Any]] = {table.name: [] for table in STATE_TABLES}
        ids = (json.dumps(group_ids),) if group_ids is not None else ()  # once for every table
        try:
            conn.execute("BEGIN")  # one read snapshot for all tables
            try:
                for table in tables:
                    records = rows[table.name]
                    if group_ids is None:
                        cursor = conn.execute(sqlite_sql(table).select)
                    else:
                        query = sqlite_sql(table).select + _OF_GROUPS
                        cursor = conn.execute(query, ids)
                    if table is OFFSETS:
                        # Kept as rows: the core loads them straight into its columns
                        # (docs/performance.md#offsets-in-parallel-arrays).
                        while chunk := cursor.fetchmany(_FETCH_ROWS):
                            records.extend(chunk)
                        continue
                    while chunk := cursor.fetchmany(_FETCH_ROWS):
                        records.extend(itertools.starmap(table.from_row, chunk))
            finally:
                if conn.in_transaction:  # an I/O error may have ended it already
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot load from SQLite database {self.path}: {exc}") from exc
        except CodecError as exc:
            raise StoreError(f"corrupt row in SQLite database {self.path}: {exc}") from exc
        return loaded_state(rows, offset_rows=True)

    def _group_ids_sync(self) -> list[str]:
        conn = self._reader_connection()
        ids: set[str] = set()
        try:
            conn.execute("BEGIN")
            try:
                for table in GROUP_TABLES:
                    # The primary key's first column: the scan reads group ids in key order.
                    ids.update(row[0] for row in conn.execute(f"SELECT DISTINCT group_id FROM {table.name}"))
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read group ids from SQLite database {self.path}: {exc}") from exc
        return list(ids)

    def _reader_connection(self) -> sqlite3.Connection:
        if self._reader_conn is None:
            try:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._reader_conn = sqlite3.connect(
                    uri, uri=True, isolation_level=None, timeout=self.busy_timeout_ms / 1000
                )
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open SQLite database {self.path} for reading: {exc}") from exc
        return self._reader_conn

    def _close_reader_sync(self) -> None:
        conn, self._reader_conn = self._reader_conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:
                log.warning("closing SQLite database %s failed: %s", self.path, exc)

    async def load_identity(self) -> StoredIdentity:
        return await self._run(self._identity_sync)

    def _identity_sync(self) -> StoredIdentity:
        conn = self._connection()
        try:
            rows = conn.execute(sqlite_sql(CLUSTER).select).fetchall()
            modes = conn.execute(sqlite_sql(SERVING_MODE).select).fetchall()
            has_state = any(
                conn.execute(f"SELECT 1 FROM {table.name} LIMIT 1").fetchone() is not None
                for table in SERVED_STATE_TABLES
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the cluster id from SQLite database {self.path}: {exc}") from exc
        cluster = list(itertools.starmap(CLUSTER.from_row, rows))
        serving_mode = list(itertools.starmap(SERVING_MODE.from_row, modes))
        return StoredIdentity(cluster, self._created, self._schema_version_at_open, has_state, serving_mode)

    async def load_credentials(self, user: str | None = None) -> list[UserCredentialRecord]:
        return await self._run(self._credentials_sync, user)

    def _credentials_sync(self, user: str | None) -> list[UserCredentialRecord]:
        conn = self._connection()
        try:
            query = sqlite_sql(USER_CREDENTIALS).select
            if user is None:
                rows = conn.execute(query).fetchall()
            else:
                rows = conn.execute(query + " WHERE user_name = ?", (user,)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read credentials from SQLite database {self.path}: {exc}") from exc
        return list(itertools.starmap(USER_CREDENTIALS.from_row, rows))

    def _write_sync(self, records: Sequence[Record]) -> None:
        conn = self._connection()
        self._check_identity()
        try:
            plan = plan_batch(records)
            # Encode everything before taking the write lock, so the lock is held only for SQL.
            upserts = [list(map(changes.table.to_row, changes.upserts)) for changes in plan.tables]
            conn.execute("BEGIN IMMEDIATE")
            try:
                for changes, rows in zip(plan.tables, upserts, strict=True):
                    table = changes.table
                    sql = sqlite_sql(table)
                    # The parent-wide deletes first: child records kept by plan_batch follow them.
                    if changes.wipes:
                        conn.executemany(sql.wipe, [(parent,) for parent in changes.wipes])
                    if changes.deletes:
                        conn.executemany(sql.delete, map(table.key_values, changes.deletes))
                    if rows:
                        conn.executemany(sql.upsert, rows)
                if self.history_retention_ms is not None:
                    self._write_history(conn, plan)
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        except _WRITE_ERRORS as exc:
            raise StoreError(f"SQLite write of {len(records)} records failed: {exc}") from exc

    def _write_history(self, conn: sqlite3.Connection, plan: BatchPlan) -> None:
        assert self.history_retention_ms is not None
        if plan.commits:
            conn.executemany(sqlite_sql(OFFSET_COMMIT_HISTORY).insert, map(OFFSETS.to_row, plan.commits))
        now = time.monotonic()
        if now >= self._next_prune:
            self._next_prune = now + self.history_prune_interval_ms / 1000
            conn.execute(_PRUNE_HISTORY, (int(time.time() * 1000) - self.history_retention_ms,))

    def _history_sync(self, group_id: str) -> list[OffsetCommitRecord]:
        conn = self._connection()
        try:
            query = sqlite_sql(OFFSET_COMMIT_HISTORY).select + " WHERE group_id = ? ORDER BY seq"
            rows = conn.execute(query, (group_id,)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read commit history from {self.path}: {exc}") from exc
        return list(itertools.starmap(OFFSET_COMMIT_HISTORY.from_row, rows))

    def _append_events_sync(self, events: Sequence[GroupEventRecord]) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sqlite_sql(GROUP_EVENTS).insert, map(GROUP_EVENTS.to_row, events))
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        except _WRITE_ERRORS as exc:
            raise StoreError(f"SQLite write of {len(events)} group events failed: {exc}") from exc

    def _load_events_sync(self, per_group: int, since_ms: int) -> list[GroupEventRecord]:
        try:
            rows = self._connection().execute(SQLITE_LOAD, (since_ms, per_group)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read group events from {self.path}: {exc}") from exc
        return list(itertools.starmap(GROUP_EVENTS.from_row, rows))

    def _prune_events_sync(self, before_ms: int, keep_rows: int) -> None:
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(SQLITE_PRUNE_OLD, (before_ms,))
                conn.execute(SQLITE_PRUNE_EXCESS, (keep_rows,))
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        except _WRITE_ERRORS as exc:
            raise StoreError(f"SQLite pruning of group events failed: {exc}") from exc

    def _close_sync(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:
                log.warning("closing SQLite database %s failed: %s", self.path, exc)
        lock, self._process_lock = self._process_lock, None
        if lock is not None:
            lock.release()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("SQLiteStore is not open")
        return self._conn


def _create_private(path: Path) -> bool:
    """Create a new database file readable by its owner only: it holds credential keys. True
    when it created the file.

    SQLite gives its -wal and -shm files the permissions of the database file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return False  # exists already, or cannot be created: sqlite3.connect reports the latter
    os.close(fd)
    log.warning("SQLite database %s did not exist: created an empty one", path)
    return True


def _identity(path: Path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino


def _probe_write(conn: sqlite3.Connection) -> None:
    """Fail now, with a readable error, when the file cannot be written (read-only file,
    directory or mount), instead of failing every commit later."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        conn.execute(f"PRAGMA user_version = {int(version)}")
    except sqlite3.Error as exc:
        raise sqlite3.OperationalError(f"the database is not writable: {exc}") from exc
    finally:
        _rollback_quietly(conn)


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    # After some errors (e.g. SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled back.
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            log.warning("SQLite rollback failed: %s", exc)
