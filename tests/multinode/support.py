"""Several coordinator nodes on one throwaway PostgreSQL, client workloads, and the invariants.

- ``Nodes``: coordinator subprocesses on fixed loopback ports (picked once, so a restarted node
  comes back at the same address and the clients' bootstrap list stays valid), each with its own
  ``--node-id``; started, SIGKILLed, SIGSTOPped, SIGCONTed, SIGTERMed and restarted by PID.
  Ready means the node logged ``node N ready:`` (docs/multinode.md).
- ``Workload``: processes of ``tests/multinode/workload.py``, one per client library and protocol,
  each hosting several group members that commit continuously and log every acknowledged commit
  and every ownership change.
- The checks: ``lost_commits`` (every acknowledged commit is still there, read back with
  OffsetFetch from the group's coordinator), ``double_ownership`` (no partition owned by two
  members at once, from the members' own logs), ``group_snapshot`` (state, generation or epoch
  and members of each group, to compare before and after a failover).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from protocol.apis import ApiKey
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from tests.durability.support import create_topics
from tests.support.ports import free_port
from tests.support.server import REPO, START_TIMEOUT_S, ServerProcess, start_server
from tests.support.wire_client import WireClient

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
RETRIABLE_GROUP_ERRORS = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})

_READY = re.compile(r"node (\d+) ready: owning (\d+) of (\d+) shards \((\d+) live nodes?\)")
_SHARD_EVENT = re.compile(r"shard (\d+) (acquired|released|lost) \(epoch (\d+)\)")
_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \S+ \S+: (.*)$", re.MULTILINE)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def java_string_hash(text: str) -> int:
    encoded = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(encoded), 2):
        h = (31 * h + int.from_bytes(encoded[i : i + 2], "big")) & 0xFFFFFFFF
    return h


def shard_of(group: str, shards: int) -> int:
    """Kafka's partitionFor: (hashCode & 0x7fffffff) % partitions."""
    return (java_string_hash(group) & 0x7FFFFFFF) % shards


# --------------------------------------------------------------------------------------------
# PostgreSQL


def run_sql(dsn: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    async def query() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn, timeout=10)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(query())


def lease_owners(dsn: str) -> dict[int, int | None]:
    """{shard: owning node id} from the lease table (None: free)."""
    return {row["shard"]: row["owner"] for row in run_sql(dsn, "SELECT shard, owner FROM shard_leases")}


def live_owners(dsn: str) -> dict[int, int | None]:
    """Like lease_owners, but a lease past its expiry (by the database clock) counts as free."""
    rows = run_sql(
        dsn, "SELECT shard, CASE WHEN expires_at > now() THEN owner END AS owner FROM shard_leases"
    )
    return {row["shard"]: row["owner"] for row in rows}


# --------------------------------------------------------------------------------------------
# Nodes


@dataclass
class Node:
    node_id: int
    port: int
    server: ServerProcess | None = None
    paused: bool = False
    # Log lines of earlier incarnations of this node (a restart starts a new process).
    history: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.server is not None
        return self.server.process.pid

    @property
    def running(self) -> bool:
        return self.server is not None and self.server.process.poll() is None

    def log_text(self) -> str:
        return "".join(self.history) + (self.server.log_text() if self.server is not None else "")

    def current_log(self) -> str:
        return self.server.log_text() if self.server is not None else ""

    def timed_lines(self) -> list[tuple[float, str]]:
        """(wall-clock time, message) of every log line, over every incarnation (the node and the
        test share the host's clock and time zone)."""
        return [
            (time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000, message)
            for stamp, ms, message in _LOG_LINE.findall(self.log_text())
        ]

    def shard_events(self) -> list[tuple[int, str, int]]:
        """(shard, acquired|released|lost, epoch) in log order, over every incarnation."""
        return [(int(s), what, int(e)) for s, what, e in _SHARD_EVENT.findall(self.log_text())]


