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
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

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
from storage.schema import load_migrations, split_sqlite_script

log = logging.getLogger(__name__)

Synchronous = Literal["FULL", "NORMAL"]
_T = TypeVar("_T")

_FETCH_ROWS: Final = 50_000

_UPSERT_OFFSET: Final = """
INSERT INTO offsets (group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, expire_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (group_id, topic, partition) DO UPDATE SET
    committed_offset = excluded.committed_offset,
    leader_epoch = excluded.leader_epoch,
    metadata = excluded.metadata,
    commit_ms = excluded.commit_ms,
    expire_ms = excluded.expire_ms
"""
_DELETE_OFFSET: Final = "DELETE FROM offsets WHERE group_id = ? AND topic = ? AND partition = ?"
_UPSERT_GROUP: Final = """
INSERT INTO groups (group_id, protocol_type, generation_id, protocol_name, leader_id, state_ms, members)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (group_id) DO UPDATE SET
    protocol_type = excluded.protocol_type,
    generation_id = excluded.generation_id,
    protocol_name = excluded.protocol_name,
    leader_id = excluded.leader_id,
    state_ms = excluded.state_ms,
    members = excluded.members
"""
_DELETE_GROUP: Final = "DELETE FROM groups WHERE group_id = ?"
_UPSERT_TOPIC: Final = """
INSERT INTO topics (name, topic_id, num_partitions, replication_factor, configs)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    topic_id = excluded.topic_id,
    num_partitions = excluded.num_partitions,
    replication_factor = excluded.replication_factor,
    configs = excluded.configs
"""
_DELETE_TOPIC: Final = "DELETE FROM topics WHERE name = ?"
_UPSERT_CREDENTIAL: Final = """
INSERT INTO user_credentials (user_name, mechanism, salt, stored_key, server_key, iterations)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (user_name, mechanism) DO UPDATE SET
    salt = excluded.salt,
    stored_key = excluded.stored_key,
    server_key = excluded.server_key,
    iterations = excluded.iterations
"""
_DELETE_CREDENTIAL: Final = "DELETE FROM user_credentials WHERE user_name = ? AND mechanism = ?"
_CREDENTIAL_COLUMNS: Final = "user_name, mechanism, salt, stored_key, server_key, iterations"
_ACL_COLUMNS: Final = "resource_type, resource_name, pattern_type, principal, host, operation, permission"
_INSERT_ACL: Final = f"INSERT OR IGNORE INTO acls ({_ACL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
_DELETE_ACL: Final = (
    "DELETE FROM acls WHERE resource_type = ? AND resource_name = ? AND pattern_type = ? AND principal = ? "
    "AND host = ? AND operation = ? AND permission = ?"
)
_UPSERT_CONSUMER_GROUP: Final = """
INSERT INTO consumer_groups (group_id, group_epoch, assignment_epoch, state_ms)
VALUES (?, ?, ?, ?)
ON CONFLICT (group_id) DO UPDATE SET
    group_epoch = excluded.group_epoch,
    assignment_epoch = excluded.assignment_epoch,
    state_ms = excluded.state_ms
"""
_DELETE_CONSUMER_GROUP: Final = "DELETE FROM consumer_groups WHERE group_id = ?"
_UPSERT_CONSUMER_MEMBER: Final = f"""
INSERT INTO consumer_members ({CONSUMER_MEMBER_COLUMNS})
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (group_id, member_id) DO UPDATE SET
    instance_id = excluded.instance_id,
    rack_id = excluded.rack_id,
    client_id = excluded.client_id,
    client_host = excluded.client_host,
    subscribed_topic_regex = excluded.subscribed_topic_regex,
    server_assignor = excluded.server_assignor,
    rebalance_timeout_ms = excluded.rebalance_timeout_ms,
    member_epoch = excluded.member_epoch,
    previous_member_epoch = excluded.previous_member_epoch,
    state = excluded.state,
    topics = excluded.topics
"""
_DELETE_CONSUMER_MEMBER: Final = "DELETE FROM consumer_members WHERE group_id = ? AND member_id = ?"
_WIPE_CONSUMER_MEMBERS: Final = "DELETE FROM consumer_members WHERE group_id = ?"
_INSERT_HISTORY: Final = """
INSERT INTO offset_commit_history
    (group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, expire_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""
_PRUNE_HISTORY: Final = "DELETE FROM offset_commit_history WHERE commit_ms < ?"
_OFFSET_COLUMNS: Final = (
    "group_id, topic, partition, committed_offset, leader_epoch, metadata, commit_ms, expire_ms"
)

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
    ) -> None:
        """``path``: database file (created if missing; its directory must exist).

        ``synchronous``: ``"FULL"`` (every commit fsynced) or ``"NORMAL"`` (fsync at WAL
        checkpoints only). ``busy_timeout_ms``: how long a write waits for a lock held by
        another connection before failing with StoreError. ``history_retention_ms``: when set,
        every offset commit is also appended to ``offset_commit_history`` and rows older than
        this (by ``commit_ms``) are pruned, at most once per ``history_prune_interval_ms``.
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
        self._closed = False
        self._next_prune = 0.0

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
        return await self._run(self._load_sync)

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

    async def _shutdown(self) -> None:
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
        try:
            _create_private(self.path)
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

    def _load_sync(self) -> LoadedState:
        conn = self._connection()
        try:
            conn.execute("BEGIN")  # one read snapshot for all tables
            try:
                topics = [
                    TopicRecord(name, topic_id, num_partitions, replication_factor, decode_configs(configs))
                    for name, topic_id, num_partitions, replication_factor, configs in conn.execute(
                        "SELECT name, topic_id, num_partitions, replication_factor, configs FROM topics"
                    )
                ]
                groups = [
                    GroupMetadataRecord(r[0], r[1], r[2], r[3], r[4], r[5], _decode_members(r[0], r[6]))
                    for r in conn.execute(
                        "SELECT group_id, protocol_type, generation_id, protocol_name, leader_id, "
                        "state_ms, members FROM groups"
                    )
                ]
                offsets: list[OffsetCommitRecord] = []
                cursor = conn.execute(f"SELECT {_OFFSET_COLUMNS} FROM offsets")
                while rows := cursor.fetchmany(_FETCH_ROWS):
                    # Column order matches the dataclass field order.
                    offsets.extend(itertools.starmap(OffsetCommitRecord, rows))
                credentials = list(
                    itertools.starmap(
                        UserCredentialRecord,
                        conn.execute(f"SELECT {_CREDENTIAL_COLUMNS} FROM user_credentials"),
                    )
                )
                acls = list(itertools.starmap(AclRecord, conn.execute(f"SELECT {_ACL_COLUMNS} FROM acls")))
                consumer_groups = list(
                    itertools.starmap(
                        ConsumerGroupRecord,
                        conn.execute(
                            "SELECT group_id, group_epoch, assignment_epoch, state_ms FROM consumer_groups"
                        ),
                    )
                )
                consumer_members: list[ConsumerMemberRecord] = []
                cursor = conn.execute(f"SELECT {CONSUMER_MEMBER_COLUMNS} FROM consumer_members")
                while rows := cursor.fetchmany(_FETCH_ROWS):
                    consumer_members.extend(map(consumer_member_from_row, rows))
            finally:
                if conn.in_transaction:  # an I/O error may have ended it already
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot load from SQLite database {self.path}: {exc}") from exc
        except CodecError as exc:
            raise StoreError(f"corrupt row in SQLite database {self.path}: {exc}") from exc
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
        return await self._run(self._credentials_sync, user)

    def _credentials_sync(self, user: str | None) -> list[UserCredentialRecord]:
        conn = self._connection()
        try:
            if user is None:
                rows = conn.execute(f"SELECT {_CREDENTIAL_COLUMNS} FROM user_credentials").fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_CREDENTIAL_COLUMNS} FROM user_credentials WHERE user_name = ?", (user,)
                ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read credentials from SQLite database {self.path}: {exc}") from exc
        return list(itertools.starmap(UserCredentialRecord, rows))

    def _write_sync(self, records: Sequence[Record]) -> None:
        conn = self._connection()
        self._check_identity()
        try:
            plan = plan_batch(records)
            # Encode everything before taking the write lock, so the lock is held only for SQL.
            topic_rows = [_topic_row(t) for t in plan.topic_upserts]
            group_rows = [_group_row(g) for g in plan.group_upserts]
            offset_rows = [_offset_row(r) for r in plan.offset_upserts]
            consumer = plan.consumer
            member_rows = [consumer_member_row(m) for m in consumer.member_upserts] if consumer else None
            conn.execute("BEGIN IMMEDIATE")
            try:
                if plan.offset_deletes:
                    conn.executemany(_DELETE_OFFSET, plan.offset_deletes)
                if plan.group_deletes:
                    conn.executemany(_DELETE_GROUP, [(g,) for g in plan.group_deletes])
                if plan.topic_deletes:
                    conn.executemany(_DELETE_TOPIC, [(t,) for t in plan.topic_deletes])
                if topic_rows:
                    conn.executemany(_UPSERT_TOPIC, topic_rows)
                if group_rows:
                    conn.executemany(_UPSERT_GROUP, group_rows)
                if offset_rows:
                    conn.executemany(_UPSERT_OFFSET, offset_rows)
                if plan.credential_deletes:
                    conn.executemany(_DELETE_CREDENTIAL, plan.credential_deletes)
                if plan.acl_deletes:
                    conn.executemany(_DELETE_ACL, [_acl_row(a) for a in plan.acl_deletes])
                if plan.acl_upserts:
                    conn.executemany(_INSERT_ACL, [_acl_row(a) for a in plan.acl_upserts])
                if plan.credential_upserts:
                    conn.executemany(
                        _UPSERT_CREDENTIAL,
                        [(c.user, c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
                         for c in plan.credential_upserts],
                    )  # fmt: skip
                if consumer is not None and member_rows is not None:
                    _write_consumer(conn, consumer, member_rows)
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
            conn.executemany(_INSERT_HISTORY, [_offset_row(r) for r in plan.commits])
        now = time.monotonic()
        if now >= self._next_prune:
            self._next_prune = now + self.history_prune_interval_ms / 1000
            conn.execute(_PRUNE_HISTORY, (int(time.time() * 1000) - self.history_retention_ms,))

    def _history_sync(self, group_id: str) -> list[OffsetCommitRecord]:
        conn = self._connection()
        try:
            rows = conn.execute(
                f"SELECT {_OFFSET_COLUMNS} FROM offset_commit_history WHERE group_id = ? ORDER BY seq",
                (group_id,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read commit history from {self.path}: {exc}") from exc
        return list(itertools.starmap(OffsetCommitRecord, rows))

    def _close_sync(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:
                log.warning("closing SQLite database %s failed: %s", self.path, exc)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("SQLiteStore is not open")
        return self._conn


def _create_private(path: Path) -> None:
    """Create a new database file readable by its owner only: it holds credential keys.

    SQLite gives its -wal and -shm files the permissions of the database file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return  # exists already, or cannot be created: sqlite3.connect reports the latter
    os.close(fd)
    log.warning("SQLite database %s did not exist: created an empty one", path)


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


def _write_consumer(conn: sqlite3.Connection, plan: ConsumerPlan, member_rows: list[tuple[Any, ...]]) -> None:
    # The group-wide member deletes first: member records kept by plan_batch follow the wipe.
    if plan.member_wipes:
        conn.executemany(_WIPE_CONSUMER_MEMBERS, [(g,) for g in plan.member_wipes])
    if plan.member_deletes:
        conn.executemany(_DELETE_CONSUMER_MEMBER, plan.member_deletes)
    if member_rows:
        conn.executemany(_UPSERT_CONSUMER_MEMBER, member_rows)
    if plan.group_deletes:
        conn.executemany(_DELETE_CONSUMER_GROUP, [(g,) for g in plan.group_deletes])
    if plan.group_upserts:
        conn.executemany(
            _UPSERT_CONSUMER_GROUP,
            [(g.group_id, g.group_epoch, g.assignment_epoch, g.state_ms) for g in plan.group_upserts],
        )


def _acl_row(a: AclRecord) -> tuple[object, ...]:
    return (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission)


def _offset_row(r: OffsetCommitRecord) -> tuple[object, ...]:
    return (r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_ms, r.expire_ms)


def _group_row(g: GroupMetadataRecord) -> tuple[object, ...]:
    members = encode_members(g.members)
    return (g.group_id, g.protocol_type, g.generation_id, g.protocol_name, g.leader_id, g.state_ms, members)


def _topic_row(t: TopicRecord) -> tuple[object, ...]:
    return (t.name, t.topic_id, t.num_partitions, t.replication_factor, encode_configs(t.configs))


def _decode_members(group_id: str, blob: bytes) -> tuple[MemberRecord, ...]:
    try:
        return decode_members(blob)
    except CodecError as exc:
        raise CodecError(f"group {group_id!r}: {exc}") from exc


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    # After some errors (e.g. SQLITE_FULL, SQLITE_IOERR) SQLite has already rolled back.
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            log.warning("SQLite rollback failed: %s", exc)
