"""Several coordinator processes on one PostgreSQL (docs/multinode.md): shards are split, requests
are routed to the owner, a killed node's shards move at once, a paused one's after its lease, and
a node that comes back from a pause writes nothing more. Short leases keep it quick."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import asyncpg
import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.durability.support import (
    Fetched,
    Servers,
    commit,
    create_topics,
    fetch,
    servers,
    wait_for,
    wait_for_log,
)
from tests.storage.pg_server import PgServer
from tests.support.server import REPO, START_TIMEOUT_S, ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.timeout(120)]

LEASE_MS = 1500
NODE_SETTINGS = {
    "group-coordinator-lease-ms": str(LEASE_MS),
    "group-coordinator-ownership-poll-ms": "100",
    "offsets-commit-timeout-ms": "3000",
}
GROUPS = [f"group-{i}" for i in range(40)]
# How long a multi-process state (nodes, PostgreSQL) may take to settle on a loaded machine: the
# conditions are polled, so a passing run never waits this out.
SETTLE_S = 30.0
NONE = int(ErrorCode.NONE)
NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
LOADING = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
RETRIABLE = {
    int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
    int(ErrorCode.NOT_COORDINATOR),
    int(ErrorCode.REQUEST_TIMED_OUT),
    LOADING,
}


@pytest.fixture
def nodes() -> Iterator[Servers]:
    with servers() as started:
        yield started


def start_node(nodes: Servers, dsn: str, node_id: int, lease_ms: int = LEASE_MS) -> ServerProcess:
    settings = {**NODE_SETTINGS, "group-coordinator-lease-ms": str(lease_ms), "node-id": str(node_id)}
    node = nodes.start(dsn, settings, wait_loaded=False)
    wait_for_log(node, f"node {node_id} ready", timeout=START_TIMEOUT_S)
    return node


def owners(node: ServerProcess, groups: list[str]) -> dict[str, int]:
    """FindCoordinator v4 for every group, asked of ``node``: group -> owner node id (-1: none)."""
    with WireClient(node.bootstrap) as client:
        response = client.request(
            ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=groups)
        )
    return {c.key: c.node_id if c.error_code == NONE else -1 for c in response.coordinators}


def shard_counts(node: ServerProcess) -> tuple[int, int]:
    """(acquired, given up) shard log lines of a node so far."""
    text = node.log_text()
    return len(re.findall(r"shard \d+ acquired", text)), len(re.findall(r"shard \d+ (?:released|lost)", text))


def loaded_fetch(client: WireClient, group: str) -> Fetched:
    """OffsetFetch of t-0, retried while the group's shard is still loading."""
    answer: Fetched = wait_for(
        lambda: (found := fetch(client, group, [("t", 0)])).error_code != LOADING and found,
        SETTLE_S,
        f"the shard of {group} to be loaded",
    )
    assert answer.error_code == NONE, answer
    return answer


def owned_now(node: ServerProcess) -> int:
    acquired, gone = shard_counts(node)
    return acquired - gone


def settled(a: ServerProcess, b: ServerProcess) -> bool:
    """25 shards on each node, and both nodes name the same owners (they learn of each other's
    shards within a poll)."""
    if not (owned_now(a) == 25 and owned_now(b) == 25):
        return False
    seen = owners(a, GROUPS)
    return seen == owners(b, GROUPS) and set(seen.values()) == {1, 2}


async def _stored_offset(dsn: str, group: str) -> int | None:
    conn = await asyncpg.connect(dsn)
    try:
        value: int | None = await conn.fetchval(
            "SELECT committed_offset FROM offsets WHERE group_id = $1 AND topic = 't' AND partition = 0",
            group,
        )
        return value
    finally:
        await conn.close()


def test_two_nodes_split_the_shards_and_route_to_the_owner(nodes: Servers, pg_dsn: str) -> None:
    one = start_node(nodes, pg_dsn, 1)
    assert owned_now(one) == 50
    create_topics(one.bootstrap, {"t": 1})  # (other nodes learn of new topics within a poll)
    two = start_node(nodes, pg_dsn, 2)
    wait_for(lambda: settled(one, two), SETTLE_S, "25 shards on each node")
    seen_by_one = owners(one, GROUPS)
    node = {1: one, 2: two}
    for group, owner in seen_by_one.items():
        other = node[3 - owner]
        with WireClient(other.bootstrap) as client:
            assert commit(client, group, {("t", 0): 5}) == {("t", 0): NOT_COORDINATOR}
            assert fetch(client, group, [("t", 0)]).error_code == NOT_COORDINATOR
        with WireClient(node[owner].bootstrap) as client:
            assert commit(client, group, {("t", 0): 7}) == {("t", 0): NONE}
            assert fetch(client, group, [("t", 0)]).offsets == {("t", 0): 7}
    # Metadata and DescribeCluster name both nodes; SIGTERM hands node 2's shards to node 1.
    two.stop()
    assert "node 2 deregistered" in two.log_text()
    wait_for(lambda: set(owners(one, GROUPS).values()) == {1}, SETTLE_S, "node 1 to own every shard")
    with WireClient(one.bootstrap) as client:
        for group in GROUPS:
            assert loaded_fetch(client, group).offsets == {("t", 0): 7}