class Nodes:
    """Coordinator nodes on one database; ``close`` SIGKILLs whatever still runs, by PID."""

    def __init__(self, dsn: str, settings: dict[str, str], count: int) -> None:
        self.dsn = dsn
        self.settings = settings
        self.nodes = {node_id: Node(node_id, free_port()) for node_id in range(1, count + 1)}

    @property
    def bootstrap(self) -> str:
        """Every node's address: clients find a live one whichever are down."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    def live(self) -> list[Node]:
        return [node for node in self.nodes.values() if node.running and not node.paused]

    def any_live(self) -> Node:
        live = self.live()
        assert live, "no live node"
        return live[0]

    def start(self, node_id: int, *, wait_ready: bool = True, timeout: float = START_TIMEOUT_S) -> Node:
        node = self.nodes[node_id]
        assert not node.running, f"node {node_id} is already running"
        if node.server is not None:
            node.history.append(node.server.log_text())
        extra = {**self.settings, "node-id": str(node_id)}
        node.server = start_server(self.dsn, extra, port=node.port, timeout=timeout)
        node.paused = False
        if wait_ready:
            self.wait_ready(node, timeout)
        return node

    def start_all(self, timeout: float = START_TIMEOUT_S) -> None:
        for node_id in self.nodes:
            self.start(node_id, wait_ready=False)
        for node in self.nodes.values():
            self.wait_ready(node, timeout)

    def wait_ready(self, node: Node, timeout: float = START_TIMEOUT_S) -> None:
        wait_for(
            lambda: _READY.search(node.current_log()) or not node.running,
            timeout,
            f"node {node.node_id} ready",
        )
        assert node.running, f"node {node.node_id} exited before it was ready:\n{node.current_log()}"

    def send(self, node_id: int, sig: int) -> Node:
        node = self.nodes[node_id]
        assert node.running, f"node {node_id} is not running"
        os.kill(node.pid, sig)
        if sig == signal.SIGSTOP:
            node.paused = True
        elif sig == signal.SIGCONT:
            node.paused = False
        return node

    def kill(self, node_id: int) -> Node:
        node = self.send(node_id, signal.SIGKILL)
        assert node.server is not None
        node.server.process.wait(10)
        return node

    def terminate(self, node_id: int, timeout: float = 30) -> int:
        """SIGTERM: the node hands its shards over, deregisters and exits; its exit status."""
        node = self.nodes[node_id]
        assert node.server is not None
        return node.server.stop(signal.SIGTERM, timeout=timeout)

    def restart(self, node_id: int, sig: int = signal.SIGTERM) -> Node:
        node = self.nodes[node_id]
        assert node.server is not None
        node.server.stop(sig, timeout=30)
        return self.start(node_id)

    def close(self) -> None:
        for node in self.nodes.values():
            if node.server is None:
                continue
            if node.running:
                if node.paused:
                    os.kill(node.pid, signal.SIGCONT)
                node.server.stop(signal.SIGKILL, timeout=10)
            else:
                node.server.stop(signal.SIGKILL, timeout=10)

    def owners_balanced(self, shards: int, node_ids: Iterable[int]) -> bool:
        """Every shard leased (unexpired) to one of ``node_ids``, each with its fair share."""
        ids = sorted(node_ids)
        owners = live_owners(self.dsn)
        if len(owners) != shards or any(owner not in ids for owner in owners.values()):
            return False
        counts = sorted(sum(1 for o in owners.values() if o == node_id) for node_id in ids)
        return counts[-1] - counts[0] <= 1


@contextmanager
def nodes_on(dsn: str, settings: dict[str, str], count: int) -> Iterator[Nodes]:
    nodes = Nodes(dsn, settings, count)
    try:
        yield nodes
    finally:
        nodes.close()


# --------------------------------------------------------------------------------------------
# Talking to the group's coordinator


def find_coordinator(bootstrap_nodes: Iterable[Node], group: str, timeout: float = 20) -> str:
    """The address FindCoordinator answers for ``group`` (asking live nodes until one knows)."""
    candidates = [node for node in bootstrap_nodes if node.running and not node.paused]

    def ask() -> str | None:
        for node in candidates:
            try:
                with WireClient(node.bootstrap, client_id="multinode-check", timeout=5) as client:
                    response = client.request(
                        ApiKey.FIND_COORDINATOR,
                        4,
                        FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                    )
            except OSError:
                continue
            [answer] = response.coordinators
            if answer.error_code == NONE:
                return f"{answer.host}:{answer.port}"
        return None

    found: str = wait_for(ask, timeout, f"the coordinator of {group}", interval=0.1)
    return found


def _on_coordinator(nodes: Nodes, group: str, call: Callable[[WireClient], Any], timeout: float = 20) -> Any:
    """Run ``call`` on the group's coordinator, looking it up again while it answers a retriable error."""

    def attempt() -> Any:
        address = find_coordinator(nodes.nodes.values(), group, timeout)
        try:
            with WireClient(address, client_id="multinode-check", timeout=5) as client:
                return call(client)
        except OSError:
            return None

    return wait_for(attempt, timeout, f"an answer about {group} from its coordinator", interval=0.1)


