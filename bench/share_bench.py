"""Share consumption (KIP-932) side by side: a share group through the gateway (Tansu upstream), a
consumer group through the same gateway, and Kafka 4.4's own share groups.

    python bench/share_bench.py                       # 20,000 records of 256 bytes, 3 rounds
    python bench/share_bench.py --records 5000 --rounds 1

Each round runs the three sides in an order that rotates (so a drift of the machine's speed
does not favour one), each on a fresh topic of 3 partitions with one confluent-kafka consumer:

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
(user+system, /proc) per 1,000 records. Medians over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway.conftest import running_gateway, running_tansu
from tests.support.kafka_broker import running_kafka

PARTITIONS = 3
CLOCK_TICKS = 100


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, records: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 0})
    payload = b"x" * size
    for n in range(records):
        producer.produce(topic, payload, partition=n % PARTITIONS)
        if n % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def share_side(bootstrap: str, records: int, size: int) -> dict[str, float]:
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # joined and fetching: its share-partitions started
        consumer.poll(0.5)
        if time.monotonic() > deadline - 15:
            break
    produce(bootstrap, topic, records, size)
    got, acks = 0, []
    first = time.monotonic()  # the records are all there: from the first poll to the last record
    end = first + 300
    while got < records and time.monotonic() < end:
        batch = [m for m in consumer.poll(1.0) if m.error() is None]
        if not batch:
            continue
        for message in batch:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        started = time.monotonic()
        consumer.commit_sync()
        acks.append((time.monotonic() - started) * 1000)
        got += len(batch)
    last = time.monotonic()
    consumer.close()
    return {
        "records": got,
        "rate": got / max(last - first, 1e-9),
        "p50": percentile(acks, 0.5),
        "p99": percentile(acks, 0.99),
    }


def group_side(bootstrap: str, records: int, size: int) -> dict[str, float]:
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, records, size)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
         "enable.auto.commit": False, "log_level": 0}
    )  # fmt: skip
    consumer.subscribe([topic])
    got, acks = 0, []
    first = time.monotonic()  # the records are all there: from the first poll to the last record
    end = first + 300
    while got < records and time.monotonic() < end:
        batch = [m for m in consumer.consume(500, 1.0) if m.error() is None]
        if not batch:
            continue
        started = time.monotonic()
        consumer.commit(asynchronous=False)
        acks.append((time.monotonic() - started) * 1000)
        got += len(batch)
    last = time.monotonic()
    consumer.close()
    return {
        "records": got,
        "rate": got / max(last - first, 1e-9),
        "p50": percentile(acks, 0.5),
        "p99": percentile(acks, 0.99),
    }


def measured(side: Callable[[], dict[str, float]], pid: int | None) -> dict[str, float]:
    before = cpu_seconds(pid) if pid else 0.0
    result = side()
    if pid:
        result["cpu_ms_per_1000"] = (cpu_seconds(pid) - before) * 1000 / max(result["records"], 1) * 1000
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_tansu(Path(tmp)) as port,
        running_gateway(f"127.0.0.1:{port}", storage=f"sqlite:///{tmp}/gateway.db") as gateway,
        running_kafka() as kafka,
    ):
        pid = gateway.process.pid
        sides: list[tuple[str, Callable[[], dict[str, float]], int | None]] = [
            ("share, gateway (Tansu)", lambda: share_side(gateway.bootstrap, args.records, args.size), pid),
            (
                "consumer group, gateway (Tansu)",
                lambda: group_side(gateway.bootstrap, args.records, args.size),
                pid,
            ),
            ("share, Kafka 4.4 native", lambda: share_side(kafka.bootstrap, args.records, args.size), None),
        ]
        for round_ in range(args.rounds):
            order = sides[round_ % 3 :] + sides[: round_ % 3]
            for name, side, side_pid in order:
                result = measured(side, side_pid)
                results.setdefault(name, []).append(result)
                print(f"round {round_ + 1} {name}: {format_result(result)}", flush=True)
    print()
    print("| side | records/s | ack p50 ms | ack p99 ms | gateway CPU ms / 1,000 records |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        cpu = [r["cpu_ms_per_1000"] for r in runs if "cpu_ms_per_1000" in r]
        print(
            f"| {name} | {statistics.median(r['rate'] for r in runs):,.0f} "
            f"| {statistics.median(r['p50'] for r in runs):.1f} | {statistics.median(r['p99'] for r in runs):.1f} "
            f"| {statistics.median(cpu):.1f} |" if cpu else
            f"| {name} | {statistics.median(r['rate'] for r in runs):,.0f} "
            f"| {statistics.median(r['p50'] for r in runs):.1f} | {statistics.median(r['p99'] for r in runs):.1f} | - |"
        )  # fmt: skip


def format_result(result: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:,.1f}" for k, v in result.items())


if __name__ == "__main__":
    main()
