"""Transactions per second through the gateway vs straight to Kafka 4.4 (docs/transactions.md).

    python bench/txn_bench.py                      # 3 rounds of 10 s per side
    python bench/txn_bench.py --seconds 5 --rounds 1

Starts an Apache Kafka 4.4 broker (the test component, tests/support/kafka_broker.py) and a
gateway in front of it (SQLite in a temporary directory, the server's default, so that a
TxnOffsetCommit is answered only once durable; ``--storage memory://`` to leave the disk out), and runs the same confluent-kafka transactional
producer against both, in alternating rounds (direct first in even rounds). Each transaction
produces 10 records (one per partition of the output topic) and commits offsets for the 10
partitions of the input topic with ``send_offsets_to_transaction``, then commits: through the
gateway, AddOffsetsToTxn and EndTxn go upstream and TxnOffsetCommit stays in the gateway. The
figure is transactions per second, one producer, sequential transactions (a latency-bound
workload: every transaction is four round trips and two upstream log appends). Medians over
the rounds, and the ratio gateway / direct (the target is at least 0.9).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.kafka_broker import running_kafka
from tests.support.server import start_server

PARTITIONS = 10


def _topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(60)


def transactions_per_second(bootstrap: str, upstream: str, seconds: float) -> float:
    name = uuid.uuid4().hex[:8]
    source, sink = f"in-{name}", f"out-{name}"
    _topics(upstream, source, sink)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{name}"})
    metadata = consumer.consumer_group_metadata()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{name}", "linger.ms": 0})
    producer.init_transactions(60)
    count = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        producer.begin_transaction()
        for partition in range(PARTITIONS):
            producer.produce(sink, b"x" * 100, partition=partition)
        offsets = [TopicPartition(source, p, count + 1) for p in range(PARTITIONS)]
        producer.send_offsets_to_transaction(offsets, metadata, 30)
        producer.commit_transaction(30)
        count += 1
    elapsed = time.monotonic() - started
    consumer.close()
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--storage", help="the gateway's storage URL (default: SQLite in a temporary directory)"
    )
    args = parser.parse_args()
    with running_kafka() as kafka, tempfile.TemporaryDirectory() as scratch:
        gateway = start_server(
            args.storage or f"sqlite:///{scratch}/gateway.db",
            {"upstream-bootstrap-servers": kafka.bootstrap, "upstream-metadata-refresh-ms": "500"},
        )
        try:
            gateway.wait_loaded()
            direct: list[float] = []
            through: list[float] = []
            for round_ in range(args.rounds):
                sides = [("direct", kafka.bootstrap, direct), ("gateway", gateway.bootstrap, through)]
                for label, bootstrap, figures in sides if round_ % 2 == 0 else reversed(sides):
                    figures.append(transactions_per_second(bootstrap, kafka.bootstrap, args.seconds))
                    print(f"round {round_ + 1} {label}: {figures[-1]:.1f} transactions/s", flush=True)
        finally:
            gateway.stop()
    d, g = statistics.median(direct), statistics.median(through)
    print(f"\n| side | transactions/s (median of {args.rounds}) |\n|---|---|")
    print(f"| straight to Kafka 4.4 | {d:.1f} |\n| through the gateway | {g:.1f} |")
    print(f"\nratio gateway/direct: {g / d:.2f}")


if __name__ == "__main__":
    main()