def fetch_offsets(nodes: Nodes, group: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """OffsetFetch v8 from the group's coordinator: {partition: committed offset}."""
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(
                group_id=group,
                topics=[OffsetFetchRequestTopics(name=topic, partition_indexes=sorted(partitions))],
            )
        ]
    )

    def call(client: WireClient) -> dict[int, int] | None:
        [answer] = client.request(ApiKey.OFFSET_FETCH, 8, request).groups
        if answer.error_code in RETRIABLE_GROUP_ERRORS:
            return None
        assert answer.error_code == NONE, f"OffsetFetch {group}: error {answer.error_code}"
        return {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions}

    result: dict[int, int] = _on_coordinator(nodes, group, call)
    return result


@dataclass(frozen=True)
class GroupSnapshot:
    state: str
    generation: int  # classic: generation id; consumer: group epoch (both read from the database)
    members: frozenset[str]
    member_epochs: tuple[tuple[str, int], ...] = ()  # consumer groups


def group_snapshot(nodes: Nodes, group: str, protocol: str) -> GroupSnapshot:
    """What the group's coordinator serves (state, members) and what is stored (generation)."""
    if protocol == "consumer":

        def call(client: WireClient) -> Any:
            [described] = client.request(
                ApiKey.CONSUMER_GROUP_DESCRIBE, 0, ConsumerGroupDescribeRequest(group_ids=[group])
            ).groups
            return None if described.error_code in RETRIABLE_GROUP_ERRORS else described

        described = _on_coordinator(nodes, group, call)
        assert described.error_code == NONE, f"ConsumerGroupDescribe {group}: error {described.error_code}"
        rows = run_sql(nodes.dsn, "SELECT group_epoch FROM consumer_groups WHERE group_id = $1", group)
        epochs = tuple(sorted((m.member_id, m.member_epoch) for m in described.members))
        return GroupSnapshot(
            described.group_state,
            rows[0]["group_epoch"] if rows else -1,
            frozenset(m.member_id for m in described.members),
            epochs,
        )

    def call_classic(client: WireClient) -> Any:
        [described] = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group])).groups
        return None if described.error_code in RETRIABLE_GROUP_ERRORS else described

    described = _on_coordinator(nodes, group, call_classic)
    assert described.error_code == NONE, f"DescribeGroups {group}: error {described.error_code}"
    rows = run_sql(nodes.dsn, "SELECT generation_id FROM groups WHERE group_id = $1", group)
    return GroupSnapshot(
        described.group_state,
        rows[0]["generation_id"] if rows else -1,
        frozenset(m.member_id for m in described.members),
    )


# --------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True)
class GroupSpec:
    group: str
    topic: str
    lib: str  # kafka-python | aiokafka | confluent
    protocol: str  # classic | consumer
    members: int
    partitions: int