def test_a_killed_nodes_shards_move_at_once(nodes: Servers, pg_dsn: str) -> None:
    # A long lease: the hand-over must not wait for it (the dead node's session is gone). Half of
    # it is the bound, long enough for a loaded machine and far below the lease.
    lease_ms = 30_000
    one = start_node(nodes, pg_dsn, 1, lease_ms)
    create_topics(one.bootstrap, {"t": 1})
    two = start_node(nodes, pg_dsn, 2, lease_ms)
    wait_for(lambda: settled(one, two), SETTLE_S, "25 shards on each node")
    on_two = [group for group, owner in owners(one, GROUPS).items() if owner == 2]
    with WireClient(two.bootstrap) as client:
        for group in on_two:
            assert commit(client, group, {("t", 0): 11}) == {("t", 0): NONE}
    two.kill()
    killed = time.monotonic()
    wait_for(lambda: set(owners(one, on_two).values()) == {1}, lease_ms / 2000, "node 1 to take every shard")
    assert time.monotonic() - killed < lease_ms / 2000  # did not wait for the leases to expire
    with WireClient(one.bootstrap) as client:
        for group in on_two:
            assert loaded_fetch(client, group).offsets == {("t", 0): 11}


def test_a_paused_node_loses_its_shards_and_writes_nothing_after_the_takeover(
    nodes: Servers, pg_dsn: str
) -> None:
    one = start_node(nodes, pg_dsn, 1)
    create_topics(one.bootstrap, {"t": 1})
    two = start_node(nodes, pg_dsn, 2)
    wait_for(lambda: settled(one, two), SETTLE_S, "25 shards on each node")
    group = next(group for group, owner in owners(one, GROUPS).items() if owner == 2)
    zombie_client = WireClient(two.bootstrap)
    try:
        assert commit(zombie_client, group, {("t", 0): 1}) == {("t", 0): NONE}
        two.process.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        wait_for(lambda: owners(one, [group])[group] == 1, SETTLE_S, "node 1 to take the shard")
        assert time.monotonic() - paused >= LEASE_MS / 1000 * 0.9  # a hung node's lease runs out first
        with WireClient(one.bootstrap) as client:
            wait_for(
                lambda: commit(client, group, {("t", 0): 2}) == {("t", 0): NONE},
                SETTLE_S,
                "a commit on node 1",
            )
        # A commit reaches the paused node; it runs when the node wakes up.
        zombie_client.sock.settimeout(10)
        answer: dict[tuple[str, int], int] = {}

        def zombie_commit() -> None:
            answer.update(commit(zombie_client, group, {("t", 0): 99}))

        thread = threading.Thread(target=zombie_commit)
        thread.start()
        time.sleep(0.2)
        two.process.send_signal(signal.SIGCONT)
        thread.join(10)
        assert answer == {("t", 0): NOT_COORDINATOR}
    finally:
        zombie_client.close()
        if two.process.poll() is None:
            two.process.send_signal(signal.SIGCONT)
    wait_for_log(two, "lost (epoch", timeout=SETTLE_S)
    assert asyncio.run(_stored_offset(pg_dsn, group)) == 2
    with WireClient(one.bootstrap) as client:
        assert fetch(client, group, [("t", 0)]).offsets == {("t", 0): 2}
    # The node that came back takes its share again through a graceful hand-over.
    wait_for(lambda: owned_now(two) == 25, SETTLE_S, "node 2 to own its share again")


def test_a_node_id_in_use_is_refused(nodes: Servers, pg_dsn: str) -> None:
    start_node(nodes, pg_dsn, 1)
    argv = [
        sys.executable,
        "-m",
        "coordinator",
        "serve",
        "--port",
        "0",
        "--storage",
        pg_dsn,
        "--node-id",
        "1",
    ]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert "cannot start: node id 1 is already in use by a live node (advertised 127.0.0.1:" in done.stderr


def test_leases_recover_after_a_postgres_restart(nodes: Servers, pg_dsn: str, pg_server: PgServer) -> None:
    one = start_node(nodes, pg_dsn, 1)
    create_topics(one.bootstrap, {"t": 1})
    two = start_node(nodes, pg_dsn, 2)
    wait_for(lambda: settled(one, two), SETTLE_S, "25 shards on each node")
    pg_server.stop("fast")
    try:
        time.sleep(0.5)
        with WireClient(one.bootstrap) as client:
            codes = commit(client, GROUPS[0], {("t", 0): 3})
        assert codes[("t", 0)] in RETRIABLE, codes  # whichever node owns it: retriable errors only
    finally:
        pg_server.start()
    # Within the lease both nodes reconnect and renew; every group is served again.
    node = {1: one, 2: two}

    def every_group_served() -> bool:
        found = owners(one, GROUPS)
        if -1 in found.values():
            return False
        for group, owner in found.items():
            with WireClient(node[owner].bootstrap) as client:
                if commit(client, group, {("t", 0): 4}) != {("t", 0): NONE}:
                    return False
        return True

    wait_for(every_group_served, 20, "every group to be served again", interval=0.2)
    assert owned_now(one) + owned_now(two) == 50
