"""Group members of one client library in one process, committing continuously.

Run as ``python -m tests.multinode.workload '<json config>'``. The config names the library
(``kafka-python``, ``aiokafka`` or ``confluent``), the group protocol (``classic``, or
``consumer`` for KIP-848 with confluent-kafka), the bootstrap list (every node), and the members:
``[{"name", "group", "topic"}, ...]``. Each member subscribes to its topic and, every
``commit_interval_ms``, commits an explicit offset for each partition it owns (the logs are empty
in standalone mode, so the offsets are ours to choose): the wall clock in microseconds, which
grows across processes, so the last acknowledged offset of a partition is its largest.

Events go to the JSON-lines file ``events``, one per line, each with the member ``m``, group
``g`` and wall-clock time ``t``:

- ``owns`` ``parts``: the member's whole set of owned partitions after a rebalance callback
  (assigned, revoked or lost), so ownership intervals can be rebuilt for any protocol;
- ``acked`` ``offsets`` ``{partition: offset}``: a commit the coordinator acknowledged (the
  client call returned without error);
- ``commit_failed`` ``error``: a commit that raised (retriable during a failover);
- ``crashed`` ``error``: the member's loop died.

The process runs until its stdin reaches EOF or reads ``stop``; members then close (leaving their
groups) and record ``owns []``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

Emit = Callable[..., None]

KAFKA_PYTHON = "kafka-python"
AIOKAFKA = "aiokafka"
CONFLUENT = "confluent"


def _offset_now() -> int:
    return time.time_ns() // 1000


def _kafka_python_member(
    config: dict[str, Any], member: dict[str, str], emit: Emit, stop: threading.Event
) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=config["bootstrap"].split(","),
        group_id=member["group"],
        client_id=member["name"],
        session_timeout_ms=config["session_timeout_ms"],
        heartbeat_interval_ms=config["heartbeat_interval_ms"],
        max_poll_interval_ms=config["rebalance_timeout_ms"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        reconnect_backoff_max_ms=500,
        retry_backoff_ms=100,
        request_timeout_ms=config["request_timeout_ms"],
    )
    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            owned.difference_update(tp.partition for tp in revoked)
            emit("owns", member, parts=sorted(owned))

        def on_partitions_lost(self, lost: Any) -> None:
            owned.difference_update(tp.partition for tp in lost)
            emit("owns", member, parts=sorted(owned))

        def on_partitions_assigned(self, assigned: Any) -> None:
            owned.update(tp.partition for tp in assigned)
            emit("owns", member, parts=sorted(owned))

    consumer.subscribe([member["topic"]], listener=Listener())
    consumer.partitions_for_topic(member["topic"])  # see tests/integration/clients.py
    next_commit = 0.0
    while not stop.is_set():
        consumer.poll(timeout_ms=100)
        if time.monotonic() < next_commit or not owned:
            continue
        next_commit = time.monotonic() + config["commit_interval_ms"] / 1000
        offset = _offset_now()
        offsets = {TopicPartition(member["topic"], p): OffsetAndMetadata(offset, "", -1) for p in owned}
        try:
            consumer.commit(offsets)
        except Exception as exc:  # CommitFailedError, KafkaError: not acknowledged
            emit("commit_failed", member, error=repr(exc))
        else:
            emit("acked", member, offsets={p: offset for p in sorted(owned)})
    consumer.close()
    emit("owns", member, parts=[])


def _confluent_member(
    config: dict[str, Any], member: dict[str, str], emit: Emit, stop: threading.Event
) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    settings: dict[str, Any] = {
        "bootstrap.servers": config["bootstrap"],
        "broker.address.family": "v4",
        "group.id": member["group"],
        "group.protocol": config["protocol"],
        "client.id": member["name"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "reconnect.backoff.max.ms": 500,
        "retry.backoff.max.ms": 500,
    }
    if config["protocol"] == "classic":  # KIP-848: the timeouts are the coordinator's
        settings["session.timeout.ms"] = config["session_timeout_ms"]
        settings["heartbeat.interval.ms"] = config["heartbeat_interval_ms"]
        settings["max.poll.interval.ms"] = config["rebalance_timeout_ms"]
    consumer = Consumer(settings)
    owned: set[int] = set()

    def on_assign(_: Any, partitions: list[Any]) -> None:
        owned.update(tp.partition for tp in partitions)
        emit("owns", member, parts=sorted(owned))

    def on_revoke(_: Any, partitions: list[Any]) -> None:
        owned.difference_update(tp.partition for tp in partitions)
        emit("owns", member, parts=sorted(owned))

    consumer.subscribe([member["topic"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    next_commit = 0.0
    while not stop.is_set():
        consumer.poll(0.1)
        if time.monotonic() < next_commit or not owned:
            continue
        next_commit = time.monotonic() + config["commit_interval_ms"] / 1000
        offset = _offset_now()
        partitions = sorted(owned)
        try:
            answered = consumer.commit(
                offsets=[TopicPartition(member["topic"], p, offset) for p in partitions], asynchronous=False
            )
        except KafkaException as exc:
            emit("commit_failed", member, error=str(exc))
            continue
        acked = {tp.partition: offset for tp in answered or [] if tp.error is None}
        if acked:
            emit("acked", member, offsets=acked)
        if len(acked) != len(partitions):
            emit("commit_failed", member, error=str([tp.error for tp in answered or [] if tp.error]))
    consumer.close()
    emit("owns", member, parts=[])


async def _aiokafka_member(
    config: dict[str, Any], member: dict[str, str], emit: Emit, stop: threading.Event
) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=config["bootstrap"].split(","),
        group_id=member["group"],
        client_id=member["name"],
        session_timeout_ms=config["session_timeout_ms"],
        heartbeat_interval_ms=config["heartbeat_interval_ms"],
        rebalance_timeout_ms=config["rebalance_timeout_ms"],
        max_poll_interval_ms=config["rebalance_timeout_ms"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        retry_backoff_ms=100,
        request_timeout_ms=config["request_timeout_ms"],
    )
    owned: set[int] = set()

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            owned.difference_update(tp.partition for tp in revoked)
            emit("owns", member, parts=sorted(owned))

        async def on_partitions_assigned(self, assigned: Any) -> None:
            owned.update(tp.partition for tp in assigned)
            emit("owns", member, parts=sorted(owned))

    await consumer.start()
    consumer.subscribe([member["topic"]], listener=Listener())
    next_commit = 0.0
    try:
        while not stop.is_set():
            await consumer.getmany(timeout_ms=100)
            if time.monotonic() < next_commit or not owned:
                continue
            next_commit = time.monotonic() + config["commit_interval_ms"] / 1000
            offset = _offset_now()
            partitions = sorted(owned)
            try:
                await consumer.commit({TopicPartition(member["topic"], p): offset for p in partitions})
            except Exception as exc:  # CommitFailedError, KafkaError: not acknowledged
                emit("commit_failed", member, error=repr(exc))
            else:
                emit("acked", member, offsets=dict.fromkeys(partitions, offset))
    finally:
        await consumer.stop()
        emit("owns", member, parts=[])


def main(config: dict[str, Any]) -> None:
    # The clients' own warnings, with times to line them up with the events and the node logs.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(threadName)s %(name)s: %(message)s")
    if os.environ.get("WORKLOAD_DEBUG"):
        logging.getLogger("aiokafka.client").setLevel(logging.DEBUG)
        logging.getLogger("aiokafka.consumer.group_coordinator").setLevel(logging.DEBUG)
    stop = threading.Event()
    lock = threading.Lock()
    events = open(config["events"], "a", encoding="utf-8")  # noqa: SIM115 (closed at the end)

    def emit(kind: str, member: dict[str, str], **fields: Any) -> None:
        line = json.dumps({"e": kind, "m": member["name"], "g": member["group"], "t": time.time(), **fields})
        with lock:
            events.write(line + "\n")
            events.flush()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()

    def guarded(run: Callable[[], None], member: dict[str, str]) -> None:
        try:
            run()
        except Exception as exc:
            emit("crashed", member, error=repr(exc))

    threading.Thread(target=watch_stdin, daemon=True).start()
    members: list[dict[str, str]] = config["members"]
    if config["lib"] == AIOKAFKA:

        async def run_all() -> None:
            async def one(member: dict[str, str]) -> None:
                try:
                    await _aiokafka_member(config, member, emit, stop)
                except Exception as exc:
                    emit("crashed", member, error=repr(exc))

            await asyncio.gather(*(one(m) for m in members))

        asyncio.run(run_all())
    else:
        member_main = {KAFKA_PYTHON: _kafka_python_member, CONFLUENT: _confluent_member}[config["lib"]]
        threads = [
            threading.Thread(
                target=guarded, args=(lambda m=m: member_main(config, m, emit, stop), m), name=m["name"]
            )
            for m in members
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    events.close()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
