"""The workloads: sizes per profile and one function per workload, each running the load
generator against a fresh server and returning its raw results."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.common import LOADED, log
from runner.postgres import reset_postgres
from runner.servers import Env, Server, loadgen, proc_cpu_rss, running, start_ours, start_peer


@dataclass
class Profile:
    rebalance_sizes: list[int]
    rebalance_iterations: dict[int, int]
    rebalance_budget_s: int
    phase_timeout_s: int
    heartbeat_groups: int
    pipe_seconds: float
    commit_conns: int
    commit_inflight: int
    groups: int
    groups_conns: int
    groups_budget_s: int
    restart_groups: int
    restart_offsets_per_group: int


FULL = Profile(
    rebalance_sizes=[1, 10, 100, 1000],
    rebalance_iterations={1: 10, 10: 5, 100: 3, 1000: 1},
    rebalance_budget_s=30,
    phase_timeout_s=90,
    heartbeat_groups=1000,
    pipe_seconds=5.0,
    commit_conns=16,
    commit_inflight=8,
    groups=100_000,
    groups_conns=256,
    groups_budget_s=60,
    restart_groups=100_000,
    restart_offsets_per_group=10,
)
QUICK = Profile(
    rebalance_sizes=[1, 10],
    rebalance_iterations={1: 3, 10: 2},
    rebalance_budget_s=5,
    phase_timeout_s=40,
    heartbeat_groups=100,
    pipe_seconds=1.0,
    commit_conns=16,
    commit_inflight=8,
    groups=2000,
    groups_conns=64,
    groups_budget_s=20,
    restart_groups=5000,
    restart_offsets_per_group=10,
)

Runner = Callable[[Env, Profile, str, int], list[dict[str, Any]]]


def targets(env: Env) -> list[str]:
    return [t for t in ("ours", "peer") if t in env.args.targets]


def start(env: Env, kind: str, name: str, **kwargs: Any) -> Server:
    """A fresh server; a start that fails is retried (others may be editing the working tree)."""
    for attempt in range(1, 4):
        workdir = env.next_dir(f"{name}-{kind}")
        try:
            if kind == "peer" and env.args.peer == "kafka":
                from runner.kafka_peer import start_kafka

                return start_kafka(env, workdir, **kwargs)
            if kind == "peer":
                return start_peer(env, workdir)
            if kind == "ours-pg":
                assert env.postgres_url is not None
                reset_postgres(env.postgres_url)
                return start_ours(env, workdir, storage=env.postgres_url, **kwargs)
            if kind == "ours-mem":
                return start_ours(env, workdir, storage="memory://", **kwargs)
            return start_ours(env, workdir, **kwargs)
        except RuntimeError as exc:
            if attempt == 3:
                raise
            log(f"{kind} server failed to start (attempt {attempt}), retrying in 15 s: {str(exc)[-300:]}")
            time.sleep(15)
    raise AssertionError("unreachable")


def committable(env: Env, kind: str, server: Server, topic: str, partitions: int) -> Server:
    """``server``, once Kafka (as the peer) takes commits on the generator's ``topic``: Kafka
    answers UNKNOWN_TOPIC_OR_PARTITION until a new topic reaches its metadata, and the generator
    would count those replies as commits. Ours takes them at once."""
    if kind == "peer" and env.args.peer == "kafka":
        from runner.kafka_peer import wait_committable

        try:
            wait_committable(server, topic, partitions)
        except BaseException:
            server.stop()
            raise
    return server


def run_rebalance(env: Env, profile: Profile, kind: str, rep: int, delay_ms: int = 0) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    sizes = profile.rebalance_sizes if delay_ms == 0 else [1, 100]
    for n in sizes:
        with running(start(env, kind, f"rebalance{n}", delay_ms=delay_ms)) as server:
            flags = [
                "-members", str(n),
                "-iterations", str(profile.rebalance_iterations.get(n, 1) if delay_ms == 0 else 1),
                "-budget", f"{profile.rebalance_budget_s}s",
                "-phase-timeout", f"{profile.phase_timeout_s}s",
                "-tag", f"r{rep}",
                "-setup-concurrency", "1000",
            ]  # fmt: skip
            out = loadgen(
                server,
                "rebalance",
                flags,
                timeout=profile.phase_timeout_s * 3 + profile.rebalance_budget_s + 120,
            )
            if delay_ms:
                for r in out:
                    r["name"] = str(r["name"]).replace("rebalance-", "rebalance-delay3s-")
            results += out
    return results


def run_rebalance_delay(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    return run_rebalance(env, profile, kind, rep, delay_ms=3000)


def run_heartbeat(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    with running(start(env, kind, "heartbeat")) as server:
        flags = [
            "-groups", str(profile.heartbeat_groups), "-conns", "16", "-inflight", "8",
            "-duration", f"{profile.pipe_seconds}s",
            "-setup-concurrency", "1000", "-setup-timeout", "180s", "-tag", f"r{rep}",
        ]  # fmt: skip
        return loadgen(server, "heartbeat", flags, timeout=600)


def run_commit(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    kinds = [kind]
    if kind == "ours":
        kinds.append("ours-mem")  # the same server on memory://: what the commit path costs without storage
        if env.postgres_url:
            kinds.append("ours-pg")
    results: list[dict[str, Any]] = []
    for k in kinds:
        # The generator's topic has as many partitions as the largest commit (-partitions).
        with running(committable(env, k, start(env, k, "commit"), "bench-commit", 100)) as server:
            flags = [
                "-conns", str(profile.commit_conns), "-inflight", str(profile.commit_inflight),
                "-duration", f"{profile.pipe_seconds}s", "-partitions", "1,100", "-modes", "simple,member",
                "-setup-timeout", "180s", "-tag", f"r{rep}",
            ]  # fmt: skip
            out = loadgen(server, "commit", flags, timeout=900)
            if k != kind:
                prefix = {"ours-pg": "pg", "ours-mem": "mem"}[k]
                for r in out:
                    r["name"] = f"{prefix}:{r['name']}"
            results += out
    return results


def run_groups(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    # The generator's topic has one partition per offset each group commits (-offsets).
    with running(committable(env, kind, start(env, kind, "groups"), "bench-groups", 3)) as server:
        flags = [
            "-groups", str(profile.groups), "-conns", str(profile.groups_conns),
            "-budget", f"{profile.groups_budget_s}s", "-offsets", "3",
            "-tag", f"r{rep}",
        ]  # fmt: skip
        return loadgen(server, "groups", flags, timeout=profile.groups_budget_s + 300)


_PREFILLED: dict[str, Path] = {}


def run_restart(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    name = f"restart-{profile.restart_groups}g-{profile.restart_groups * profile.restart_offsets_per_group}o"
    if kind == "peer":
        why = (
            "n/a: this runner does not prefill Kafka's __consumer_offsets"
            if env.args.peer == "kafka"
            else "n/a: Tansu here runs on memory:// storage (its durable engines need PostgreSQL or S3); "
            "nothing survives a restart"
        )
        return [{"name": name, "done": False, "note": why}]
    from prefill import prefill

    db = _PREFILLED.get("sqlite")
    if db is None:
        db = env.tmp / "restart.db"
        seconds = asyncio.run(
            prefill(f"sqlite:///{db}", profile.restart_groups, profile.restart_offsets_per_group)
        )
        log(f"prefilled {db.name}: {profile.restart_groups} groups, "
            f"{profile.restart_groups * profile.restart_offsets_per_group} offsets in {seconds:.1f} s")  # fmt: skip
        _PREFILLED["sqlite"] = db
    workdir = env.next_dir("restart-ours")
    server = start_ours(env, workdir, storage=f"sqlite:///{db}", delay_ms=0)
    with running(server):
        # The server listens first, serves each group once its shard is loaded (answering
        # COORDINATOR_LOAD_IN_PROGRESS until then) and logs "loaded N topics, G groups and O
        # offsets" after the last shard: time to a group's first real OffsetFetch answer, and to
        # that line.
        from restart_times import LOAD_IN_PROGRESS, PROBE_INTERVAL_S, Probe

        probe = Probe(server.port, f"rs-{profile.restart_groups // 2}", profile.restart_offsets_per_group)
        first_served_s: float | None = None
        loaded_s, cpu_s, rss_kb, note = server.ready_s, server.ready_cpu_s, server.ready_rss_kb, ""
        loaded = False
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and server.alive() and not (loaded and first_served_s):
            if first_served_s is None and probe.fetch()[0] != LOAD_IN_PROGRESS:
                first_served_s = time.monotonic() - server.started
            match = None if loaded else LOADED.search(server.log_path.read_text(errors="replace"))
            if match:
                loaded, loaded_s = True, time.monotonic() - server.started
                cpu_s, rss_kb = proc_cpu_rss(server.pid)
                note = f"loaded {match.group(1)} groups and {match.group(2)} offsets"
            time.sleep(PROBE_INTERVAL_S if first_served_s is None else 0.002)
        probe.close()
        result: dict[str, Any] = {
            "name": name,
            "done": True,
            "seconds": loaded_s,
            "first_served_s": first_served_s,
            "server_cpu_s": cpu_s,
            "rss_after_kb": rss_kb,
            "ops": 1,
            "extra": {"listening_s": server.ready_s, "log": note},
        }
        check = loadgen(
            server,
            "verify",
            ["-prefix", "rs-", "-topic", "bench-restart", "-offsets", str(profile.restart_offsets_per_group),
             "-verify-groups", f"0,1,{profile.restart_groups // 2},{profile.restart_groups - 1}"],
            timeout=60,
        )  # fmt: skip
        verified = check[0] if check else {}
        if not verified.get("done") or verified.get("errors"):
            result["done"] = False
            result["note"] = f"loaded state did not verify: {verified.get('note') or verified.get('errors')}"
    return [result]


RUNNERS: dict[str, Runner] = {
    "rebalance": run_rebalance,
    "rebalance-delay": run_rebalance_delay,
    "heartbeat": run_heartbeat,
    "commit": run_commit,
    "groups": run_groups,
    "restart": run_restart,
}
OURS_ONLY = {"rebalance-delay"}
