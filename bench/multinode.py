"""Several coordinator nodes on one PostgreSQL: what a node costs, what PostgreSQL costs, failover.

    .venv/bin/python bench/multinode.py                 # everything (~5 min)
    .venv/bin/python bench/multinode.py --quick         # 1 s phases, 3 kills (~2 min)
    .venv/bin/python bench/multinode.py --parts load    # only the 1/2/3-node load phases

One throwaway PostgreSQL (``tests/storage/pg_server.py``, with ``pg_stat_statements`` preloaded
when the server has it), a fresh database per part. Parts:

- **load**: for 1, 2 and 3 nodes, the Go generator (``bench/loadgen``, ``-follow-coordinator``
  so every group's connection goes to its coordinator) runs OffsetCommit with 1 and with 100
  partitions per request (simple consumers) and Heartbeat of 1000 stable groups. Per phase:
  requests/s and partitions/s; the CPU time (utime + stime from ``/proc/<pid>/stat``) of each
  node per request it served (its requests are the phase's total times the share of the
  generator's connections whose group it coordinates); PostgreSQL's CPU (postmaster and every
  backend) per transaction (``xact_commit`` of ``pg_stat_database``) and per committed partition.
- **idle**: three nodes with 50 shards and no client for ``--idle-s``: PostgreSQL's CPU as a
  share of one core, and the statements the nodes ran (``pg_stat_statements``).
- **failover**: three nodes, one group per shard; ``--kills`` times: SIGKILL the node that owns
  the most shards, time until every shard is leased to a survivor and until one OffsetCommit per
  moved shard succeeds at the group's new coordinator; restart it and wait until balanced. Then
  ``--stops`` times the same with SIGSTOP (the lease must expire; the node is SIGCONTed after).

The machine's 2 cores are shared by the nodes, PostgreSQL and the generator, so throughput
cannot show scaling; CPU per operation can. Results go to ``bench/results/multinode-<time>.json``
and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
from runner.build import build_loadgen
from runner.common import LOADGEN, RESULTS, log

from tests.multinode.support import (
    Nodes,
    java_string_hash,
    lease_owners,
    live_owners,
    run_sql,
    shard_of,
    wait_for,
)
from tests.storage.pg_server import PgServer

CLK_TCK = os.sysconf("SC_CLK_TCK")
GROUP_NAMES = {"commit": "cs-{tag}-{i}", "heartbeat": "hb-{tag}-{i}"}


# --------------------------------------------------------------------------------------------
# CPU from /proc


def cpu_s(pid: int) -> float:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def postgres_children(postmaster: int) -> list[int]:
    """The postmaster's live children: backends, checkpointer, walwriter, autovacuum..."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == postmaster:
            children.append(int(entry.name))
    return children


def postgres_cpu_s(postmaster: int) -> float:
    """The CPU time of the postmaster and its live children."""
    return cpu_s(postmaster) + sum(cpu_s(pid) for pid in postgres_children(postmaster))


@dataclass
class Meter:
    """CPU of the nodes and PostgreSQL, and PostgreSQL's transaction count, over one phase."""

    pg: PgServer
    database: str
    node_pids: dict[int, int]
    started: float = 0.0
    node_cpu: dict[int, float] = field(default_factory=dict)
    pg_cpu: float = 0.0
    xacts: int = 0

    def __enter__(self) -> Meter:
        self.started = time.monotonic()
        self.node_cpu = {n: cpu_s(pid) for n, pid in self.node_pids.items()}
        assert self.pg.pid is not None
        self.pg_cpu = postgres_cpu_s(self.pg.pid)
        self.xacts = _xact_commits(self.pg, self.database)
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.monotonic() - self.started
        self.node_cpu = {n: cpu_s(pid) - self.node_cpu[n] for n, pid in self.node_pids.items()}
        assert self.pg.pid is not None
        self.pg_cpu = postgres_cpu_s(self.pg.pid) - self.pg_cpu
        # Backends report their transaction counts at most once a second.
        time.sleep(1.2)
        self.xacts = _xact_commits(self.pg, self.database) - self.xacts


