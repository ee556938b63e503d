"""This checkout against fixed earlier commits of ours, driven as a client drives it, in one run.

    .venv/bin/python bench/regression.py [--before 7942ec6 ...] [--kafka] [--repeats 3] [--groups 20000]

Each ``--before`` is a git revision of this repository (default ``7942ec6``, the main of
2026-11-22), exported into a temporary directory, or a directory holding the server's sources;
the last of ours is ``--after`` (the same) or, by default, this checkout as it is; ``--kafka``
adds Apache Kafka 4.4 (one KRaft node with its defaults, ``runner/kafka_peer.py``, jars from
``.ci/setup``) as a last arm. Every arm runs the same workloads through the Go load generator
(bench/loadgen), server pinned to CPU 0 and generator to CPU 1, ours on SQLite
(``synchronous=FULL``, the default), a fresh server per phase; the arms are interleaved phase by
phase and repeat by repeat, so that machine noise (other tenants) hits them alike. RSS and CPU
are the server process's (VmRSS, utime + stime of all threads), for Kafka the JVM's. Before a
workload that commits, Kafka's arm creates the generator's topic and waits until Kafka takes
commits on it (it answers UNKNOWN_TOPIC_OR_PARTITION at first). A phase whose replies carry
error codes on more than 1 % of its operations counts as failed (the generator counts error
replies as operations):

* ``groups``: ``--groups`` groups, each one classic member (JoinGroup, SyncGroup) that commits 3
  offsets, over 256 connections: RSS per idle group (VmRSS 1 s after the last group minus VmRSS
  before the first), groups created per second, server CPU per group.
* ``heartbeat``: ``--heartbeat-groups`` stable single-member groups, then Heartbeats on 16
  connections x 8 in flight for ``--seconds``: heartbeats/s and server CPU per heartbeat.
* ``commit``: OffsetCommit of 1 partition as a simple consumer, 16 connections x 8 in flight:
  commits/s and server CPU per commit.
* ``commit100``: OffsetCommit of 100 partitions as a simple consumer, then OffsetFetch of the same
  100 partitions, 16 connections x 8 in flight: partitions/s and server CPU per request and per
  partition of each.

Printed: per figure and arm the median (and every run), each arm's median over the first arm's
and, with ``--kafka``, the last of ours over Kafka's; below the table, where Kafka's figures are
not measured as ours are (durability, the JVM's heap and JIT), and every phase that failed,
shown as n/a in the table rather than as a number. ``--json`` keeps every raw result. On demand only (minutes
per repeat), not in the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commit_ab import export, start
from runner.build import build_loadgen
from runner.common import DASH, ROOT, TIMES, log
from runner.error_replies import error_replies
from runner.kafka_peer import KAFKA_VERSION, start_kafka, wait_committable
from runner.servers import Env, Server, loadgen

WORKLOADS = ("groups", "heartbeat", "commit", "commit100")
KAFKA = f"Kafka {KAFKA_VERSION}"
# The generator's topic of each workload (name, partitions), created on Kafka before it starts.
KAFKA_TOPICS = {
    "groups": ("bench-groups", 3),
    "commit": ("bench-commit", 1),
    "commit100": ("bench-commit", 100),
}
# Where Kafka's figure of a workload is not measured as ours is: printed under the table.
KAFKA_CAVEATS = {
    "groups": "RSS is the JVM's (heap up to -Xmx1g): it grows with garbage not yet collected "
    "(the sample is 1 s after the last group), so it bounds Kafka's memory per group from above; "
    "with few groups (--groups) it is mostly the heap's growth",
    "commit": "Kafka's defaults append the commit to __consumer_offsets without an fsync "
    "(its durability is replication, one replica here); ours replies after SQLite's fsync (FULL)",
    "commit100": "as for commit: no fsync per OffsetCommit on Kafka, SQLite FULL on ours",
}


def run_groups(server: Server, args: argparse.Namespace, tag: str) -> dict[str, float]:
    flags = [
        "-groups", str(args.groups), "-conns", "256", "-budget", f"{args.groups_budget}s",
        "-offsets", "3", "-tag", tag,
    ]  # fmt: skip
    (result,) = checked(loadgen(server, "groups", flags, timeout=args.groups_budget + 300), "groups")
    return {
        "groups: RSS per idle group (B)": float(result["extra"]["rss_per_group_bytes"]),
        "groups: created per second": float(result["rate"]),
        "groups: server CPU per group (µs)": cpu_per_op(result),
    }


def run_heartbeat(server: Server, args: argparse.Namespace, tag: str) -> dict[str, float]:
    flags = [
        "-groups", str(args.heartbeat_groups), "-conns", "16", "-inflight", "8",
        "-duration", f"{args.seconds}s", "-setup-concurrency", "1000", "-setup-timeout", "180s",
        "-tag", tag,
    ]  # fmt: skip
    (result,) = checked(loadgen(server, "heartbeat", flags, timeout=600), "heartbeat")
    return {
        "heartbeat: per second (16 x 8)": float(result["rate"]),
        "heartbeat: server CPU per heartbeat (µs)": cpu_per_op(result),
    }


def run_commit(server: Server, args: argparse.Namespace, tag: str) -> dict[str, float]:
    flags = [
        "-conns", "16", "-inflight", "8", "-duration", f"{args.seconds}s", "-partitions", "1",
        "-modes", "simple", "-setup-timeout", "120s", "-tag", tag,
    ]  # fmt: skip
    results = checked(loadgen(server, "commit", flags, timeout=600), "commit")
    (result,) = [r for r in results if r["name"].startswith("commit-")]
    return {
        "OffsetCommit 1 partition, SQLite FULL: per second": float(result["rate"]),
        "OffsetCommit: server CPU per commit (µs)": cpu_per_op(result),
    }


def run_commit100(server: Server, args: argparse.Namespace, tag: str) -> dict[str, float]:
    flags = [
        "-conns", "16", "-inflight", "8", "-duration", f"{args.seconds}s", "-partitions", "100",
        "-modes", "simple", "-setup-timeout", "120s", "-tag", tag,
    ]  # fmt: skip
    results = checked(loadgen(server, "commit", flags, timeout=600), "commit")
    figures: dict[str, float] = {}
    for prefix, label in (("commit-", "OffsetCommit"), ("fetch-", "OffsetFetch")):
        (result,) = [r for r in results if r["name"].startswith(prefix)]
        per_request = cpu_per_op(result)
        figures[f"{label} 100 partitions: partitions per second"] = float(result["unit_rate"])
        figures[f"{label} 100 partitions: server CPU per request (µs)"] = per_request
        figures[f"{label} 100 partitions: server CPU per partition (µs)"] = per_request / 100
    return figures


RUNNERS: dict[str, Callable[[Server, argparse.Namespace, str], dict[str, float]]] = {
    "groups": run_groups,
    "heartbeat": run_heartbeat,
    "commit": run_commit,
    "commit100": run_commit100,
}


def checked(results: list[dict[str, Any]], workload: str) -> list[dict[str, Any]]:
    failed = [r for r in results if not r.get("done")]
    if failed or not results:
        raise RuntimeError(f"{workload} workload failed: {failed or 'no result'}")
    for r in results:
        why = error_replies(r)
        if why is not None:
            raise RuntimeError(why)
    return results


def cpu_per_op(result: dict[str, Any]) -> float:
    return float(result["server_cpu_s"]) / max(int(result["ops"]), 1) * 1e6


@dataclass
class Arm:
    name: str
    start: Callable[[Path], Server]  # a fresh server in this work directory
    runs: list[dict[str, float]] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # workload -> why it has no figures


def ours(name: str, source: Path) -> Arm:
    return Arm(name, lambda workdir: start(source, workdir, "sqlite", None))


def describe(ref: str) -> str:
    if Path(ref).is_dir():
        return ref
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--before",
        action="append",
        help="git revision or source directory of an earlier arm (repeatable; default 7942ec6)",
    )
    parser.add_argument(
        "--after", help="git revision or source directory of the last arm (default: this checkout as it is)"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    parser.add_argument("--groups", type=int, default=20_000)
    parser.add_argument("--groups-budget", type=int, default=120, help="seconds")
    parser.add_argument("--heartbeat-groups", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0, help="of each timed heartbeat/commit phase")
    parser.add_argument("--kafka", action="store_true", help=f"add {KAFKA} (its defaults) as the last arm")
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="seconds Kafka may take to be ready"
    )
    parser.add_argument("--json", type=Path, help="write every raw figure here")
    args = parser.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {sorted(unknown)}")
    build_loadgen()
    with tempfile.TemporaryDirectory(prefix="regression-") as tmp_name:
        tmp = Path(tmp_name)
        arms: list[Arm] = []
        for i, ref in enumerate(args.before or ["7942ec6"]):
            into = tmp / f"arm{i}"
            into.mkdir()
            arms.append(ours(describe(ref), export(ref, into)))
        if args.after is None:
            arms.append(ours("this checkout", ROOT))  # read live: do not edit it during a run
        else:
            into = tmp / "after"
            into.mkdir()
            arms.append(ours(describe(args.after), export(args.after, into)))
        if args.kafka:
            env = Env(args, tmp, Path("/nonexistent"))
            arms.append(Arm(KAFKA, lambda workdir: start_kafka(env, workdir)))
        for rep in range(args.repeats):
            for arm_index, arm in enumerate(arms):
                figures: dict[str, float] = {}
                for workload in workloads:
                    log(f"rep {rep + 1}/{args.repeats}: {arm.name}: {workload}")
                    try:
                        server = arm.start(Path(tempfile.mkdtemp(dir=tmp)))
                        try:
                            if arm.name == KAFKA and workload in KAFKA_TOPICS:
                                wait_committable(server, *KAFKA_TOPICS[workload])
                            found = RUNNERS[workload](server, args, f"r{rep}a{arm_index}")
                        finally:
                            server.stop()
                    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                        log(f"  failed: {exc}")
                        arm.failures[workload] = f"{type(exc).__name__}: {exc}"[:300]
                        continue
                    figures |= found
                arm.runs.append(figures)
    if args.json is not None:
        args.json.write_text(json.dumps({arm.name: arm.runs for arm in arms}, indent=1))
    print(render(arms, workloads))
    return 0


def render(arms: list[Arm], workloads: list[str]) -> str:
    names = list(dict.fromkeys(name for arm in arms for run in arm.runs for name in run))
    kafka = arms[-1] if arms[-1].name == KAFKA else None
    last = arms[-2] if kafka else None  # the last of ours
    head = " | ".join([arms[0].name] + [f"{arm.name} | {TIMES}{arms[0].name}" for arm in arms[1:]])
    if last is not None:
        head += f" | {last.name} / Kafka"
    columns = 2 * len(arms) - 1 + (last is not None)
    lines = [f"| figure | {head} |", "|---|" + "---:|" * columns]
    for name in names:
        medians = [median(arm, name) for arm in arms]
        cells = []
        for i, arm in enumerate(arms):
            values = [run[name] for run in arm.runs if name in run]
            spread = " / ".join(fmt(v) for v in values)
            cells.append(f"{fmt(statistics.median(values))} ({spread})" if values else "n/a")
            if i > 0:
                cells.append(ratio(medians[i], medians[0]))
        if last is not None:
            cells.append(ratio(medians[-2], medians[-1]))
        lines.append(f"| {name} | {' | '.join(cells)} |")
    notes = []
    if kafka is not None:
        notes.append(
            f"* {KAFKA}: a fresh JVM per phase, as ours is a fresh process: its CPU includes the JIT "
            "compiling the hot paths during the timed phase, the more of it the shorter the phase (--seconds)."
        )
        notes += [
            f"* {KAFKA}, {workload}: {KAFKA_CAVEATS[workload]}."
            for workload in workloads
            if workload in KAFKA_CAVEATS and workload not in kafka.failures
        ]
    notes += [
        f"* {arm.name}, {workload}: failed (n/a, or fewer runs in its figures): {why}"
        for arm in arms
        for workload, why in arm.failures.items()
    ]
    return "\n".join([*lines, "", *notes] if notes else lines)


def median(arm: Arm, name: str) -> float | None:
    values = [run[name] for run in arm.runs if name in run]
    return statistics.median(values) if values else None


def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}{TIMES}" if value is not None and base else DASH


def fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
