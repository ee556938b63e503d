"""Shard ownership on PostgreSQL: the node registry, shard leases, the node lock and the fence.

docs/multinode.md describes the protocol. This module is its storage half: every statement that
reads or changes ownership, on one connection of its own that holds the node's session-level
advisory lock. When the process dies, PostgreSQL ends that session and the lock is free at once,
which is how the other nodes tell a crash (take its shards now) from a hang (wait for the lease
to expire). The lease row (owner, epoch, expiry by the database clock) stays the authority; the
``Fence`` makes every write transaction check it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from storage.base import StoreError
from storage.pg_errors import PG_ERRORS
from storage.records import AclRecord, GroupConfigRecord, GroupConfigTombstone, Record, TopicRecord
from storage.sql import postgres_reader, postgres_sql
from storage.tables import ACLS, GROUP_CONFIGS, TOPICS, Table

log = logging.getLogger(__name__)

NODE_LOCKS: Final = 0x6B6764  # advisory lock namespace of node ids (the key's first int)
SHARD_COUNT_SETTING: Final = "offsets.topic.num.partitions"
OWNERSHIP_TABLES: Final = ("cluster_settings", "coordinator_nodes", "shard_leases", "change_counters")
ACLS_COUNTER: Final = "acls"
GROUP_CONFIGS_COUNTER: Final = "group_configs"  # group configs changed by a node not owning the group
# In the transaction of every ACL change (and of every group config change made by a node that
# does not own the group): the others' polls see the counter move.
BUMP_COUNTER: Final = (
    "INSERT INTO change_counters (name, version) VALUES ($1, 1) "
    "ON CONFLICT (name) DO UPDATE SET version = change_counters.version + 1"
)


class NodeIdInUse(StoreError):
    """Another live process registered the same node id on this database."""


class ShardCountMismatch(StoreError):
    """This node's offsets.topic.num.partitions differs from the one stored in the database."""


class ShardFenced(StoreError):
    """A write touched shards whose lease this node no longer holds: nothing of it landed."""

    def __init__(self, shards: Collection[int], message: str) -> None:
        super().__init__(message)
        self.shards = frozenset(shards)


@dataclass(slots=True)
class Fence:
    """What a write transaction checks: the epochs of the leases this node holds."""

    node_id: int
    shard_of: Callable[[str], int]
    epochs: dict[int, int] = field(default_factory=dict)

    def shards_of(self, records: Sequence[Record]) -> set[int]:
        found: set[int] = set()
        for record in records:
            group_id = getattr(record, "group_id", None)
            if isinstance(group_id, str):
                found.add(self.shard_of(group_id))
        return found


# The lease rows of the written shards, locked FOR SHARE for the rest of the transaction: a
# takeover's UPDATE waits for this transaction, and a transaction after it sees the new epoch.
FENCE_CHECK: Final = (
    "SELECT l.shard FROM shard_leases AS l "
    "JOIN unnest($2::integer[], $3::bigint[]) AS f(shard, epoch) ON l.shard = f.shard AND l.epoch = f.epoch "
    "WHERE l.owner = $1 AND l.expires_at > now() FOR SHARE OF l"
)


@dataclass(frozen=True, slots=True)
class LeaseRow:
    shard: int
    owner: int | None
    epoch: int
    unexpired: bool
    owner_alive: bool  # the owner's session (its node lock) is open


@dataclass(frozen=True, slots=True)
class NodeRow:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class OwnershipView:
    leases: list[LeaseRow]
    live_nodes: list[NodeRow]
    topics_version: tuple[int, int]  # changes whenever the topic catalog does (count, checksum)
    acls_version: int = 0  # bumped by every ACL change (change_counters)
    group_configs_version: int = 0  # bumped by every group config change made by a non-owner