def _xact_commits(pg: PgServer, database: str) -> int:
    rows = run_sql(pg.dsn(), "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database)
    return int(rows[0]["xact_commit"])


def _statements(pg: PgServer, database: str) -> list[dict[str, Any]]:
    try:
        rows = run_sql(
            pg.dsn(database),
            "SELECT query, calls, total_exec_time FROM pg_stat_statements s JOIN pg_database d "
            "ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY calls DESC LIMIT 12",
            database,
        )
    except asyncpg.PostgresError:
        return []
    return [
        {"query": r["query"][:120], "calls": r["calls"], "exec_ms": round(r["total_exec_time"], 1)}
        for r in rows
    ]


def _reset_statements(pg: PgServer, database: str) -> bool:
    try:
        run_sql(pg.dsn(database), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        run_sql(pg.dsn(database), "SELECT pg_stat_statements_reset()")
    except asyncpg.PostgresError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# PostgreSQL and nodes


def start_postgres() -> PgServer:
    pg = PgServer.create()
    libdir = pg.bindir.parent / "lib"
    if (libdir / "pg_stat_statements.so").exists():
        conf = pg.datadir / "postgresql.auto.conf"
        conf.write_text(conf.read_text() + "shared_preload_libraries = 'pg_stat_statements'\n")
        pg.stop()
        pg.start()
    return pg


@contextmanager
def database(pg: PgServer, name: str) -> Iterator[str]:
    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(pg.dsn(), timeout=10)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield name
    finally:
        asyncio.run(admin(f'DROP DATABASE "{name}" WITH (FORCE)'))


def node_settings(args: argparse.Namespace) -> dict[str, str]:
    return {
        "offsets-topic-num-partitions": str(args.shards),
        "group-coordinator-lease-ms": str(args.lease_ms),
        "log-level": "WARNING" if not args.verbose else "INFO",
    }


def start_nodes(pg: PgServer, db: str, count: int, args: argparse.Namespace) -> Nodes:
    settings = {k: v for k, v in node_settings(args).items() if k != "log-level"}
    nodes = Nodes(pg.dsn(db), settings, count)
    first = nodes.start(1)
    create_topics(first.bootstrap, {"bench-commit": 100, "bench-heartbeat": 1})
    for node_id in list(nodes.nodes)[1:]:
        nodes.start(node_id)
    ids = list(nodes.nodes)
    wait_for(lambda: nodes.owners_balanced(args.shards, ids), 60, f"shards balanced over {ids}")
    return nodes


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from tests.durability.support import create_topics as create

    create(bootstrap, topics)


# --------------------------------------------------------------------------------------------
# Load: 1, 2, 3 nodes


def loadgen(nodes: Nodes, workload: str, flags: list[str], timeout: float = 300) -> dict[str, Any]:
    cmd = [str(LOADGEN), workload, "-addr", nodes.nodes[1].bootstrap, "-follow-coordinator", *flags]
    done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    out: dict[str, Any] = json.loads(done.stdout)
    if out.get("error"):
        raise RuntimeError(f"loadgen {workload}: {out['error']}")
    return out


def served_share(nodes: Nodes, shards: int, workload: str, tag: str, conns: int) -> dict[int, float]:
    """The share of the generator's connections (one group each) each node coordinates."""
    owners = lease_owners(nodes.dsn)
    pattern = GROUP_NAMES[workload]
    counts = dict.fromkeys(nodes.nodes, 0)
    for i in range(conns):
        owner = owners.get(shard_of(pattern.format(tag=tag, i=i), shards))
        if owner is not None:
            counts[owner] += 1
    return {n: c / conns for n, c in counts.items()}


def load_phase(
    pg: PgServer, db: str, nodes: Nodes, args: argparse.Namespace, name: str, workload: str, flags: list[str]
) -> dict[str, Any]:
    tag = f"{name}-{len(nodes.nodes)}n-{int(time.time() * 1000) % 100000}"
    node_pids = {n: node.pid for n, node in nodes.nodes.items()}
    assert pg.pid is not None
    pg_pids = [pg.pid, *postgres_children(pg.pid)]
    measured = ",".join(map(str, [*node_pids.values(), *pg_pids]))
    # CPU over the measured phase only (the generator samples /proc at its start and end);
    # transactions over the whole run (the setup of a commit phase writes nothing).
    with Meter(pg, db, node_pids) as meter:
        out = loadgen(nodes, workload, ["-tag", tag, "-measure-pids", measured, *flags])
    result = out["results"][0]
    pid_cpu = {int(pid): cpu for pid, cpu in result["extra"]["pid_cpu_s"].items()}
    node_cpu = {n: pid_cpu.get(pid, 0.0) for n, pid in node_pids.items()}
    pg_cpu = sum(pid_cpu.get(pid, 0.0) for pid in pg_pids)
    requests = int(result["ops"])
    partitions = int(result["units"])
    conns = args.heartbeat_conns if workload == "heartbeat" else args.commit_conns
    if workload == "heartbeat":
        # Heartbeat connections carry many groups each: share by the groups' coordinators.
        share = served_share(nodes, args.shards, workload, tag, args.heartbeat_groups)
    else:
        share = served_share(nodes, args.shards, workload, tag, conns)
    per_node = {
        n: {"cpu_s": round(cpu, 3), "share": round(share[n], 3),
            "cpu_us_per_request": round(cpu / (requests * share[n]) * 1e6, 1) if share[n] and requests else None}
        for n, cpu in node_cpu.items()
    }  # fmt: skip
    xacts_per_s = meter.xacts / meter.elapsed
    phase_xacts = xacts_per_s * result["seconds"]
    total_node_cpu = sum(node_cpu.values())
    return {
        "phase": name,
        "nodes": len(nodes.nodes),
        "seconds": round(result["seconds"], 2),
        "requests": requests,
        "requests_per_s": round(result["rate"]),
        "partitions_per_s": round(result["unit_rate"]),
        "p99_ms": result["p99_ms"],
        "errors": result.get("errors"),
        "node_cpu_us_per_request": round(total_node_cpu / requests * 1e6, 1) if requests else None,
        "per_node": per_node,
        "pg_cpu_s": round(pg_cpu, 3),
        "pg_cpu_share_of_one_core": round(pg_cpu / result["seconds"], 3),
        "pg_transactions_per_s": round(xacts_per_s),
        "pg_cpu_us_per_transaction": round(pg_cpu / phase_xacts * 1e6, 1) if phase_xacts > 0 else None,
        "pg_cpu_us_per_partition": round(pg_cpu / partitions * 1e6, 2)
        if workload == "commit" and partitions
        else None,
        "partitions_per_transaction": round(partitions / phase_xacts, 1)
        if workload == "commit" and phase_xacts > 0
        else None,
    }


def run_load(pg: PgServer, args: argparse.Namespace) -> list[dict[str, Any]]:
    phases: list[dict[str, Any]] = []
    duration = f"{args.phase_s}s"
    for count in args.node_counts:
        with database(pg, f"load{count}") as db:
            nodes = start_nodes(pg, db, count, args)
            try:
                common = ["-duration", duration, "-conns", str(args.commit_conns), "-inflight", "4"]
                for partitions in (1, 100):
                    flags = [*common, "-modes", "simple", "-partitions", str(partitions)]
                    phase = load_phase(pg, db, nodes, args, f"commit-{partitions}p", "commit", flags)
                    log(json.dumps(phase))
                    phases.append(phase)
                flags = ["-duration", duration, "-conns", str(args.heartbeat_conns), "-inflight", "8",
                         "-groups", str(args.heartbeat_groups)]  # fmt: skip
                phase = load_phase(pg, db, nodes, args, "heartbeat", "heartbeat", flags)
                log(json.dumps(phase))
                phases.append(phase)
            finally:
                nodes.close()
    return phases


# --------------------------------------------------------------------------------------------
# Idle lease traffic


def run_idle(pg: PgServer, args: argparse.Namespace) -> dict[str, Any]:
    with database(pg, "idle") as db:
        nodes = start_nodes(pg, db, 3, args)
        try:
            time.sleep(2 * args.lease_ms / 1000)  # past the start-up hand-overs
            has_statements = _reset_statements(pg, db)
            pids = {n: node.pid for n, node in nodes.nodes.items()}
            with Meter(pg, db, pids) as meter:
                time.sleep(args.idle_s)
            return {
                "shards": args.shards,
                "lease_ms": args.lease_ms,
                "seconds": round(meter.elapsed, 1),
                "pg_cpu_s": round(meter.pg_cpu, 3),
                "pg_cpu_share_of_one_core": round(meter.pg_cpu / meter.elapsed, 5),
                "pg_transactions_per_s": round(meter.xacts / meter.elapsed, 1),
                "node_cpu_share_of_one_core": {
                    n: round(c / meter.elapsed, 5) for n, c in meter.node_cpu.items()
                },
                "statements": _statements(pg, db) if has_statements else "pg_stat_statements not available",
            }
        finally:
            nodes.close()


# --------------------------------------------------------------------------------------------
# Failover


def group_for_shard(shard: int, shards: int) -> str:
    i = 0
    while True:
        name = f"failover-{i}"
        if (java_string_hash(name) & 0x7FFFFFFF) % shards == shard:
            return name
        i += 1


def commit_once(nodes: Nodes, group: str) -> bool:
    """FindCoordinator on any live node, then one simple-consumer OffsetCommit at the answer."""
    from protocol.apis import ApiKey
    from protocol.messages.find_coordinator import FindCoordinatorRequest
    from tests.durability.support import commit
    from tests.support.wire_client import WireClient

    for node in nodes.live():
        try:
            with WireClient(node.bootstrap, client_id="failover-probe", timeout=2) as client:
                found = client.request(
                    ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
                ).coordinators[0]
            if found.error_code:
                continue
            with WireClient(f"{found.host}:{found.port}", client_id="failover-probe", timeout=2) as client:
                codes = commit(client, group, {("bench-commit", 0): int(time.time() * 1000)})
            return set(codes.values()) == {0}
        except OSError:
            continue
    return False


def one_failover(nodes: Nodes, args: argparse.Namespace, sig: int) -> dict[str, Any]:
    owners = lease_owners(nodes.dsn)
    victim = max(nodes.nodes, key=lambda n: sum(1 for o in owners.values() if o == n))
    moved = sorted(s for s, o in owners.items() if o == victim)
    probes = [group_for_shard(s, args.shards) for s in moved]
    survivors = [n for n in nodes.nodes if n != victim]
    started = time.monotonic()
    nodes.send(victim, sig)
    if sig == signal.SIGKILL:
        node = nodes.nodes[victim]
        assert node.server is not None
        node.server.process.wait(10)
    leased_at: float | None = None
    pending = set(probes)
    deadline = started + 60 + args.lease_ms / 1000
    while pending and time.monotonic() < deadline:
        if leased_at is None:
            live = live_owners(nodes.dsn)
            if all(live.get(s) in survivors for s in moved):
                leased_at = time.monotonic() - started
        pending = {g for g in pending if not commit_once(nodes, g)}
        time.sleep(0.01)
    served = time.monotonic() - started if not pending else None
    if sig == signal.SIGSTOP:
        nodes.send(victim, signal.SIGCONT)
        wait_for(
            lambda: all(f"shard {s} lost" in nodes.nodes[victim].current_log() for s in moved),
            30,
            "the zombie stepping down",
        )
    else:
        nodes.start(victim)
    wait_for(lambda: nodes.owners_balanced(args.shards, list(nodes.nodes)), 60, "rebalanced")
    return {"victim": victim, "shards": len(moved), "leased_s": leased_at, "served_s": served}


def run_failover(pg: PgServer, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"lease_ms": args.lease_ms}
    with database(pg, "failover") as db:
        nodes = start_nodes(pg, db, 3, args)
        try:
            for label, sig, rounds in (
                ("sigkill", signal.SIGKILL, args.kills),
                ("sigstop", signal.SIGSTOP, args.stops),
            ):
                runs = []
                for i in range(rounds):
                    run = one_failover(nodes, args, sig)
                    log(f"{label} {i + 1}/{rounds}: {run}")
                    runs.append(run)
                served = [r["served_s"] for r in runs if r["served_s"] is not None]
                out[label] = {
                    "runs": runs,
                    "served_median_s": round(statistics.median(served), 3) if served else None,
                    "served_max_s": round(max(served), 3) if served else None,
                    "not_served": len(runs) - len(served),
                }
        finally:
            nodes.close()
    return out


# --------------------------------------------------------------------------------------------


def summary(results: dict[str, Any]) -> str:
    lines = ["| phase | nodes | req/s | partitions/s | node CPU µs/req (all nodes) | per node µs/req | PG CPU µs/xact | PG CPU µs/partition | partitions/xact |",
             "|---|---:|---:|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for p in results.get("load", []):
        per_node = ", ".join(f"{n}: {v['cpu_us_per_request']}" for n, v in p["per_node"].items())
        lines.append(
            f"| {p['phase']} | {p['nodes']} | {p['requests_per_s']:,} | {p['partitions_per_s']:,} | "
            f"{p['node_cpu_us_per_request']} | {per_node} | {p['pg_cpu_us_per_transaction']} | "
            f"{p['pg_cpu_us_per_partition']} | {p['partitions_per_transaction']} |"
        )
    if idle := results.get("idle"):
        lines.append(
            f"\nIdle, 3 nodes, {idle['shards']} shards, lease {idle['lease_ms']} ms: PostgreSQL used "
            f"{idle['pg_cpu_share_of_one_core']:.3%} of one core ({idle['pg_transactions_per_s']} transactions/s)."
        )
    if failover := results.get("failover"):
        for label in ("sigkill", "sigstop"):
            if label in failover:
                f = failover[label]
                lines.append(
                    f"{label.upper()}: every moved shard served again after median {f['served_median_s']} s, "
                    f"max {f['served_max_s']} s over {len(f['runs'])} runs ({f['not_served']} not served)."
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default="load,idle,failover", help="comma-separated: load, idle, failover")
    parser.add_argument("--quick", action="store_true", help="1 s phases, 3 kills, 1 stop, 5 s idle")
    parser.add_argument("--node-counts", default="1,2,3")
    parser.add_argument("--shards", type=int, default=50)
    parser.add_argument("--lease-ms", type=int, default=10_000)
    parser.add_argument("--phase-s", type=int, default=5)
    parser.add_argument("--commit-conns", type=int, default=48)
    parser.add_argument("--heartbeat-conns", type=int, default=16)
    parser.add_argument("--heartbeat-groups", type=int, default=1000)
    parser.add_argument("--idle-s", type=float, default=30)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.phase_s, args.kills, args.stops, args.idle_s = 1, 3, 1, 5
    args.node_counts = [int(n) for n in args.node_counts.split(",")]
    parts = set(args.parts.split(","))
    unknown = parts - {"load", "idle", "failover"}
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    if "load" in parts:
        build_loadgen()
    pg = start_postgres()
    results: dict[str, Any] = {"started": datetime.now(UTC).isoformat(timespec="seconds"), "args": {
        k: v for k, v in vars(args).items()}}  # fmt: skip
    try:
        if "load" in parts:
            results["load"] = run_load(pg, args)
        if "idle" in parts:
            results["idle"] = run_idle(pg, args)
        if "failover" in parts:
            results["failover"] = run_failover(pg, args)
    finally:
        pg.destroy()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9T]", "", results["started"])[:15]
    path = RESULTS / f"multinode-{stamp}.json"
    path.write_text(json.dumps(results, indent=1))
    print(summary(results))
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
