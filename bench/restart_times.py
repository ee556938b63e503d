"""A restart's two times: process start → first group served, process start → everything loaded.

Starts ``coordinator serve`` on a prefilled store (``bench/prefill.py``), connects as soon as it
logs "listening" and sends OffsetFetch v8 for one group every few milliseconds until the answer
is not COORDINATOR_LOAD_IN_PROGRESS and holds the group's offsets (first group served), and
times the ``loaded … offsets`` log line (everything loaded). The server runs from ``--source``
(a directory with the package, e.g. an exported older commit, to measure "before"; repeat the
option to compare several, run by run), with this interpreter. ``--postgres`` starts a throwaway PostgreSQL (initdb on a free loopback port, as
``run.py --postgres``) and prefills it first.

    .venv/bin/python bench/prefill.py sqlite:////tmp/restart.db --groups 100000 --offsets 10
    .venv/bin/python bench/restart_times.py sqlite:////tmp/restart.db [--repeats 3] [--source DIR]
    .venv/bin/python bench/restart_times.py --postgres [--groups 100000 --offsets 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from prefill import GROUP_PREFIX, TOPIC, prefill  # noqa: E402

from protocol.apis import ApiKey  # noqa: E402
from protocol.messages.offset_fetch import (  # noqa: E402
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from protocol.wire import decode_response, encode_request  # noqa: E402

LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
LOADED = re.compile(
    # One count per kind of group, as many kinds as the commit under test has.
    r"loaded \d+ topics, (\d+) classic groups(?:, \d+ \w+ groups)* and (\d+) offsets"
)
LOAD_IN_PROGRESS = 14
# Several nodes on PostgreSQL: a first load longer than group.coordinator.lease.ms loses the
# shards until the next ownership round takes them again; a client looks the coordinator up
# again and retries, as the probe does.
NOT_SERVED = frozenset({LOAD_IN_PROGRESS, 15, 16})  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
PROBE_INTERVAL_S = 0.005


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Probe:
    """One connection sending OffsetFetch v8 for ``group`` (partitions 0..offsets-1)."""

    def __init__(self, port: int, group: str, offsets: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        topics = [OffsetFetchRequestTopics(name=TOPIC, partition_indexes=list(range(offsets)))]
        self.request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=topics)])
        self.correlation = 0

    def fetch(self) -> tuple[int, list[int]]:
        self.correlation += 1
        self.sock.sendall(
            encode_request(ApiKey.OFFSET_FETCH, 8, self.correlation, "restart-probe", self.request)
        )
        (size,) = struct.unpack(">i", self._read(4))
        _, response = decode_response(ApiKey.OFFSET_FETCH, 8, self._read(size))
        [group] = response.groups
        return group.error_code, [p.committed_offset for t in group.topics for p in t.partitions]

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("server closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def one_restart(url: str, source: Path, group: str, offsets: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    env["PYTHONPATH"] = str(source)
    argv = [
        sys.executable,
        "-m",
        "coordinator",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--storage",
        url,
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        argv, cwd=source, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    port: list[int] = []
    loaded: list[tuple[float, float, str]] = []
    listening = threading.Event()
    done = threading.Event()
    lines: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if not port and (match := LISTENING.search(line)):
                port.append(int(match.group(1)))
                listening.set()
            if not loaded and (match := LOADED.search(line)):
                loaded.append((time.monotonic() - started, proc_cpu_s(process.pid), match.group(0)))
                done.set()
        listening.set()
        done.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        listening.wait(120)
        if not port:
            raise RuntimeError("the server did not start:\n" + "".join(lines))
        probe = Probe(port[0], group, offsets)
        probes = 0
        while True:
            probes += 1
            error, committed = probe.fetch()
            if error not in NOT_SERVED:
                first_served = time.monotonic() - started
                break
            time.sleep(PROBE_INTERVAL_S)
        probe.close()
        index = int(group.removeprefix(GROUP_PREFIX))
        if error or committed != [index + 1] * offsets:
            raise RuntimeError(f"{group}: error {error}, offsets {committed}")
        done.wait(600)
        if not loaded:
            raise RuntimeError("the server did not log its load:\n" + "".join(lines))
        all_loaded, cpu, line = loaded[0]
        return {
            "first_served_s": first_served,
            "loaded_s": all_loaded,
            "cpu_s": cpu,
            "probes": probes,
            "log": line,
            "shards_lost": sum("lost (epoch" in text for text in lines),
        }
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def report(label: str, runs: list[dict[str, Any]]) -> None:
    def spread(key: str) -> str:
        values = [r[key] for r in runs]
        return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"

    print(f"{label}: {runs[0]['log']}")
    print(f"    process start → first group served: {spread('first_served_s')}")
    print(f"    process start → everything loaded:  {spread('loaded_s')}")
    print(f"    server CPU until loaded:            {spread('cpu_s')}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", nargs="?", help="a prefilled store (bench/prefill.py)")
    parser.add_argument(
        "--source",
        type=Path,
        action="append",
        help="directory holding the server's package (repeat to compare, runs interleaved; default: this one)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--groups", type=int, default=100_000, help="groups in the store (names the probe group)"
    )
    parser.add_argument("--offsets", type=int, default=10, help="offsets per group")
    parser.add_argument(
        "--group", type=int, help="index of the probed group (default: a different one each run)"
    )
    parser.add_argument("--postgres", action="store_true", help="prefill and use a throwaway PostgreSQL")
    args = parser.parse_args()
    if args.postgres:
        from runner.postgres import throwaway_postgres

        with throwaway_postgres() as url:
            seconds = asyncio.run(prefill(url, args.groups, args.offsets))
            print(
                f"prefilled PostgreSQL: {args.groups} groups, {args.groups * args.offsets} offsets in {seconds:.1f} s"
            )
            asyncio.run(analyze(url))
            run_all(url, args)
    elif args.url:
        run_all(args.url, args)
    else:
        parser.error("give a prefilled store's URL or --postgres")


async def analyze(url: str) -> None:
    """Planner statistics, as a long-running database has them (autovacuum): without them a
    freshly filled table is scanned whole for each shard's ``group_id = ANY(...)`` read."""
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        await connection.execute("ANALYZE")
    finally:
        await connection.close()


def run_all(url: str, args: argparse.Namespace) -> None:
    sources: list[Path] = [source.resolve() for source in args.source or [REPO]]
    runs: dict[Path, list[dict[str, Any]]] = {source: [] for source in sources}
    for rep in range(args.repeats):
        index = args.group if args.group is not None else (args.groups // 2 + rep * 7919) % args.groups
        for source in sources:
            run = one_restart(url, source, f"{GROUP_PREFIX}{index}", args.offsets)
            print(
                f"  {source} run {rep + 1}: first group served {run['first_served_s']:.2f} s "
                f"({run['probes']} probes), everything loaded {run['loaded_s']:.2f} s, {run['cpu_s']:.2f} s CPU"
                + (f", {run['shards_lost']} shards lost after the first load" if run["shards_lost"] else ""),
                flush=True,
            )
            runs[source].append(run)
    for source in sources:
        report(str(source), runs[source])


if __name__ == "__main__":
    main()