@dataclass
class Workload:
    groups: list[GroupSpec]
    events_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, bootstrap: str, timing: dict[str, int]) -> None:
        by_process: dict[tuple[str, str], list[dict[str, str]]] = {}
        for spec in self.groups:
            for i in range(spec.members):
                name = f"{spec.group}-m{i}"
                by_process.setdefault((spec.lib, spec.protocol), []).append(
                    {"name": name, "group": spec.group, "topic": spec.topic}
                )
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        for (lib, protocol), members in by_process.items():
            config = {
                "lib": lib,
                "protocol": protocol,
                "bootstrap": bootstrap,
                "members": members,
                "events": str(self.events_dir / f"{lib}-{protocol}.jsonl"),
                **timing,
            }
            # The child gets its own copy of the descriptor: ours is closed at once.
            with open(self.events_dir / f"{lib}-{protocol}.stderr", "wb") as stderr:
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "tests.multinode.workload", json.dumps(config)],
                        cwd=REPO,
                        env=env,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL,
                        stderr=stderr,
                    )
                )

    def stop(self, timeout: float = 30) -> None:
        for process in self.processes:
            if process.stdin is not None and not process.stdin.closed:
                process.stdin.close()  # EOF: the members close and leave
        for process in self.processes:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def kill(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            if process.stdin is not None and not process.stdin.closed:
                process.stdin.close()

    def events(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for path in sorted(self.events_dir.glob("*.jsonl")):
            found.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
        found.sort(key=lambda e: e["t"])
        return found

    def stderr_tail(self, lines: int = 20) -> str:
        out = []
        for path in sorted(self.events_dir.glob("*.stderr")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            if text:
                out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    # -- views of the events --------------------------------------------------------------

    def acked(self) -> dict[tuple[str, int], int]:
        """{(group, partition): largest acknowledged offset}."""
        best: dict[tuple[str, int], int] = {}
        for event in self.events():
            if event["e"] == "acked":
                for partition, offset in event["offsets"].items():
                    key = (event["g"], int(partition))
                    best[key] = max(best.get(key, -1), offset)
        return best

    def ownership(self) -> dict[str, dict[str, frozenset[int]]]:
        """{group: {member: partitions owned now}}."""
        owned: dict[str, dict[str, frozenset[int]]] = {}
        for event in self.events():
            if event["e"] == "owns":
                owned.setdefault(event["g"], {})[event["m"]] = frozenset(event["parts"])
        return owned

    def settled(self) -> bool:
        """Every group's partitions owned, each by exactly one member, and every member committing."""
        owned = self.ownership()
        for spec in self.groups:
            members = owned.get(spec.group, {})
            counts = [len(p) for p in members.values()]
            if len(members) != spec.members or sum(counts) != spec.partitions:
                return False
            if frozenset().union(*members.values()) != frozenset(range(spec.partitions)):
                return False
        return True

    def acks_since(self, since: float) -> dict[str, float]:
        """{group: time of its first acknowledged commit after ``since``}."""
        first: dict[str, float] = {}
        for event in self.events():
            if event["e"] == "acked" and event["t"] > since and event["g"] not in first:
                first[event["g"]] = event["t"]
        return first

    def ownership_changes_between(self, start: float, end: float) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["e"] == "owns" and start <= e["t"] <= end]

    def crashes(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["e"] == "crashed"]


# librdkafka's KIP-848 consumer may deliver a revocation to its application a moment after its
# heartbeat stopped listing the partition (docs/multinode-testing.md#findings).
LATE_REVOKE_S = 1.0


def double_ownership(events: list[dict[str, Any]], late_revoke: frozenset[str] = frozenset()) -> list[str]:
    """Partitions owned by two members at the same moment, rebuilt from the ``owns`` events.

    In the groups of ``late_revoke`` an overlap is the client's late revocation callback, not a
    second owner, when the old owner gives the partition up within LATE_REVOKE_S and has no commit
    of it acknowledged that it made after the new owner took it (its offsets are the wall clock
    when it made them, workload.py: one made before and answered late is no second owner)."""
    problems: list[str] = []
    holder: dict[tuple[str, int], str] = {}
    current: dict[str, frozenset[int]] = {}
    # (group, partition, old owner) -> (new owner, when taken): overlaps still open
    open_overlaps: dict[tuple[str, int, str], tuple[str, float]] = {}

    def report(group: str, p: int, old: str, new: str, t: float, why: str = "") -> None:
        problems.append(f"{group} partition {p}: owned by {new} while {old} still owned it (t={t:.3f}){why}")

    for event in sorted(events, key=lambda e: e["t"]):
        member, group = event["m"], event["g"]
        if event["e"] == "acked":
            for p, offset in event["offsets"].items():
                overlap = open_overlaps.get((group, int(p), member))
                if overlap is not None and offset / 1e6 > overlap[1]:
                    del open_overlaps[(group, int(p), member)]
                    report(group, int(p), member, *overlap, ": and committed it after")
            continue
        if event["e"] != "owns":
            continue
        parts = frozenset(event["parts"])
        for p in current.get(member, frozenset()) - parts:
            overlap = open_overlaps.pop((group, p, member), None)
            if overlap is not None and event["t"] - overlap[1] > LATE_REVOKE_S:
                report(group, p, member, *overlap, f": given up {event['t'] - overlap[1]:.3f} s later")
            if holder.get((group, p)) == member:
                del holder[(group, p)]
        for p in parts - current.get(member, frozenset()):
            other = holder.get((group, p))
            if other is not None and other != member:
                if group in late_revoke:
                    open_overlaps[(group, p, other)] = (member, event["t"])
                else:
                    report(group, p, other, member, event["t"])
            holder[(group, p)] = member
        current[member] = parts
    for (group, p, old), (new, t) in open_overlaps.items():
        report(group, p, old, new, t, ": never given up")
    return problems


def lost_commits(nodes: Nodes, workload: Workload) -> tuple[list[str], int]:
    """Acknowledged commits missing from what the coordinators serve; and how many keys were checked."""
    acked = workload.acked()
    problems: list[str] = []
    for spec in workload.groups:
        expected = {p: acked[(spec.group, p)] for p in range(spec.partitions) if (spec.group, p) in acked}
        if not expected:
            continue
        stored = fetch_offsets(nodes, spec.group, spec.topic, expected)
        for partition, offset in expected.items():
            got = stored.get(partition, -1)
            if got < offset:
                problems.append(f"{spec.group}/{partition}: acknowledged {offset}, served {got}")
    return problems, len(acked)


def create_group_topics(bootstrap: str, groups: Iterable[GroupSpec]) -> None:
    create_topics(bootstrap, {spec.topic: spec.partitions for spec in groups})
