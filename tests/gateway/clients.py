"""Real Kafka clients consuming through the gateway, each in its own thread."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError as KafkaPythonError


@dataclass
class Member:
    """What one consumer received and what it owned when told to stop."""

    name: str
    records: list[tuple[int, int, bytes]] = field(default_factory=list)  # partition, offset, value
    assignment: set[Any] = field(default_factory=set)  # partitions, or (topic, partition) pairs
    error: BaseException | None = None
    retriable_errors: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None


def produce_kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        sent = [producer.send(topic, value) for value in values]
        producer.flush(60)
        for future in sent:  # a record that failed fails here, not as a consumer short of it
            future.get(timeout=60)
    finally:
        producer.close()


def produce_confluent(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for value in values:
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0 and not failures, failures


def _run(member: Member, body: Callable[[], None]) -> None:
    def target() -> None:
        try:
            body()
        except BaseException as exc:  # reported by the test
            member.error = exc

    member.thread = threading.Thread(target=target, name=member.name, daemon=True)
    member.thread.start()


def kafka_python_member(
    bootstrap: str, topic: str, group: str, stop: threading.Event, pause_s: float = 0.0
) -> Member:
    member = Member("kafka-python")

    def body() -> None:
        consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
            max_poll_records=10 if pause_s else 500,
        )  # fmt: skip
        # The topic's metadata before the first JoinGroup: a first leader assigning from empty
        # metadata rejoins, and kafka-python 3.0.12 can drop that rejoin's result and stop
        # heartbeating (tests/integration/clients.py, _kafka_python_worker).
        consumer.partitions_for_topic(topic)
        try:
            while not stop.is_set():
                try:
                    batch = consumer.poll(timeout_ms=200)
                except KafkaPythonError as exc:
                    member.retriable_errors.append(repr(exc))  # the gateway restarting: poll again
                    time.sleep(0.1)
                    continue
                for tp, records in batch.items():
                    member.records += [(tp.partition, r.offset, r.value) for r in records]
                if batch:
                    # Coordinator away (a restart): the batch is re-read later, a counted duplicate.
                    try:
                        consumer.commit()
                    except KafkaPythonError as exc:
                        member.retriable_errors.append(repr(exc))
                    time.sleep(pause_s)
                member.assignment = {tp.partition for tp in consumer.assignment()}
        finally:
            consumer.close()

    _run(member, body)
    return member


def aiokafka_member(bootstrap: str, topic: str, group: str, stop: threading.Event) -> Member:
    member = Member("aiokafka")

    async def consume() -> None:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
        )  # fmt: skip
        await consumer.start()
        try:
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                for tp, records in batch.items():
                    member.records += [(tp.partition, r.offset, r.value or b"") for r in records]
                if batch:
                    await consumer.commit()
                member.assignment = {tp.partition for tp in consumer.assignment()}
        finally:
            await consumer.stop()

    _run(member, lambda: asyncio.run(consume()))
    return member


def confluent_member(
    bootstrap: str,
    topic: str,
    group: str,
    stop: threading.Event,
    protocol: str = "classic",
    name: str = "",
    by_topic: bool = False,
) -> Member:
    member = Member(name or f"confluent-{protocol}")
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})

    def body() -> None:
        consumer = Consumer(config)
        consumer.subscribe([topic])
        try:
            while not stop.is_set():
                messages = consumer.consume(500, 0.2)
                got = False
                for message in messages:
                    if message.error() is None:
                        member.records.append((message.partition(), message.offset(), message.value()))
                        got = True
                if got:
                    consumer.commit(asynchronous=False)
                member.assignment = {
                    (tp.topic, tp.partition) if by_topic else tp.partition for tp in consumer.assignment()
                }
        finally:
            consumer.close()

    _run(member, body)
    return member


def consume_until(
    members: list[Member], expected: set[bytes], partitions: int, stop: threading.Event, timeout: float
) -> None:
    """Until every value is seen and the members own disjoint shares covering all partitions."""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            errors = [m.error for m in members if m.error is not None]
            assert not errors, errors
            seen = {value for m in members for _, _, value in m.records}
            owned = [m.assignment for m in members]
            if (
                seen >= expected
                and all(owned)
                and sum(len(o) for o in owned) == partitions
                and set().union(*owned) == set(range(partitions))
            ):
                return
            time.sleep(0.1)
        seen = {value for m in members for _, _, value in m.records}
        raise AssertionError(
            f"after {timeout:.0f} s: {len(seen & expected)}/{len(expected)} records, "
            f"assignments {[(m.name, sorted(m.assignment)) for m in members]}"
        )
    finally:
        stop.set()
        for member in members:
            if member.thread is not None:
                member.thread.join(30)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()
