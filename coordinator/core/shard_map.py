"""Which node answers for which shard, as this node knows it (docs/multinode.md).

One process on SQLite or memory holds every shard (``ShardMap.single_node``); it serves as soon as
its unsharded state and group ids are read and loads its shards in the background, ``loading`` holding those not
loaded yet (docs/performance.md#loading-in-the-background). On PostgreSQL the
server's ownership loop keeps the map up to date from the lease table: the shards this node is
loading or serving, the owner of every other shard, the live nodes and their addresses, and the
monotonic time until which this node's leases are surely valid. The API layer reads it to route
group requests; the cluster view reads it for FindCoordinator, Metadata and DescribeCluster.

Each shard of this node is in one ``ShardState`` (Kafka's coordinator keeps the same five per
``__consumer_offsets`` partition), moved only along ``SHARD_TRANSITIONS``: the shard gate, the
dispatcher's waiting requests, /readyz, the loader and the ownership loop all read it here
(docs/architecture.md#shard-states).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from coordinator.core.sharding import shard_of

_CACHED_IDS: Final = 65536  # group ids whose shard is remembered (the hash is pure Python)


class ShardState(enum.Enum):
    INITIAL = "initial"  # not this node's (yet): its groups are NOT_COORDINATOR here
    LOADING = "loading"  # this node's; its groups are being read (COORDINATOR_LOAD_IN_PROGRESS)
    ACTIVE = "active"  # this node's, loaded: its groups are served
    FAILED = "failed"  # reading its groups failed; retried or given back (COORDINATOR_LOAD_IN_PROGRESS)
    CLOSED = "closed"  # released, handed over or lost: NOT_COORDINATOR until taken again


_I, _L, _A, _F, _C = ShardState
SHARD_TRANSITIONS: Final[Mapping[ShardState, frozenset[ShardState]]] = {
    # A single node's shard without a stored group is active at once.
    _I: frozenset({_L, _A}),
    _L: frozenset({_A, _F, _C}),
    _F: frozenset({_L, _C}),
    _A: frozenset({_C}),
    _C: frozenset({_L}),
}
HELD: Final = frozenset({_L, _A, _F})  # this node answers for the shard (or will, once loaded)


class ShardStateError(Exception):
    """A move the table does not allow (a bug in the caller)."""


@dataclass(frozen=True, slots=True)
class NodeAddress:
    node_id: int
    host: str
    port: int


@dataclass(slots=True)
class ShardMap:
    shards: int
    node_id: int
    # Every shard is this process's for good (SQLite, memory): nothing is checked.
    single_node: bool = False
    states: dict[int, ShardState] = field(default_factory=dict)  # absent: INITIAL
    owners: dict[int, int] = field(default_factory=dict)  # other nodes' live shards
    nodes: dict[int, NodeAddress] = field(default_factory=dict)  # live nodes, this one included
    # Every shard's lease epoch as last seen (this node's own from when it took them): the
    # leader epoch of the share-partition leader hints (docs/share-groups.md, "Several nodes").
    epochs: dict[int, int] = field(default_factory=dict)
    # Monotonic ms until which the leases of ``local`` shards are known to hold.
    valid_until_ms: int = 0
    # The shards LOADING or FAILED (kept by ``move``: read it, never write it), and who to tell
    # when a request needs one of them (it moves to the front of the loading queue).
    loading: set[int] = field(default_factory=set)
    on_wanted: Callable[[int], None] | None = None
    # Several nodes: the ownership loop has taken and loaded this node's first share.
    share_loaded: bool = False
    _cache: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def for_one_process(cls, shards: int, node_id: int) -> ShardMap:
        return cls(shards, node_id, single_node=True)

    def shard_of(self, group_id: str) -> int:
        found = self._cache.get(group_id)
        if found is None:
            if len(self._cache) >= _CACHED_IDS:
                self._cache.clear()
            found = self._cache[group_id] = shard_of(group_id, self.shards)
        return found

    # ---- shard states ----------------------------------------------------------------------
    def state(self, shard: int) -> ShardState:
        return self.states.get(shard, ShardState.INITIAL)

    def move(self, shard: int, to: ShardState) -> None:
        """Move ``shard`` to ``to`` along SHARD_TRANSITIONS (staying put is allowed)."""
        current = self.state(shard)
        if to is current:
            return
        if to not in SHARD_TRANSITIONS[current]:
            raise ShardStateError(f"shard {shard}: {current.value} -> {to.value} is not allowed")
        self.states[shard] = to
        if to is ShardState.LOADING or to is ShardState.FAILED:
            self.loading.add(shard)
        else:
            self.loading.discard(shard)

    def close(self, shard: int) -> None:
        """This node stops answering for ``shard`` (a no-op when it did not)."""
        if self.state(shard) in HELD:
            self.move(shard, ShardState.CLOSED)

    @property
    def local(self) -> dict[int, ShardState]:
        """The shards this node answers for (or will, once loaded)."""
        return {shard: state for shard, state in self.states.items() if state in HELD}

    @property
    def ready(self) -> bool:
        """/readyz: one process has loaded every shard; several nodes, this node's first share."""
        if not self.single_node:
            return self.share_loaded
        return not self.loading and len(self.states) == self.shards

    def status(self, group_id: str, now_ms: int) -> ShardState | None:
        """The state of the group's shard when this node answers for it now (ACTIVE, LOADING or
        FAILED), else None."""
        if self.single_node:
            if self.loading and self.shard_of(group_id) in self.loading:
                return self.state(self.shard_of(group_id))
            return ShardState.ACTIVE
        state = self.states.get(self.shard_of(group_id))
        if state is None or state not in HELD or now_ms >= self.valid_until_ms:
            return None
        return state

    def want(self, group_id: str) -> None:
        """A request waits for the group's shard: load it next (a no-op when nothing is loading;
        the loader ignores a shard it does not load)."""
        if self.on_wanted is not None:
            self.on_wanted(self.shard_of(group_id))

    def owner(self, group_id: str, now_ms: int) -> int | None:
        """The node answering for the group, or None while its shard has no live owner."""
        if self.single_node:
            return self.node_id
        shard = self.shard_of(group_id)
        if self.state(shard) in HELD:
            return self.node_id if now_ms < self.valid_until_ms else None
        return self.owners.get(shard)

    def leader(self, group_id: str, now_ms: int) -> tuple[NodeAddress | None, int]:
        """The live node answering for the group (None while nobody does) and its shard's lease
        epoch, which grows with every change of owner."""
        owner = self.owner(group_id, now_ms)
        address = None if owner is None else self.nodes.get(owner)
        return address, self.epochs.get(self.shard_of(group_id), 0)

    def live_nodes(self) -> list[NodeAddress]:
        return [self.nodes[node_id] for node_id in sorted(self.nodes)]
