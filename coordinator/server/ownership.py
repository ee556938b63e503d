"""The ownership loop of a node on PostgreSQL: take, renew, hand over and lose shards.

docs/multinode.md describes the protocol; ``storage/ownership.py`` runs its statements. Every
``group.coordinator.ownership.poll.ms`` the loop reads the lease table and the live nodes,
renews the node's leases every third of ``group.coordinator.lease.ms``, hands over shards above
the node's fair share and takes free shards below it. The shard map it keeps is what the API
layer routes by and what FindCoordinator answers from.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Final, TypeVar

from coordinator.core.cluster import Cluster
from coordinator.core.shard_map import NodeAddress, ShardMap, ShardState
from coordinator.server.group_loading import long_lived_objects
from coordinator.server.runtime import Runtime
from coordinator.server.tasks import cancel_and_wait
from storage.base import StoreError
from storage.ownership import Fence, LeaseRow, LeaseTable, NodeIdInUse, OwnershipView
from storage.postgres import PostgresStore
from storage.records import AclRecord, LoadedState

log = logging.getLogger(__name__)

REGISTER_PATIENCE_MS: Final = 2000
STOP_WAIT_S: Final = 10.0
# A write transaction idle this long (its process paused) is ended by PostgreSQL: a quarter of
# the lease, so a takeover waits for a zombie's transaction at most that long.
MIN_TRANSACTION_IDLE_MS: Final = 100


def fair_share(shards: int, nodes: list[int], node_id: int) -> int:
    """Shards this node should own: ``shards // n`` each, one more for the first ``shards % n``
    live nodes by id. A node not (yet) seen live counts as the last one."""
    ordered = sorted(set(nodes) | {node_id})
    base, extra = divmod(shards, len(ordered))
    return base + (1 if ordered.index(node_id) < extra else 0)


_T = TypeVar("_T")
MAX_SHARDS_PER_READ: Final = 8


@dataclass(slots=True)
class _Owned:
    epoch: int


class Ownership:
    """Keeps ``shard_map`` and the store's fence in line with the leases this node holds."""

    def __init__(
        self,
        store: PostgresStore,
        leases: LeaseTable,
        runtime: Runtime,
        cluster: Cluster,
        shard_map: ShardMap,
        *,
        lease_ms: int,
        poll_ms: int,
    ) -> None:
        self.store = store
        self.leases = leases
        self.runtime = runtime
        self.cluster = cluster
        self.shard_map = shard_map
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.fence = Fence(shard_map.node_id, shard_map.shard_of)
        store.use_fence(self.fence, max(lease_ms // 4, MIN_TRANSACTION_IDLE_MS))
        store.delete_offsets_with_topics = not runtime.coordinator.config.offsets_retain_on_topic_deletion
        runtime.on_fenced = self._fenced
        self.owned: dict[int, _Owned] = {}
        self._releasing: set[int] = set()
        self._next_renew_ms = 0
        self._renewed_at_ms: int | None = None  # loop time the last good renewal was sent at
        self._failing = False
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._wake = asyncio.Event()
        self.ready = asyncio.Event()  # set once the first round took and loaded this node's share
        self._topics_version: tuple[int, int] | None = None
        self._catalog_version = -1  # the local catalog's version after the last refresh
        self.on_acls: Callable[[list[AclRecord]], None] | None = None  # see watch_acls
        self._acls_version: int | None = None
        self._group_configs_version: int | None = None
        self._sweeps: set[asyncio.Task[None]] = set()
        # After our own lock session (re)opens, other nodes reconnect too (a PostgreSQL
        # restart): give them a few polls before their shards count as abandoned.
        self._sessions_seen = 0
        self._patient_until_ms = 0

    def watch_acls(self, on_acls: Callable[[list[AclRecord]], None]) -> None:
        """Call ``on_acls`` with every ACL binding whenever they change through any node (the
        next poll reads them once more, in case one changed since they were loaded)."""
        self.on_acls = on_acls
        self._acls_version = None

    @property
    def node_id(self) -> int:
        return self.shard_map.node_id

    # -- lifecycle -------------------------------------------------------------------------

    async def register(self, host: str, port: int) -> None:
        """Register (refused for a node id in use or another shard count): before the node
        serves, so that such a refusal ends the start."""
        deadline = self._now_ms() + REGISTER_PATIENCE_MS
        while True:
            try:
                await self.leases.register(host, port)
                break
            except NodeIdInUse:
                # A predecessor with this id that just died may take a moment to lose its session.
                if self._now_ms() >= deadline:
                    raise
                await asyncio.sleep(0.1)
        self._sessions_seen = self.leases.sessions
        log.info("node %d registered (advertised %s:%d)", self.node_id, host, port)

    def start(self, on_ready: Callable[[], None] | None = None) -> None:
        """Run the rounds in the background, the first one at once: it takes this node's share
        and loads it shard by shard while the node serves (a group is answered as soon as its
        shard is loaded); ``on_ready`` is called once it is done."""
        self._task = asyncio.get_running_loop().create_task(self._run(on_ready), name="shard-ownership")

    async def stop(self) -> None:
        """Graceful leave: stop the loop, hand every shard over, deregister."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            # The round in progress finishes (a statement cut off would leave the session unusable).
            try:
                await asyncio.wait_for(asyncio.shield(self._task), STOP_WAIT_S)
            except TimeoutError:
                await cancel_and_wait(self._task)
            self._task = None
        try:
            await self._release(list(self.owned))
            await self.leases.deregister()
            log.info("node %d deregistered", self.node_id)
        except StoreError as exc:
            log.warning("could not hand shards over at shutdown (their leases will expire): %s", exc)
        finally:
            await self.leases.close()

    async def _run(self, on_ready: Callable[[], None] | None) -> None:
        first = True
        while not self._stopping:
            if not first:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_ms / 1000)
                if self._stopping:
                    return
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("shard ownership round failed")
            if first:
                first = False
                log.info(
                    "node %d ready: owning %d of %d shards (%d live nodes)",
                    self.node_id, len(self.owned), self.shard_map.shards, len(self.shard_map.nodes),
                )  # fmt: skip
                self.ready.set()
                if on_ready is not None:
                    on_ready()

    # -- one round -------------------------------------------------------------------------

    async def _round(self) -> None:
        try:
            view = await self.leases.view()
        except StoreError as exc:
            self._storage_failed(exc)
            self._expire_locally()
            return
        if self.leases.sessions != self._sessions_seen:
            self._sessions_seen = self.leases.sessions
            self._patient_until_ms = self._now_ms() + 4 * self.poll_ms
        self._see(view)
        if self._now_ms() >= self._next_renew_ms:
            await self._renew()
        # A topic this node wrote may have lost to one created at once through another node
        # (the stored row wins): a local catalog change is read back as well.
        if view.topics_version != self._topics_version or self.cluster.version != self._catalog_version:
            try:
                await self._refresh_topics()
                self._topics_version = view.topics_version
            except StoreError as exc:
                self._storage_failed(exc)
        if view.acls_version != self._acls_version:
            await self._refresh_acls(view.acls_version)
        if view.group_configs_version != self._group_configs_version:
            await self._refresh_group_configs(view.group_configs_version)
        self._expire_locally()
        if self._stopping:
            return
        live = [node.node_id for node in view.live_nodes]
        target = fair_share(self.shard_map.shards, live, self.node_id)
        if len(self.owned) > target:
            # Hand the extra shards (the highest) over at once: the others' next poll takes them.
            await self._release(sorted(self.owned)[target:])
        elif len(self.owned) < target:
            await self._take(self._free(view.leases)[: target - len(self.owned)])

    def _see(self, view: OwnershipView) -> None:
        """Record the other nodes' shards and addresses; notice shards taken from us."""
        self.shard_map.nodes = {n.node_id: NodeAddress(n.node_id, n.host, n.port) for n in view.live_nodes}
        owners: dict[int, int] = {}
        lost: list[int] = []
        for row in view.leases:
            mine = self.owned.get(row.shard)
            if mine is not None and (row.owner != self.node_id or row.epoch != mine.epoch):
                lost.append(row.shard)
            elif row.owner is not None and row.owner != self.node_id and row.unexpired and row.owner_alive:
                owners[row.shard] = row.owner
        self.shard_map.owners = owners
        self.shard_map.epochs = {row.shard: row.epoch for row in view.leases}
        for shard, held in self.owned.items():
            self.shard_map.epochs[shard] = held.epoch
        if lost:
            self._lose(lost, "the lease was taken over by another node")

    def _free(self, leases: list[LeaseRow]) -> list[LeaseRow]:
        """Leases that may be taken now: no owner, expired, or the owner's process ended."""
        patient = self._now_ms() < self._patient_until_ms
        free = []
        for row in leases:
            if row.shard in self.owned or row.shard in self._releasing:
                continue
            # Our own id on a lease we do not hold: left by this node's previous process.
            abandoned = row.owner == self.node_id or (not row.owner_alive and not patient)
            if row.owner is None or not row.unexpired or abandoned:
                free.append(row)
        return free

    def _now_ms(self) -> int:
        return self.runtime.clock.now_ms()

    async def _renew(self) -> None:
        sent = self._now_ms()
        epochs = {shard: owned.epoch for shard, owned in self.owned.items()}
        try:
            renewed = await self.leases.renew(epochs)
        except StoreError as exc:
            self._storage_failed(exc)
            return
        self._recovered()
        self._next_renew_ms = sent + self.lease_ms // 3
        self._renewed_at_ms = sent
        # The database's expiry is at least a lease after the statement was sent.
        self.shard_map.valid_until_ms = sent + self.lease_ms
        lost = [shard for shard in epochs if shard not in renewed and shard in self.owned]
        if lost:
            self._lose(lost, "the lease could not be renewed (taken over or expired)")

    def _expire_locally(self) -> None:
        """No renewal for a whole lease (PostgreSQL unreachable, the process was paused): by
        now another node may own the shards, so stop answering for them."""
        renewed = self._renewed_at_ms
        if self.owned and (renewed is None or self._now_ms() - renewed >= self.lease_ms):
            self._lose(list(self.owned), "the lease was not renewed within group.coordinator.lease.ms")

    async def _take(self, rows: list[LeaseRow]) -> None:
        if not rows:
            return
        try:
            taken = await self.leases.take({row.shard: row.epoch for row in rows})
        except StoreError as exc:
            self._storage_failed(exc)
            return
        for shard, epoch in taken.items():
            self.owned[shard] = _Owned(epoch)
            self.shard_map.epochs[shard] = epoch
            self.fence.epochs[shard] = epoch
            self.shard_map.move(shard, ShardState.LOADING)
        if not taken:
            return
        await self._renew()  # the taken leases' validity starts now for the local clock too
        taken = {shard: epoch for shard, epoch in taken.items() if shard in self.owned}
        if not taken:
            return
        try:
            await self._refresh_topics()
            # Read after the take: from now on no older epoch's write can land in these shards.
            group_ids = await self._renewing_while(self.store.group_ids())
        except StoreError as exc:
            log.warning("cannot load shards %s: %s", sorted(taken), exc)
            for shard in taken:
                await self._give_back(shard, failed=True)
            return
        by_shard: dict[int, list[str]] = {}
        for group_id in group_ids:
            shard = self.shard_map.shard_of(group_id)
            if shard in taken:
                by_shard.setdefault(shard, []).append(group_id)
        await self._load_one_by_one(taken, by_shard)

    async def _load_one_by_one(self, taken: dict[int, int], by_shard: dict[int, list[str]]) -> None:
        """Load the taken shards a few at a time, a shard that a request waits for first and
        alone, so that a group waits for its own shard's load only
        (docs/multinode.md#loading-a-shard). The first read is one shard, so that groups are
        served early; each read after it takes twice as many shards (up to MAX_SHARDS_PER_READ),
        because every read costs a round of queries and a load step of its own."""
        pending = deque(sorted(taken))
        wanted: deque[int] = deque()

        def want(shard: int) -> None:
            if shard in pending and shard not in wanted:
                wanted.append(shard)

        self.shard_map.on_wanted = want
        size = 1
        try:
            while pending:
                if wanted:
                    batch = [wanted.popleft()]
                else:
                    batch = [pending[i] for i in range(min(size, len(pending)))]
                    size = min(2 * size, MAX_SHARDS_PER_READ)
                for shard in batch:
                    pending.remove(shard)
                batch = [shard for shard in batch if shard in self.owned]  # not lost meanwhile
                ids = [group_id for shard in batch for group_id in by_shard.get(shard, ())]
                try:
                    state = await self._renewing_while(self.store.load_groups(ids)) if ids else None
                except StoreError as exc:
                    log.warning("cannot load shards %s: %s", sorted([*batch, *pending]), exc)
                    for failed in [*batch, *pending]:
                        await self._give_back(failed, failed=True)
                    return
                read = len(batch)
                batch = [shard for shard in batch if shard in self.owned]
                self._unload_groups(batch)  # leftovers of an earlier ownership, if any
                if state is not None and batch:
                    with long_lived_objects():
                        self.runtime.load_groups(
                            state if len(batch) == read else self._of_shards(state, set(batch))
                        )
                for shard in batch:
                    self.shard_map.move(shard, ShardState.ACTIVE)
                    log.info("shard %d acquired (epoch %d)", shard, taken[shard])
                await asyncio.sleep(0)  # requests for the shards served so far go first
        finally:
            self.shard_map.on_wanted = None

    def _of_shards(self, state: LoadedState, shards: set[int]) -> LoadedState:
        """The rows of ``state`` that belong to ``shards`` (a shard lost during its read is left out)."""
        shard_of = self.shard_map.shard_of
        return dataclasses.replace(
            state,
            groups=[r for r in state.groups if shard_of(r.group_id) in shards],
            offsets=[r for r in state.offsets if shard_of(r.group_id) in shards],
            consumer_groups=[r for r in state.consumer_groups if shard_of(r.group_id) in shards],
            consumer_members=[r for r in state.consumer_members if shard_of(r.group_id) in shards],
            share_groups=[r for r in state.share_groups if shard_of(r.group_id) in shards],
            share_members=[r for r in state.share_members if shard_of(r.group_id) in shards],
            share_partitions=[r for r in state.share_partitions if shard_of(r.group_id) in shards],
            streams_groups=[r for r in state.streams_groups if shard_of(r.group_id) in shards],
            streams_members=[r for r in state.streams_members if shard_of(r.group_id) in shards],
            group_configs=[r for r in state.group_configs if shard_of(r.group_id) in shards],
            txn_offsets=[r for r in state.txn_offsets if shard_of(r.group_id) in shards],
        )

    async def _renewing_while(self, work: Awaitable[_T]) -> _T:
        """Await ``work`` while renewing the leases on schedule: reading many shards (or a
        database that has not been analysed yet) can take longer than a lease, and the leases
        being loaded must not expire meanwhile (this loop is the one that renews them)."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                wait_s = max(0.0, (self._next_renew_ms - self._now_ms()) / 1000)
                done, _pending = await asyncio.wait({task}, timeout=wait_s)
                if done:
                    return task.result()
                await self._renew()
        except BaseException:
            task.cancel()
            raise

    async def _release(self, shards: list[int]) -> None:
        """Graceful hand-over: stop answering, flush, unload, give the leases back."""
        releasing = {shard: self.owned[shard] for shard in shards if shard in self.owned}
        if not releasing:
            return
        self._releasing.update(releasing)
        try:
            for shard in releasing:
                self.shard_map.close(shard)  # requests for it get NOT_COORDINATOR
            await self._flush()
            self._unload_groups(releasing)
            await self._flush()  # what the unload answered or wrote
            still = {
                shard: owned.epoch for shard, owned in releasing.items() if self.owned.get(shard) is owned
            }
            for shard in still:
                del self.owned[shard]
                self.fence.epochs.pop(shard, None)
            if still:
                await self.leases.release(still)
            for shard, epoch in sorted(still.items()):
                log.info("shard %d released (epoch %d)", shard, epoch)
        finally:
            self._releasing.difference_update(releasing)

    async def _give_back(self, shard: int, *, failed: bool = False) -> None:
        if failed and self.shard_map.state(shard) is ShardState.LOADING:
            self.shard_map.move(shard, ShardState.FAILED)
        owned = self.owned.pop(shard, None)
        self.fence.epochs.pop(shard, None)
        self.shard_map.close(shard)
        if owned is not None:
            with contextlib.suppress(StoreError):  # else the lease expires on its own
                await self.leases.release({shard: owned.epoch})

    async def _flush(self) -> None:
        # The barrier completes once every earlier write was attempted; failed ones were answered.
        with contextlib.suppress(StoreError):
            await self.runtime.writer.write([])

    async def _refresh_topics(self) -> None:
        """Topics created or deleted through other nodes (consumer groups assign from the
        catalog). The offsets of a deleted topic held here are tombstoned, as the deleting node
        did for its own groups: a commit that landed here before this node learnt of the
        deletion does not outlive it."""
        before = dict(self.cluster.topics)
        stored = await self.leases.topics()
        self.cluster.merge_topics(stored)
        names = {topic.name for topic in stored}
        # Only topics known before the read: one created here meanwhile is not a deletion.
        gone = sorted(n for n, t in before.items() if n not in names and self.cluster.topics.get(n) is t)
        if gone:
            log.info("topics deleted through another node: %s", ", ".join(gone[:10]))
            self.cluster.forget_topics(gone)
            clock = self.runtime.clock
            self.runtime.apply(self.runtime.coordinator.delete_topics(gone, clock.now_ms(), clock.wall_ms()))
        self._catalog_version = self.cluster.version

    async def _refresh_acls(self, version: int) -> None:
        """ACLs changed through any node (this one included) since the last read."""
        on_acls = self.on_acls
        if on_acls is None:
            self._acls_version = version
            return
        try:
            acls = await self.leases.acls()
        except StoreError as exc:
            self._storage_failed(exc)
            return
        on_acls(acls)
        self._acls_version = version

    async def _refresh_group_configs(self, version: int) -> None:
        """Group configs changed through a node not owning the group: the overrides of the groups
        served here are read again and take effect as a local change would (a member's next
        heartbeat sees its group's new session timeout)."""
        group_configs = self.runtime.coordinator.group_configs
        applied = group_configs.applied
        try:
            stored = await self.leases.group_configs()
        except StoreError as exc:
            self._storage_failed(exc)
            return
        if group_configs.applied != applied:
            return  # a local change landed while reading: the snapshot may predate it, read again
        now_ms = self.runtime.clock.now_ms()
        loading = False  # a shard still loading may have read the rows before the change

        def held(group_id: str) -> bool:
            nonlocal loading
            status = self.shard_map.status(group_id, now_ms)
            loading = loading or status not in (ShardState.ACTIVE, None)
            return status is ShardState.ACTIVE

        if group_configs.reload(stored, held) and not loading:
            self._group_configs_version = version

    # -- losing shards ---------------------------------------------------------------------

    def _fenced(self, shards: frozenset[int]) -> None:
        mine = [shard for shard in shards if shard in self.owned]
        if mine:
            self._lose(mine, "a write was refused: another node holds the lease")

    def _lose(self, shards: Collection[int], reason: str) -> None:
        """Step down at once (logged once per shard): nothing of ours lands for them any more."""
        for shard in sorted(shards):
            owned = self.owned.pop(shard, None)
            self.fence.epochs.pop(shard, None)
            self.shard_map.close(shard)
            if owned is not None:
                log.warning("shard %d lost (epoch %d): %s", shard, owned.epoch, reason)
        self._unload_groups(shards)
        # A write that landed before the takeover may still report back and re-add some state
        # of these groups: sweep them again once every write in flight has been answered.
        sweep = asyncio.get_running_loop().create_task(self._sweep(set(shards)))
        self._sweeps.add(sweep)
        sweep.add_done_callback(self._sweeps.discard)

    async def _sweep(self, shards: set[int]) -> None:
        await self._flush()
        self._unload_groups(shards - self.owned.keys())

    def _unload_groups(self, shards: Collection[int]) -> None:
        wanted = set(shards)
        coordinator = self.runtime.coordinator
        ids = {g for g in coordinator.held_group_ids() if self.shard_map.shard_of(g) in wanted}
        if ids:
            self.runtime.apply(coordinator.unload_groups(ids, self.runtime.clock.now_ms()))

    def _storage_failed(self, exc: StoreError) -> None:
        if not self._failing:
            self._failing = True
            log.error("shard ownership: PostgreSQL unreachable, retrying every poll: %s", exc)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            log.warning("shard ownership: PostgreSQL answers again")