def _node_alive(node: str) -> str:
    """SQL: the session of node ``node`` (a column or parameter) holds its node lock."""
    return (
        "EXISTS (SELECT 1 FROM pg_locks AS k WHERE k.locktype = 'advisory' AND k.granted "
        "AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"AND k.classid = {NODE_LOCKS} AND k.objid = {node} AND k.objsubid = 2)"
    )


# What a poll reads, in one statement: every lease, the live nodes (seen within a lease, and
# their session -- the node lock -- still open), a fingerprint of the topic catalog and the
# change counters of the ACLs and of the group configs.
_Row = TypeVar("_Row")

_VIEW: Final = (
    "SELECT 'l' AS kind, l.shard AS id, l.owner, l.epoch, l.expires_at > now() AS unexpired, "
    f"l.owner IS NOT NULL AND {_node_alive('l.owner')} AS alive, NULL::text AS host "
    "FROM shard_leases AS l "
    "UNION ALL "
    "SELECT 'n', n.node_id, n.port, NULL, NULL, NULL, n.host FROM coordinator_nodes AS n "
    f"WHERE n.last_seen > now() - make_interval(secs => $1 / 1000.0) AND {_node_alive('n.node_id')} "
    "UNION ALL "
    "SELECT 't', count(*)::integer, NULL, coalesce(sum(hashtext(t.name || ':' || t.num_partitions || ':' "
    "|| encode(t.topic_id, 'hex') || ':' || t.configs)), 0)::bigint, NULL, NULL, NULL FROM topics AS t "
    "UNION ALL "
    f"SELECT 'a', NULL, NULL, coalesce((SELECT version FROM change_counters WHERE name = '{ACLS_COUNTER}'), 0), "
    "NULL, NULL, NULL "
    "UNION ALL "
    "SELECT 'g', NULL, NULL, "
    f"coalesce((SELECT version FROM change_counters WHERE name = '{GROUP_CONFIGS_COUNTER}'), 0), NULL, NULL, NULL"
)
_UPSERT_GROUP_CONFIG: Final = (
    "INSERT INTO group_configs (group_id, name, value) VALUES ($1, $2, $3) "
    "ON CONFLICT (group_id, name) DO UPDATE SET value = EXCLUDED.value"
)
_DELETE_GROUP_CONFIG: Final = "DELETE FROM group_configs WHERE group_id = $1 AND name = $2"
# Free: no owner, expired (a hung owner), or the owner's session ended (it died: no waiting).
_TAKE: Final = (
    "UPDATE shard_leases AS l SET owner = $1, epoch = l.epoch + 1, "
    "expires_at = now() + make_interval(secs => $2 / 1000.0) "
    "FROM unnest($3::integer[], $4::bigint[]) AS o(shard, epoch) "
    "WHERE l.shard = o.shard AND l.epoch = o.epoch "
    f"AND (l.owner IS NULL OR l.owner = $1 OR l.expires_at <= now() OR NOT {_node_alive('l.owner')}) "
    "RETURNING l.shard, l.epoch"
)
_RENEW: Final = (
    "WITH seen AS (UPDATE coordinator_nodes SET last_seen = now() WHERE node_id = $1) "
    "UPDATE shard_leases AS l SET expires_at = now() + make_interval(secs => $2 / 1000.0) "
    "FROM unnest($3::integer[], $4::bigint[]) AS o(shard, epoch) "
    "WHERE l.shard = o.shard AND l.epoch = o.epoch AND l.owner = $1 AND l.expires_at > now() "
    "RETURNING l.shard"
)
_RELEASE: Final = (
    "UPDATE shard_leases AS l SET owner = NULL, expires_at = now() "
    "FROM unnest($2::integer[], $3::bigint[]) AS o(shard, epoch) "
    "WHERE l.shard = o.shard AND l.epoch = o.epoch AND l.owner = $1"
)


