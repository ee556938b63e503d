"""Which node answers for which shard, as this node knows it (docs/multinode.md).

One process on SQLite or memory holds every shard (``ShardMap.single_node``); it serves as soon as
its unsharded state and group ids are read and loads its shards in the background, ``loading`` holding those not
loaded yet (docs/performance.md#loading-in-the-background). On PostgreSQL the
server's ownership loop keeps the map up to date from the lease table: the shards this node is
loading or serving, the owner of every other shard, the live nodes and their addresses, and the
monotonic time until which this node's leases are surely valid. The API layer reads it to route
group requests; the cluster view reads it for FindCoordinator, Metadata and DescribeCluster.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from coordinator.core.sharding import shard_of

_CACHED_IDS: Final = 65536  # group ids whose shard is remembered (the hash is pure Python)


class ShardStatus(enum.Enum):
    LOADING = "loading"
    SERVING = "serving"


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
    local: dict[int, ShardStatus] = field(default_factory=dict)
    owners: dict[int, int] = field(default_factory=dict)  # other nodes' live shards
    nodes: dict[int, NodeAddress] = field(default_factory=dict)  # live nodes, this one included
    # Monotonic ms until which the leases of ``local`` shards are known to hold.
    valid_until_ms: int = 0
    # One process: the shards not loaded yet, and who to tell when a request needs one of them
    # (it moves to the front of the loading queue). Empty once every shard is loaded.
    loading: set[int] = field(default_factory=set)
    on_wanted: Callable[[int], None] | None = None
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

    def status(self, group_id: str, now_ms: int) -> ShardStatus | None:
        """SERVING or LOADING when this node answers for the group's shard now, else None."""
        if self.single_node:
            if self.loading and self.shard_of(group_id) in self.loading:
                return ShardStatus.LOADING
            return ShardStatus.SERVING
        status = self.local.get(self.shard_of(group_id))
        if status is None or now_ms >= self.valid_until_ms:
            return None
        return status

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
        if shard in self.local:
            return self.node_id if now_ms < self.valid_until_ms else None
        return self.owners.get(shard)

    def live_nodes(self) -> list[NodeAddress]:
        return [self.nodes[node_id] for node_id in sorted(self.nodes)]
