"""What the compose checks do with kafka-python through a published port: a group member joins
and commits, and the committed offsets are read back."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

CLIENT_TIMEOUTS = {"request_timeout_ms": 15000}


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` unless it exists."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **CLIENT_TIMEOUTS)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def join_and_commit(
    bootstrap: str, group: str, topic: str, partitions: int, first_offset: int
) -> dict[int, int]:
    """A member of ``group`` joins, gets every partition of ``topic`` and commits an offset for
    each; answers partition -> committed offset."""
    ensure_topic(bootstrap, topic, partitions)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
        **CLIENT_TIMEOUTS,
    )
    try:
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < partitions:
            assert time.monotonic() < deadline, (
                f"the member got {consumer.assignment()} of {partitions} partitions"
            )
            consumer.poll(timeout_ms=500)
        offsets = {partition: first_offset + partition for partition in range(partitions)}
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()
    return offsets


def committed(bootstrap: str, group: str, topic: str, timeout: float = 60) -> dict[int, int]:
    """The group's committed offsets on ``topic``, asked until the coordinator has loaded them."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _committed_once(bootstrap, group, topic)
        except (KafkaError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _committed_once(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **CLIENT_TIMEOUTS)
    try:
        found = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {tp.partition: om.offset for tp, om in found.items() if tp.topic == topic and om.offset >= 0}


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> set[bytes]:
    """Create ``topic`` and produce ``count`` records to it, acknowledged by every replica;
    answers the record values."""
    ensure_topic(bootstrap, topic, partitions)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **CLIENT_TIMEOUTS)
    values = {f"record-{n}".encode() for n in range(count)}
    try:
        futures = [
            producer.send(topic, value=value, partition=n % partitions)
            for n, value in enumerate(sorted(values))
        ]
        producer.flush(timeout=60)
        for future in futures:
            future.get(timeout=1)
    finally:
        producer.close()
    return values


def consume_and_commit(
    bootstrap: str, group: str, topic: str, count: int
) -> tuple[list[bytes], dict[int, int]]:
    """A member of ``group`` reads ``count`` records of ``topic`` from the start and commits
    what it read; answers the values read and partition -> committed offset."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
        **CLIENT_TIMEOUTS,
    )
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 90
        while len(values) < count:
            assert time.monotonic() < deadline, f"read {len(values)} of {count} records"
            for records in consumer.poll(timeout_ms=500).values():
                values += [record.value for record in records]
        consumer.commit()
        offsets = {tp.partition: consumer.position(tp) for tp in consumer.assignment()}
    finally:
        consumer.close()
    return values, offsets