class LeaseTable:
    """The ownership statements of one node, on a dedicated connection holding its locks."""

    def __init__(
        self,
        connect: Callable[[], Any],
        node_id: int,
        shards: int,
        lease_ms: int,
        where: str,
    ) -> None:
        """``connect``: an awaitable factory of asyncpg connections (the store's settings)."""
        self._connect = connect
        self.node_id = node_id
        self.shards = shards
        self.lease_ms = lease_ms
        self.where = where
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self.sessions = 0  # lock sessions opened so far (a reconnect makes it grow)

    # -- the session -----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def _session(self) -> Any:
        """The lock connection; a new one takes the node lock again."""
        if self.connected:
            return self._conn
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None
        conn = await self._connect()
        try:
            got = await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", NODE_LOCKS, self.node_id)
            if not got:
                row = await conn.fetchrow(
                    "SELECT host, port, (extract(epoch FROM now() - last_seen) * 1000)::bigint AS ago "
                    "FROM coordinator_nodes WHERE node_id = $1",
                    self.node_id,
                )
                seen = (
                    ""
                    if row is None
                    else f" (advertised {row['host']}:{row['port']}, last seen {row['ago']} ms ago)"
                )
                raise NodeIdInUse(f"node id {self.node_id} is already in use by a live node{seen}")
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn
        self.sessions += 1
        return conn

    async def _run(self, what: str, work: Callable[[Any], Any]) -> Any:
        async with self._lock:
            try:
                conn = await self._session()
                return await work(conn)
            except NodeIdInUse:
                raise
            except PG_ERRORS as exc:
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None
                raise StoreError(f"cannot {what} on PostgreSQL {self.where}: {exc!r}") from exc

    # -- registration ----------------------------------------------------------------------

    async def register(self, host: str, port: int) -> None:
        """Take the node id (refused when a live process holds it), check the shard count
        (stored by the first node), create the lease rows and the node's registry row."""

        async def work(conn: Any) -> None:
            async with conn.transaction():
                await conn.execute(
                    "INSERT INTO cluster_settings (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    SHARD_COUNT_SETTING,
                    str(self.shards),
                )
                stored = await conn.fetchval(
                    "SELECT value FROM cluster_settings WHERE name = $1", SHARD_COUNT_SETTING
                )
                if stored != str(self.shards):
                    raise ShardCountMismatch(
                        f"{SHARD_COUNT_SETTING} is {stored} in the database but {self.shards} "
                        f"here; every node of a database must use the same value"
                    )
                await conn.execute(
                    "INSERT INTO shard_leases (shard) SELECT generate_series(0, $1 - 1) ON CONFLICT DO NOTHING",
                    self.shards,
                )
                await conn.execute(
                    "INSERT INTO coordinator_nodes (node_id, host, port, started_at, last_seen) "
                    "VALUES ($1, $2, $3, now(), now()) ON CONFLICT (node_id) DO UPDATE SET "
                    "host = excluded.host, port = excluded.port, started_at = now(), last_seen = now()",
                    self.node_id,
                    host,
                    port,
                )

        await self._run("register the node", work)

    async def deregister(self) -> None:
        async def work(conn: Any) -> None:
            await conn.execute("DELETE FROM coordinator_nodes WHERE node_id = $1", self.node_id)

        await self._run("deregister the node", work)

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                try:
                    await conn.close(timeout=2.0)  # ends the session: every lock is released
                except PG_ERRORS:
                    conn.terminate()

    # -- ownership -------------------------------------------------------------------------

    async def view(self) -> OwnershipView:
        async def work(conn: Any) -> OwnershipView:
            rows = await conn.fetch(_VIEW, self.lease_ms)
            leases = sorted(
                (
                    LeaseRow(r["id"], r["owner"], r["epoch"], r["unexpired"], r["alive"])
                    for r in rows
                    if r["kind"] == "l"
                ),
                key=lambda lease: lease.shard,
            )
            nodes = sorted(
                (NodeRow(r["id"], r["host"], r["owner"]) for r in rows if r["kind"] == "n"),
                key=lambda node: node.node_id,
            )
            [topics] = [(r["id"], r["epoch"]) for r in rows if r["kind"] == "t"]
            [acls] = [r["epoch"] for r in rows if r["kind"] == "a"]
            [group_configs] = [r["epoch"] for r in rows if r["kind"] == "g"]
            return OwnershipView(leases, nodes, topics, acls, group_configs)

        result: OwnershipView = await self._run("read the shard leases", work)
        return result

    async def take(self, epochs: dict[int, int]) -> dict[int, int]:
        """Take the shards whose leases are at these epochs, those still free, in one statement
        (of nodes racing for a shard, one wins); the new epochs of the shards taken."""

        async def work(conn: Any) -> dict[int, int]:
            shards = list(epochs)
            rows = await conn.fetch(_TAKE, self.node_id, self.lease_ms, shards, [epochs[s] for s in shards])
            return {r["shard"]: r["epoch"] for r in rows}

        result: dict[int, int] = await self._run(f"take shards {sorted(epochs)}", work)
        return result

    async def renew(self, epochs: dict[int, int]) -> set[int]:
        """Push the expiry of our leases at these epochs (and our last_seen); the shards renewed."""

        async def work(conn: Any) -> set[int]:
            shards = list(epochs)
            rows = await conn.fetch(_RENEW, self.node_id, self.lease_ms, shards, [epochs[s] for s in shards])
            return {r["shard"] for r in rows}

        result: set[int] = await self._run("renew the shard leases", work)
        return result

    async def release(self, epochs: dict[int, int]) -> None:
        """Give leases back (graceful hand-over): their shards are free for the next taker."""

        async def work(conn: Any) -> None:
            shards = list(epochs)
            await conn.execute(_RELEASE, self.node_id, shards, [epochs[s] for s in shards])

        await self._run(f"release shards {sorted(epochs)}", work)

    async def acls(self) -> list[AclRecord]:
        """Every ACL binding (changed through any node), on the lock connection."""
        return await self._select(ACLS, "read the ACLs")

    async def group_configs(self, group_ids: Collection[str] | None = None) -> list[GroupConfigRecord]:
        """The stored overrides of ``group_ids`` (None: of every group), on the lock connection."""
        return await self._select(GROUP_CONFIGS, "read the group configs", "group_id", group_ids)

    async def change_group_configs(self, records: Sequence[GroupConfigRecord | GroupConfigTombstone]) -> None:
        """Store group config changes made by a node that does not own the groups: no lease
        fence (the configs are not the owner's state alone), the counter bumped in the same
        transaction so that the owner's next poll reloads them; durable when this returns."""

        async def work(conn: Any) -> None:
            async with conn.transaction():
                for record in records:
                    if isinstance(record, GroupConfigRecord):
                        await conn.execute(_UPSERT_GROUP_CONFIG, record.group_id, record.name, record.value)
                    else:
                        await conn.execute(_DELETE_GROUP_CONFIG, record.group_id, record.name)
                await conn.execute(BUMP_COUNTER, GROUP_CONFIGS_COUNTER)

        await self._run("store the group configs", work)

    async def topics(self, names: Collection[str] | None = None) -> list[TopicRecord]:
        """The topic catalog (topics created through any node), or those of ``names``, on the
        lock connection."""
        return await self._select(TOPICS, "read the topic catalog", "name", names)

    async def _select(
        self, table: Table[_Row], what: str, column: str = "", values: Collection[str] | None = None
    ) -> list[_Row]:
        """The rows of ``table`` (those whose ``column`` is one of ``values`` when given)."""

        async def work(conn: Any) -> list[_Row]:
            query = postgres_sql(table).select
            rows = await (
                conn.fetch(query)
                if values is None
                else conn.fetch(f"{query} WHERE {column} = ANY($1::text[])", list(values))
            )
            return list(map(postgres_reader(table), rows))

        result: list[_Row] = await self._run(what, work)
        return result
