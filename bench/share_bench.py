"""Share consumption (KIP-932) side by side: a share group through the gateway (Tansu upstream), a
consumer group through the same gateway, and Kafka 4.4's own share groups.

    python bench/share_bench.py                       # 20,000 records of 256 bytes, 3 rounds
    python bench/share_bench.py --records 5000 --rounds 1
    python bench/share_bench.py --partitions 6 --consumers 3    # several consumers share a topic
    python bench/share_bench.py --baseline /tmp/base            # and a gateway run from another checkout
    python bench/share_bench.py --sides share --profile gw.prof # our gateway under cProfile

``--baseline DIR`` adds a fourth side: the share side through a second gateway started from the
checkout DIR (e.g. ``git worktree add /tmp/base <commit>``) on the same Tansu, with storage of its
own, so that a change is measured against the code before it in the same run. ``--profile FILE``
runs our gateway under cProfile and writes its profile to FILE when it stops. ``--sides`` picks
the sides (share, group, kafka, baseline).

Each round runs the three sides in an order that rotates (so a drift of the machine's speed
does not favour one), each on a fresh topic (3 partitions and one confluent-kafka consumer by
default; several consumers poll in threads of their own):

* share, gateway: a ShareConsumer (explicit acknowledgement) subscribes, its share-partitions
  start at the log end, then the records are produced; every polled batch is accepted and
  ``commit_sync()`` waits for the gateway to confirm the acknowledgements (written to SQLite);
* consumer group, gateway: a Consumer (``auto.offset.reset=earliest``) reads the same number
  of records and commits each polled batch synchronously;
* share, Kafka 4.4: the first side against Kafka's native share groups.

The consumer does not poll while the records are produced (librdkafka fetches when polled), so
on every side the records are all in the log when consumption starts. Reported per side:
records/s from the first poll after producing to the last record received, the acknowledgement
(commit) round trip p50/p99 per polled batch, and for the gateway sides the gateway's CPU time
(user+system, /proc) per 1,000 records from the start of producing (the producing through the
gateway is in both gateway sides; joining is not). Medians over the rounds, and the two ratios
the target is set in: share through the gateway against the consumer group through the gateway
(>= 80 %) and against Kafka's native share groups (>= 100 %).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.gateway.conftest import gateway_settings, running_tansu
from tests.support.kafka_broker import running_kafka
from tests.support.server import _LISTENING, FAST_SETTINGS, REPO, START_TIMEOUT_S, ServerProcess

CLOCK_TICKS = 100


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    payload = b"x" * size
    for n in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=n % partitions)
                break
            except BufferError:  # the client's queue is full (over 100,000 records): let it drain
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Tally:
    """Records received by every consumer of a side, and the acknowledgement round trips."""

    def __init__(self, records: int) -> None:
        self.records = records
        self.got = 0
        self.acks: list[float] = []
        self.lock = threading.Lock()
        self.last = 0.0

    def add(self, count: int, ack_ms: float) -> None:
        with self.lock:
            self.got += count
            self.acks.append(ack_ms)
            self.last = time.monotonic()

    def done(self) -> bool:
        return self.got >= self.records

    def result(self, first: float) -> dict[str, float]:
        return {
            "records": self.got,
            "rate": self.got / max(self.last - first, 1e-9),
            "p50": percentile(self.acks, 0.5),
            "p99": percentile(self.acks, 0.99),
        }


def in_threads(work: Callable[[int], None], consumers: int) -> None:
    threads = [threading.Thread(target=work, args=(n,)) for n in range(consumers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def share_side(bootstrap: str, shape: Shape, producing: Callable[[], None]) -> dict[str, float]:
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, shape.partitions)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "share.acknowledgement.mode": "explicit",
        "log_level": 0,
    }
    consumers = [ShareConsumer(config) for _ in range(shape.consumers)]
    for consumer in consumers:
        consumer.subscribe([topic])
    deadline = time.monotonic() + 5  # joined and fetching: their share-partitions started
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.2)
    producing()
    produce(bootstrap, topic, shape.records, shape.size, shape.partitions)
    tally = Tally(shape.records)
    first = time.monotonic()  # the records are all there: from the first poll to the last record
    end = first + 300

    def consume(n: int) -> None:
        consumer = consumers[n]
        while not tally.done() and time.monotonic() < end:
            batch = [m for m in consumer.poll(0.2) if m.error() is None]
            if not batch:
                continue
            for message in batch:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            started = time.monotonic()
            consumer.commit_sync()
            tally.add(len(batch), (time.monotonic() - started) * 1000)

    in_threads(consume, shape.consumers)
    result = tally.result(first)
    for consumer in consumers:
        consumer.close()
    return result


def group_side(bootstrap: str, shape: Shape, producing: Callable[[], None]) -> dict[str, float]:
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, shape.partitions)
    producing()
    produce(bootstrap, topic, shape.records, shape.size, shape.partitions)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        for _ in range(shape.consumers)
    ]
    for consumer in consumers:
        consumer.subscribe([topic])
    tally = Tally(shape.records)
    first = time.monotonic()  # the records are all there: from the first poll to the last record
    end = first + 300

    def consume(n: int) -> None:
        consumer = consumers[n]
        while not tally.done() and time.monotonic() < end:
            batch = [m for m in consumer.consume(500, 0.2) if m.error() is None]
            if not batch:
                continue
            started = time.monotonic()
            consumer.commit(asynchronous=False)
            tally.add(len(batch), (time.monotonic() - started) * 1000)

    in_threads(consume, shape.consumers)
    result = tally.result(first)
    for consumer in consumers:
        consumer.close()
    return result


@dataclass(frozen=True)
class Shape:
    records: int
    size: int
    partitions: int
    consumers: int


Side = Callable[[Callable[[], None]], dict[str, float]]


def measured(side: Side, pid: int | None) -> dict[str, float]:
    """The side's figures, and the gateway's CPU time from the start of producing to the end
    (joining the group is left out: the share side waits for it, the other does not)."""
    before = [0.0]

    def producing() -> None:
        before[0] = cpu_seconds(pid) if pid else 0.0

    result = side(producing)
    if pid:
        result["cpu_ms_per_1000"] = (cpu_seconds(pid) - before[0]) * 1000 / max(result["records"], 1) * 1000
    return result


@contextmanager
def running_gateway_from(
    checkout: Path, upstream: str, storage: str, profile: Path | None = None
) -> Iterator[ServerProcess]:
    """A gateway run from ``checkout`` (its code first on the path), optionally under cProfile
    (the profile is written when it stops on SIGTERM); stopped by PID."""
    settings = {**FAST_SETTINGS, **gateway_settings(upstream)}
    python = [sys.executable, *(["-m", "cProfile", "-o", str(profile)] if profile else [])]
    argv = [*python, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", "0", "--storage", storage]
    for name, value in settings.items():
        argv += [f"--{name}", value]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    env["PYTHONPATH"] = str(checkout)
    process = subprocess.Popen(
        argv, cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    server = ServerProcess(process, 0, storage)
    found = threading.Event()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            server.log_lines.append(line)
            match = _LISTENING.search(line)
            if match and not found.is_set():
                server.port = int(match.group(1))
                found.set()
        found.set()

    server.pump = threading.Thread(target=pump, daemon=True)
    server.pump.start()
    found.wait(START_TIMEOUT_S)
    try:
        if not server.port:
            raise RuntimeError(f"gateway did not start:\n{server.log_text()}")
        yield server
    finally:
        server.stop(timeout=60)


SHARE_GATEWAY = "share, gateway (Tansu)"
SHARE_BASELINE = "share, gateway (Tansu), baseline checkout"
GROUP_GATEWAY = "consumer group, gateway (Tansu)"
SHARE_KAFKA = "share, Kafka 4.4 native"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="a checkout to run a second gateway from")
    parser.add_argument("--profile", type=Path, help="write our gateway's cProfile here")
    parser.add_argument("--sides", default="share,group,kafka,baseline")
    parser.add_argument(
        "--storage",
        choices=("sqlite", "sqlite-normal", "memory"),
        default="sqlite",
        help="the gateways' storage: SQLite fsyncing every commit (the default), SQLite fsyncing "
        "at checkpoints only (synchronous=NORMAL), or memory (nothing written to disk)",
    )
    args = parser.parse_args()
    chosen = set(args.sides.split(","))
    shape = Shape(args.records, args.size, args.partitions, args.consumers)
    results: dict[str, list[dict[str, float]]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_tansu(Path(tmp)) as port,
        running_gateway_from(
            REPO, f"127.0.0.1:{port}", storage_url(args.storage, f"{tmp}/gateway.db"), args.profile
        ) as gateway,
        (
            running_gateway_from(
                args.baseline, f"127.0.0.1:{port}", storage_url(args.storage, f"{tmp}/baseline.db")
            )
            if args.baseline and "baseline" in chosen
            else nullcontext()
        ) as baseline,
        running_kafka() if "kafka" in chosen else nullcontext() as kafka,
    ):
        pid = gateway.process.pid
        sides: list[tuple[str, Side, int | None]] = []
        if "share" in chosen:
            sides.append((SHARE_GATEWAY, lambda mark: share_side(gateway.bootstrap, shape, mark), pid))
        if baseline is not None:
            base_pid = baseline.process.pid
            sides.append((SHARE_BASELINE, lambda mark: share_side(baseline.bootstrap, shape, mark), base_pid))
        if "group" in chosen:
            sides.append((GROUP_GATEWAY, lambda mark: group_side(gateway.bootstrap, shape, mark), pid))
        if kafka is not None:
            sides.append((SHARE_KAFKA, lambda mark: share_side(kafka.bootstrap, shape, mark), None))
        for round_ in range(args.rounds):
            turn = round_ % len(sides)
            order = sides[turn:] + sides[:turn]
            for name, side, side_pid in order:
                result = measured(side, side_pid)
                results.setdefault(name, []).append(result)
                print(f"round {round_ + 1} {name}: {format_result(result)}", flush=True)
    print()
    print(f"{shape.records:,} records of {shape.size} bytes, {shape.partitions} partitions, "
          f"{shape.consumers} consumer(s); medians of {args.rounds} rounds")  # fmt: skip
    print("| side | records/s | ack p50 ms | ack p99 ms | gateway CPU ms / 1,000 records |")
    print("|---|---|---|---|---|")
    rates: dict[str, float] = {}
    for name, runs in results.items():
        rates[name] = statistics.median(r["rate"] for r in runs)
        cpu = [r["cpu_ms_per_1000"] for r in runs if "cpu_ms_per_1000" in r]
        print(
            f"| {name} | {rates[name]:,.0f} "
            f"| {statistics.median(r['p50'] for r in runs):.1f} | {statistics.median(r['p99'] for r in runs):.1f} "
            f"| {f'{statistics.median(cpu):.1f}' if cpu else '-'} |"
        )  # fmt: skip
    print()
    for other, target in ((GROUP_GATEWAY, " (target >= 80%)"), (SHARE_KAFKA, " (target >= 100%)"),
                          (SHARE_BASELINE, "")):  # fmt: skip
        if SHARE_GATEWAY in rates and other in rates:
            print(f"{SHARE_GATEWAY} / {other}: {rates[SHARE_GATEWAY] / rates[other]:.0%}{target}")
    if SHARE_BASELINE in rates and SHARE_KAFKA in rates:
        print(f"{SHARE_BASELINE} / {SHARE_KAFKA}: {rates[SHARE_BASELINE] / rates[SHARE_KAFKA]:.0%}")


def storage_url(kind: str, path: str) -> str:
    if kind == "memory":
        return "memory://"
    return f"sqlite:///{path}" + ("?synchronous=NORMAL" if kind == "sqlite-normal" else "")


def format_result(result: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:,.1f}" for k, v in result.items())


if __name__ == "__main__":
    main()
