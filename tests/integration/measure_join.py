"""Measure join and rebalance latency with kafka-python (not a test; prints numbers).

    .venv/bin/python -m tests.integration.measure_join [--runs N]

1. A single kafka-python consumer subscribing to a 6-partition topic of a fresh group: time from
   constructing the KafkaConsumer to its rebalance listener receiving all 6 partitions, with
   group.initial.rebalance.delay.ms = 0 and = 3000 (Kafka's default).
2. A Stable 3-member group (worker subprocesses, heartbeat.interval.ms 1000 and kafka-python's
   default 3000) where one member closes (LeaveGroup) at a random point of the heartbeat cycle:
   time from its close to both survivors having their new assignments. The survivors learn of the
   rebalance from their next Heartbeat, so this is up to one heartbeat interval plus the rejoin.

Each server is a subprocess on SQLite in a temp dir, loopback only; everything it starts it stops.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.integration import clients
from tests.support.server import running_server


def single_consumer_join(bootstrap: str, group: str, topic: str, heartbeat_ms: int) -> float:
    """Seconds from KafkaConsumer() to the listener receiving all partitions (plain user code:
    subscribe, then poll; kafka-python first joins with no topic metadata, assigns nothing and
    rejoins once the metadata arrives, which is part of what a user waits for)."""
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    assigned_at: list[float] = []

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            if len(assigned) == clients.PARTITIONS:
                assigned_at.append(time.monotonic())

    started = time.monotonic()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        session_timeout_ms=clients.SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=heartbeat_ms,
        max_poll_interval_ms=clients.REBALANCE_TIMEOUT_MS,
        enable_auto_commit=False,
    )
    try:
        consumer.subscribe([topic], listener=Listener())
        deadline = started + 30
        while not assigned_at:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{group}: no assignment within 30 s")
            consumer.poll(timeout_ms=100)
        return assigned_at[0] - started
    finally:
        consumer.close()


def rebalance_after_leave(bootstrap: str, group: str, topic: str, heartbeat_ms: int) -> float:
    """Seconds from one of three Stable members starting to close (it leaves the group) to both
    survivors' listeners holding the new assignment (timestamps taken in the worker processes)."""
    with clients.pool(clients.KAFKA_PYTHON, bootstrap, group, topic, heartbeat_ms) as workers:
        members = [workers.spawn(f"{group}-m{i}") for i in range(3)]
        workers.wait_split(members)
        # Leave at a random point of the survivors' heartbeat cycle: they learn of the rebalance
        # from their next Heartbeat (REBALANCE_IN_PROGRESS), so the wait is up to one interval.
        time.sleep(random.uniform(0, heartbeat_ms / 1000))
        leaver, survivors = members[1], [members[0], members[2]]
        marks = [len(w.snapshot()) for w in survivors]
        mark = len(leaver.snapshot())
        leaver.close()
        leaving = leaver.wait_event("revoked", after=mark)["t"]  # kafka-python revokes, then leaves
        events = [w.wait_event("assigned", after=m) for w, m in zip(survivors, marks, strict=True)]
        workers.wait_split(survivors)
        return max(event["t"] for event in events) - leaving


def summary(samples: list[float]) -> str:
    return (
        f"median {statistics.median(samples) * 1000:7.0f} ms   "
        f"min {min(samples) * 1000:7.0f} ms   max {max(samples) * 1000:7.0f} ms   (n={len(samples)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    topic = "measured"
    with tempfile.TemporaryDirectory() as tmp:
        for delay in (0, 3000):
            storage = f"sqlite:///{Path(tmp) / f'delay-{delay}.db'}"
            with running_server(storage, {"group-initial-rebalance-delay-ms": str(delay)}) as server:
                clients.create_topic(server.bootstrap, topic)
                samples = [
                    single_consumer_join(server.bootstrap, f"join-{delay}-{i}", topic, 1000)
                    for i in range(args.runs)
                ]
                print(f"single consumer, initial delay {delay:4d} ms:   {summary(samples)}", flush=True)
        storage = f"sqlite:///{Path(tmp) / 'leave.db'}"
        with running_server(storage) as server:
            clients.create_topic(server.bootstrap, topic)
            for heartbeat in (1000, 3000):
                samples = [
                    rebalance_after_leave(server.bootstrap, f"leave-hb{heartbeat}-{i}", topic, heartbeat)
                    for i in range(args.runs)
                ]
                print(f"3 members, one leaves, heartbeat {heartbeat} ms: {summary(samples)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
