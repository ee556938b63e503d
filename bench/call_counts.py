"""Function calls per operation of one load-generator workload, on several source trees.

    .venv/bin/python bench/call_counts.py --workload heartbeat --source 7942ec6 --source .

Each ``--source`` (a git revision, exported, or a directory) runs our server under cProfile
(SQLite), the Go load generator drives the workload, and the server's profile is written on
SIGTERM. Printed per source: total calls per operation (the operation count is the generator's)
and, against the first source, the functions whose calls per operation differ most. Call counts
do not depend on machine load, so this separates regressions of a few percent that CPU timings
on a shared machine cannot (docs/performance.md).
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import itertools

from commit_ab import export
from runner.build import build_loadgen
from runner.common import PYTHON, ROOT, SERVER_CPU
from runner.servers import Server, loadgen, wait_ready

FLAGS = {
    "heartbeat": [
        "-groups", "32", "-conns", "16", "-inflight", "8", "-duration", "3s",
        "-setup-concurrency", "32", "-setup-timeout", "180s",
    ],
    "groups": ["-groups", "2000", "-conns", "64", "-budget", "120s", "-offsets", "3"],
    # OffsetCommit of 1 partition as a simple consumer (regression.py's ``commit``), then an
    # OffsetFetch of it: the operation is one request of either
    "commit1": [
        "-conns", "16", "-inflight", "8", "-duration", "3s", "-partitions", "1",
        "-modes", "simple", "-setup-timeout", "120s",
    ],
    # OffsetCommit then OffsetFetch of 100 partitions: the operation is one request of either
    "commit": [
        "-conns", "16", "-inflight", "8", "-duration", "3s", "-partitions", "100",
        "-modes", "simple", "-setup-timeout", "120s",
    ],
}  # fmt: skip
# The generator's name of a workload listed above under another name.
GENERATOR_WORKLOAD = {"commit1": "commit"}


def start_profiled(source: Path, workdir: Path, out: Path) -> Server:
    cmd = [
        "taskset", "-c", SERVER_CPU, str(PYTHON), "-m", "cProfile", "-o", str(out), "-m", "coordinator",
        "serve", "--host", "127.0.0.1", "--port", "0", "--storage", f"sqlite:///{workdir / 'c.db'}",
        "--group-initial-rebalance-delay-ms", "0",
    ]  # fmt: skip
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=source, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    return wait_ready("ours", proc, log_path, started, None, 120)


def counts(path: Path) -> dict[str, int]:
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    out: dict[str, int] = {}
    for (file, _line, name), (_cc, nc, _tt, _ct, _callers) in stats.items():
        short = file.split("/coordinator/", 1)[-1] if "/coordinator/" in file else file.rsplit("/", 1)[-1]
        key = f"{short}:{name}"
        out[key] = out.get(key, 0) + nc
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", action="append", required=True)
    parser.add_argument("--workload", default="heartbeat", choices=sorted(FLAGS))
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--keep", type=Path, help="copy each source's profile into this directory")
    args = parser.parse_args()
    build_loadgen()
    per_op: list[tuple[str, float, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="calls-") as tmp_name:
        tmp = Path(tmp_name)
        for i, ref in enumerate(args.source):
            into = tmp / f"src{i}"
            into.mkdir()
            source = ROOT if ref == "." else export(ref, into)
            workdir = tmp / f"run{i}"
            workdir.mkdir()
            prof = workdir / "server.prof"
            server = start_profiled(source, workdir, prof)
            try:
                workload = GENERATOR_WORKLOAD.get(args.workload, args.workload)
                results = loadgen(server, workload, FLAGS[args.workload], timeout=900)
            finally:
                server.stop()
            measured = [r for r in results if r.get("done") or r["name"].startswith(("commit-", "fetch-"))]
            ops = sum(int(r.get("ops", 0)) for r in measured)
            for r in measured:
                print(
                    f"{ref}: {r['name']}: {r.get('ops')} ops, server CPU {r.get('server_cpu_s')} s",
                    flush=True,
                )
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(prof, args.keep / f"server-{i}.prof")
            calls = counts(prof)
            per = {k: v / ops for k, v in calls.items()}
            per_op.append((ref, sum(calls.values()) / ops, per))
            print(f"{ref}: {ops} ops, {sum(calls.values()) / ops:.1f} calls per op", flush=True)
    for (base_ref, base_total, base), (ref, total, per) in itertools.pairwise(per_op):
        print(f"\n{ref} vs {base_ref}: {total:.1f} vs {base_total:.1f} calls per op")
        keys = set(base) | set(per)
        diffs = sorted(keys, key=lambda k: -abs(per.get(k, 0.0) - base.get(k, 0.0)))
        for k in diffs[: args.top]:
            print(
                f"  {per.get(k, 0.0) - base.get(k, 0.0):+8.2f}  {base.get(k, 0.0):7.2f} -> {per.get(k, 0.0):7.2f}  {k}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
