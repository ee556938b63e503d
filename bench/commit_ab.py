"""The commit workloads on two source trees of our server, side by side in one run.

    .venv/bin/python bench/commit_ab.py --before REF [--repeats 3] [--seconds 3] [--heartbeats]

``--before`` is a git revision of this repository (exported to a temporary directory) or a
directory holding the server's sources; "after" is this checkout. The two arms are interleaved
rep by rep, so machine noise (other tenants) hits both alike. Each arm and repeat runs the Go
load generator's commit workload as ``run.py`` does (16 connections x 8 in flight; 1 and 100
partitions per request; simple consumers and members) on SQLite and on memory://, server pinned
to CPU 0, generator to CPU 1. Reported per arm: medians of requests/s, server CPU per request
(utime + stime, all threads) and p50/p99, and the mean OffsetCommits per storage write for
1-partition commits on SQLite (one extra pass with /metrics on, so that the metrics' own cost
stays out of the CPU figures).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from runner.build import build_loadgen
from runner.common import PYTHON, ROOT, SERVER_CPU, log
from runner.servers import Server, free_port, loadgen, wait_ready

STORAGES = ["sqlite", "memory"]


def export(ref: str, into: Path) -> Path:
    if Path(ref).is_dir():
        return Path(ref)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def start(source: Path, workdir: Path, storage: str, metrics_port: int | None) -> Server:
    url = f"sqlite:///{workdir / 'coordinator.db'}" if storage == "sqlite" else "memory://"
    cmd = [
        "taskset", "-c", SERVER_CPU, str(PYTHON), "-m", "coordinator", "serve",
        "--host", "127.0.0.1", "--port", "0", "--storage", url, "--group-initial-rebalance-delay-ms", "0",
    ]  # fmt: skip
    if metrics_port is not None:
        cmd += ["--metrics-port", str(metrics_port)]
    log_path = workdir / "server.log"
    with log_path.open("wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=source, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    return wait_ready("ours", proc, log_path, started, None, 60)


def batch_records(metrics_port: int) -> tuple[float, float]:
    """(sum, count) of the coordinator_storage_batch_records histogram."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        for suffix in ("_sum", "_count"):
            if line.startswith(f"coordinator_storage_batch_records{suffix} "):
                values[suffix] = float(line.split()[1])
    return values.get("_sum", 0.0), values.get("_count", 0.0)


def commits(server: Server, seconds: float, tag: str, partitions: str, mode: str) -> list[dict[str, Any]]:
    """One generator run: each mode's connections commit for each partition count in turn (the
    topic gets as many partitions as the largest count, as in ``run.py``)."""
    flags = [
        "-conns", "16", "-inflight", "8", "-duration", f"{seconds}s", "-partitions", partitions,
        "-modes", mode, "-setup-timeout", "120s", "-tag", tag,
    ]  # fmt: skip
    results = loadgen(server, "commit", flags, timeout=900)
    failed = [r for r in results if not r.get("done")]
    if failed:
        raise RuntimeError(f"commit workload failed: {failed}")
    return [r for r in results if r["name"].startswith("commit-")]


def heartbeats(server: Server, seconds: float, tag: str) -> list[dict[str, Any]]:
    """run.py's heartbeat workload: 1,000 stable classic groups, 16 connections x 8 in flight."""
    flags = [
        "-groups", "1000", "-conns", "16", "-inflight", "8", "-duration", f"{seconds}s",
        "-setup-concurrency", "1000", "-setup-timeout", "180s", "-tag", tag,
    ]  # fmt: skip
    results = loadgen(server, "heartbeat", flags, timeout=600)
    failed = [r for r in results if not r.get("done")]
    if failed:
        raise RuntimeError(f"heartbeat workload failed: {failed}")
    return results


def run_arm(
    source: Path, tmp: Path, storage: str, seconds: float, tag: str, with_heartbeats: bool = False
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(dir=tmp))
    server = start(source, workdir, storage, None)
    try:
        out = {f"{storage}:{r['name']}": r for r in commits(server, seconds, tag, "1,100", "simple,member")}
        if with_heartbeats:
            out.update({f"{storage}:{r['name']}": r for r in heartbeats(server, seconds, f"{tag}h")})
        return out
    finally:
        server.stop()


def commits_per_write(source: Path, tmp: Path, seconds: float, tag: str) -> dict[str, float]:
    """1-partition commits on SQLite with /metrics on: commits per store write, by mode."""
    workdir = Path(tempfile.mkdtemp(dir=tmp))
    port = free_port()
    server = start(source, workdir, "sqlite", port)
    out: dict[str, float] = {}
    try:
        for mode in ("simple", "member"):
            before = batch_records(port)
            (result,) = commits(server, seconds, f"{tag}{mode[0]}", "1", mode)
            total, count = batch_records(port)
            out[f"sqlite:{result['name']}"] = (total - before[0]) / max(count - before[1], 1)
    finally:
        server.stop()
    return out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--before", required=True, help="git revision or source directory of the 'before' arm"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", type=Path, help="write every phase's raw result here")
    parser.add_argument(
        "--heartbeats", action="store_true", help="also run.py's heartbeat workload, on memory://"
    )
    args = parser.parse_args()
    build_loadgen()
    with tempfile.TemporaryDirectory(prefix="commit-ab-") as tmp_name:
        tmp = Path(tmp_name)
        before_dir = tmp / "before"
        before_dir.mkdir()
        arms = {"before": export(args.before, before_dir), "after": ROOT}
        raw: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
        for rep in range(args.repeats):
            for arm, source in arms.items():
                for storage in STORAGES:
                    log(f"rep {rep + 1}/{args.repeats}: {arm} on {storage}")
                    raw[arm].append(
                        run_arm(
                            source,
                            tmp,
                            storage,
                            args.seconds,
                            f"r{rep}{arm[0]}{storage[0]}",
                            args.heartbeats and storage == "memory",
                        )
                    )
        sizes: dict[str, dict[str, float]] = {}
        for arm, source in arms.items():
            log(f"commits per storage write: {arm} (with /metrics)")
            sizes[arm] = commits_per_write(source, tmp, args.seconds, f"m{arm[0]}")
    if args.json is not None:
        args.json.write_text(json.dumps({"raw": raw, "sizes": sizes}, indent=1))
    print(render(raw, sizes))
    return 0


def render(raw: dict[str, list[dict[str, Any]]], sizes: dict[str, dict[str, float]]) -> str:
    names = sorted({name for runs in raw.values() for run in runs for name in run})
    lines = [
        "| phase | arm | requests/s | CPU µs per request | p50 / p99 ms | commits per write | errors |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for name in names:
        for arm, runs in raw.items():
            rs = [run[name] for run in runs if name in run]
            rates = [r["rate"] for r in rs]
            cpu = [r["server_cpu_s"] / r["ops"] * 1e6 for r in rs]
            p50 = median([r["p50_ms"] for r in rs])
            p99 = median([r["p99_ms"] for r in rs])
            per_write = sizes.get(arm, {}).get(name)
            errors = sum(sum(r.get("errors", {}).values()) for r in rs)
            lines.append(
                f"| {name} | {arm} | {median(rates):,.0f} ({' / '.join(f'{v:,.0f}' for v in rates)}) "
                f"| {median(cpu):.1f} ({' / '.join(f'{v:.1f}' for v in cpu)}) | {p50:.2f} / {p99:.1f} "
                f"| {'' if per_write is None else f'{per_write:.1f}'} | {errors or ''} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
