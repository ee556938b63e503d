"""One multi-node scenario: nodes on a database, groups of real clients committing, the checks.

The test functions in ``test_failover.py`` drive the nodes (kill, pause, restart, scale) between
``begin()`` and ``finish()``; ``finish()`` stops the clients and asserts the invariants that hold
for every scenario: no acknowledged commit lost, no partition owned by two members at once, no
member loop crashed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.multinode.support import (
    GroupSnapshot,
    GroupSpec,
    Nodes,
    Workload,
    create_group_topics,
    double_ownership,
    group_snapshot,
    lost_commits,
    shard_of,
    wait_for,
)

SHARDS = 12
LEASE_MS = 2000
POLL_MS = 100
SESSION_TIMEOUT_MS = 10_000  # well above the lease: a failover never expires a member
NODE_SETTINGS = {
    "offsets-topic-num-partitions": str(SHARDS),
    "group-coordinator-lease-ms": str(LEASE_MS),
    "group-coordinator-ownership-poll-ms": str(POLL_MS),
    "offsets-commit-timeout-ms": "3000",
}
CLIENT_TIMING = {
    "session_timeout_ms": SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": 500,
    "rebalance_timeout_ms": 20_000,
    "request_timeout_ms": 5000,
    "commit_interval_ms": 150,
}
# (library, protocol) of the groups, round-robin: every client and both protocols in every test.
FLAVOURS = (
    ("kafka-python", "classic"),
    ("aiokafka", "classic"),
    ("confluent", "classic"),
    ("confluent", "consumer"),
)
SETTLE_S = 60.0
_SESSION_TIMEOUT = re.compile(r"^group \S+: session timeout of member (\S+)")


def group_specs(count: int, members: int = 2, partitions: int = 4) -> list[GroupSpec]:
    specs = []
    for i in range(count):
        lib, protocol = FLAVOURS[i % len(FLAVOURS)]
        specs.append(GroupSpec(f"group-{i}", f"topic-{i}", lib, protocol, members, partitions))
    return specs


@dataclass
class Scenario:
    nodes: Nodes
    workload: Workload
    before: dict[str, GroupSnapshot] = field(default_factory=dict)

    @classmethod
    def create(cls, database: str, node_count: int, groups: list[GroupSpec], events_dir: Path) -> Scenario:
        return cls(Nodes(database, NODE_SETTINGS, node_count), Workload(groups, events_dir))

    def begin(self, running: list[int] | None = None) -> None:
        """Start the nodes (node 1 first: it creates the topics, the others load them), the
        clients, and wait until every group is Stable with every partition owned and committed."""
        ids = running or list(self.nodes.nodes)
        first = self.nodes.start(ids[0])
        create_group_topics(first.bootstrap, self.workload.groups)
        for node_id in ids[1:]:
            self.nodes.start(node_id, wait_ready=False)
        for node_id in ids[1:]:
            self.nodes.wait_ready(self.nodes.nodes[node_id])
        wait_for(lambda: self.nodes.owners_balanced(SHARDS, ids), SETTLE_S, f"shards balanced over {ids}")
        self.workload.start(self.nodes.bootstrap, CLIENT_TIMING)
        wait_for(self.workload.settled, SETTLE_S, "every group's partitions owned", interval=0.2)
        started = time.time()
        wait_for(lambda: self.all_acked_since(started), SETTLE_S, "a commit of every group", interval=0.2)
        # A client may still rejoin once after its first assignment (kafka-python does when its
        # metadata arrives after the join): the baseline is taken once every group is Stable.
        self.before = wait_for(self._stable_snapshots, SETTLE_S, "every group Stable", interval=0.5)

    def _stable_snapshots(self) -> dict[str, GroupSnapshot] | None:
        if not self.workload.settled():
            return None
        snapshots = self.snapshots()
        return snapshots if all(s.state == "Stable" for s in snapshots.values()) else None

    def groups_of(self, node_id: int, owners: dict[int, int | None]) -> list[str]:
        return [s.group for s in self.workload.groups if owners.get(shard_of(s.group, SHARDS)) == node_id]

    def all_acked_since(self, since: float) -> bool:
        return len(self.workload.acks_since(since)) == len(self.workload.groups)

    def served_again(self, since: float, timeout: float = SETTLE_S) -> float:
        """Seconds from ``since`` until every group had a commit acknowledged after it."""
        wait_for(
            lambda: self.all_acked_since(since), timeout, "a commit of every group after the event", 0.05
        )
        return max(self.workload.acks_since(since).values()) - since

    def expired_after_a_full_session(self, group: str, since: float) -> bool:
        """Whether ``group`` changed since ``since`` only because its new coordinator expired
        members, each at least a whole session after that node acquired the group's shard: the
        coordinator kept its side of the hand-over (docs/multinode.md), the members did not reach
        it in time (docs/multinode-testing.md#findings).

        The first rebalance of the group since ``since`` must be caused by a session timeout, and
        every member of the baseline the group no longer has must have timed out that way."""
        shard = shard_of(group, SHARDS)
        acquired = f"shard {shard} acquired "
        expiries: dict[str, float] = {}
        first_cause: tuple[float, str] | None = None
        for node in self.nodes.nodes.values():
            taken_at: float | None = None
            for at, message in node.timed_lines():
                if message.startswith(acquired):
                    taken_at = at if at >= since else None
                if at < since or not message.startswith(f"group {group}: "):
                    continue
                if "preparing to rebalance" in message and (first_cause is None or at < first_cause[0]):
                    first_cause = (at, message)
                expired = _SESSION_TIMEOUT.search(message)
                if expired and taken_at is not None and at - taken_at >= SESSION_TIMEOUT_MS / 1000 - 0.1:
                    expiries[expired.group(1)] = at
        protocol = next(s.protocol for s in self.workload.groups if s.group == group)
        gone = self.before[group].members - group_snapshot(self.nodes, group, protocol).members
        return (
            first_cause is not None
            and "(reason: session timeout of member " in first_cause[1]
            and bool(gone)
            and gone <= expiries.keys()
        )

    def snapshots(self) -> dict[str, GroupSnapshot]:
        protocols = {s.group: s.protocol for s in self.workload.groups}
        return {group: group_snapshot(self.nodes, group, protocol) for group, protocol in protocols.items()}

    def assert_no_rebalance(self, since: float, exempt: frozenset[str] = frozenset()) -> set[str]:
        """Every group but ``exempt`` as before (state, generation or epoch, members), and none of
        their members saw its assignment change since ``since``; the exempt groups that changed."""
        after = self.snapshots()
        changed = {g: (self.before[g], after[g]) for g in after if after[g] != self.before[g]}
        unexpected = {g: c for g, c in changed.items() if g not in exempt}
        assert not unexpected, f"groups changed across the event (before, after): {unexpected}"
        moves = [
            e for e in self.workload.ownership_changes_between(since, time.time()) if e["g"] not in exempt
        ]
        assert not moves, f"members' assignments changed: {moves[:5]}"
        return set(changed)

    def finish(self) -> int:
        """Stop the clients and check the invariants; the number of partitions checked."""
        self.workload.stop()
        events = self.workload.events()
        crashes = self.workload.crashes()
        assert not crashes, f"member loops crashed: {crashes}\n{self.workload.stderr_tail()}"
        late_revoke = frozenset(
            s.group for s in self.workload.groups if (s.lib, s.protocol) == ("confluent", "consumer")
        )
        overlaps = double_ownership(events, late_revoke)
        assert not overlaps, overlaps
        lost, checked = lost_commits(self.nodes, self.workload)
        assert not lost, f"acknowledged commits lost: {lost}"
        assert checked >= sum(s.partitions for s in self.workload.groups)
        return checked
