"""Shard failover and idle lease traffic of two nodes on one PostgreSQL (docs/multinode.md).

    .venv/bin/python bench/shard_failover.py [--kills 10] [--stops 3] [--idle-s 30]

Starts a throwaway PostgreSQL (initdb; as user postgres when run as root) and two coordinator
nodes with the default lease and poll settings, then measures:

* **SIGKILL failover:** node 2 is killed; the time until node 1 answers an OffsetCommit with
  NONE for a group of every shard node 2 held. Node 2 is restarted and the shards rebalance
  before the next kill.
* **SIGSTOP failover:** the same with node 2 paused; a hung node's shards move once its leases
  expire (``group.coordinator.lease.ms``). Node 2 is then resumed, steps down and takes its
  share back.
* **Idle traffic:** with 50 shards on two idle nodes, PostgreSQL transactions per second
  (``pg_stat_database.xact_commit``) and the CPU time of the PostgreSQL processes per second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import asyncpg

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from coordinator.core.sharding import shard_of  # noqa: E402
from protocol.apis import ApiKey  # noqa: E402
from protocol.errors import ErrorCode  # noqa: E402
from protocol.messages.find_coordinator import FindCoordinatorRequest  # noqa: E402
from tests.durability.support import Servers, commit, create_topics, wait_for, wait_for_log  # noqa: E402
from tests.storage.conftest import create_database  # noqa: E402
from tests.storage.pg_server import PgServer  # noqa: E402
from tests.support.server import ServerProcess  # noqa: E402
from tests.support.wire_client import WireClient  # noqa: E402

SHARDS = 50


def one_group_per_shard() -> dict[int, str]:
    found: dict[int, str] = {}
    i = 0
    while len(found) < SHARDS:
        found.setdefault(shard_of(f"probe-{i}", SHARDS), f"probe-{i}")
        i += 1
    return found


def owners(node: ServerProcess, groups: list[str]) -> dict[str, int]:
    with WireClient(node.bootstrap) as client:
        response = client.request(
            ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=groups)
        )
    return {c.key: c.node_id if c.error_code == ErrorCode.NONE else -1 for c in response.coordinators}


def start(servers: Servers, dsn: str, node_id: int, port: int = 0) -> ServerProcess:
    node = servers.start(dsn, {"node-id": str(node_id)}, port=port, wait_loaded=False)
    wait_for_log(node, f"node {node_id} ready", timeout=60)
    return node


def balanced(one: ServerProcess, two: ServerProcess, probes: list[str]) -> bool:
    seen = [owners(one, probes), owners(two, probes)]
    counts = sorted(seen[0].values())
    return seen[0] == seen[1] and counts.count(1) == counts.count(2) == SHARDS // 2


def served_by(node: ServerProcess, groups: list[str]) -> bool:
    with WireClient(node.bootstrap, timeout=5) as client:
        return all(commit(client, g, {("t", 0): 1}) == {("t", 0): ErrorCode.NONE} for g in groups)


def failover(
    servers: Servers, dsn: str, one: ServerProcess, two: ServerProcess, sig: int
) -> tuple[float, ServerProcess]:
    probes = list(one_group_per_shard().values())
    wait_for(lambda: balanced(one, two, probes), 60, "25 shards on each node")
    on_two = [g for g, owner in owners(one, probes).items() if owner == 2]
    two.process.send_signal(sig)
    began = time.monotonic()
    wait_for(lambda: served_by(one, on_two), 60, "node 1 to serve node 2's groups", interval=0.02)
    took = time.monotonic() - began
    if sig == signal.SIGSTOP:
        two.process.send_signal(signal.SIGCONT)
        wait_for_log(two, "lost (epoch", timeout=10)
        return took, two
    two.stop()
    return took, start(servers, dsn, 2, port=two.port)


async def pg_activity(dsn: str, postmaster: int) -> tuple[int, float]:
    conn = await asyncpg.connect(dsn)
    try:
        xacts = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
    finally:
        await conn.close()
    return int(xacts), postgres_cpu_s(postmaster)


def idle_activity(dsn: str, postmaster: int, seconds: float) -> tuple[float, float]:
    """(transactions per second, PostgreSQL CPU in % of one core) over ``seconds``."""
    xacts0, cpu0 = asyncio.run(pg_activity(dsn, postmaster))
    time.sleep(seconds)
    xacts1, cpu1 = asyncio.run(pg_activity(dsn, postmaster))
    return (xacts1 - xacts0 - 1) / seconds, 100 * (cpu1 - cpu0) / seconds  # -1: the first probe


def postgres_cpu_s(postmaster: int) -> float:
    """CPU seconds of the postmaster and its children (utime + stime, live processes)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster or ppid == postmaster:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=30.0)
    args = parser.parse_args()
    pg = PgServer.create()
    servers = Servers()
    try:
        dsn = asyncio.run(create_database(pg))
        assert pg.pid is not None
        baseline = idle_activity(dsn, pg.pid, args.idle_s)
        print(
            f"idle, no node: {baseline[0]:.1f} PostgreSQL transactions/s, CPU {baseline[1]:.2f}% of one core"
        )
        one = start(servers, dsn, 1)
        create_topics(one.bootstrap, {"t": 1})
        two = start(servers, dsn, 2)
        probes = list(one_group_per_shard().values())
        wait_for(lambda: balanced(one, two, probes), 60, "25 shards on each node")

        time.sleep(2)
        xacts, cpu = idle_activity(dsn, pg.pid, args.idle_s)
        print(
            f"idle, 2 nodes, {SHARDS} shards: {xacts:.1f} PostgreSQL transactions/s, CPU {cpu:.2f}% of one core"
        )

        kills = []
        for _ in range(args.kills):
            took, two = failover(servers, dsn, one, two, signal.SIGKILL)
            kills.append(took)
            print(f"SIGKILL: node 1 serves every shard of node 2 after {took:.2f} s", flush=True)
        stops = []
        for _ in range(args.stops):
            took, two = failover(servers, dsn, one, two, signal.SIGSTOP)
            stops.append(took)
            print(f"SIGSTOP: node 1 serves every shard of node 2 after {took:.2f} s", flush=True)
        for name, values in (("SIGKILL", kills), ("SIGSTOP", stops)):
            if values:
                print(
                    f"{name} failover over {len(values)}: median {statistics.median(values):.2f} s, "
                    f"max {max(values):.2f} s, min {min(values):.2f} s"
                )
    finally:
        servers.close()
        pg.destroy()


if __name__ == "__main__":
    main()
