"""Real clients through the gateway to a real Tansu broker: records from upstream, groups here."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.gateway.clients import (
    Member,
    aiokafka_member,
    committed,
    confluent_member,
    consume_until,
    kafka_python_member,
    produce_confluent,
    produce_kafka_python,
)
from tests.gateway.conftest import running_gateway
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 6
# CI size; GATEWAY_RECORDS=100000 (with -m slow for the long variant) runs the big one.
RECORDS = int(os.environ.get("GATEWAY_RECORDS", "2000"))


@pytest.fixture(scope="module")
def loaded(tansu_port: int) -> Iterator[tuple[ServerProcess, str, set[bytes]]]:
    """A gateway and a topic filled through it by kafka-python and confluent-kafka."""
    with running_gateway(f"127.0.0.1:{tansu_port}") as gateway:
        topic = "orders"
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        finally:
            admin.close()
        half = RECORDS // 2
        values = [f"record-{i}".encode() for i in range(RECORDS)]
        produce_kafka_python(gateway.bootstrap, topic, values[:half])
        produce_confluent(gateway.bootstrap, topic, values[half:])
        yield gateway, topic, set(values)


def _check_split(members: list[Member], expected: set[bytes]) -> int:
    """Every record delivered; returns the number of duplicates (re-deliveries after rebalances)."""
    counts = Counter(value for m in members for _, _, value in m.records)
    assert set(counts) == expected
    owned = [m.assignment for m in members]
    assert sum(len(o) for o in owned) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS))
    return sum(counts.values()) - len(counts)


def test_three_client_libraries_share_one_classic_group(
    loaded: tuple[ServerProcess, str, set[bytes]], tansu_port: int
) -> None:
    gateway, topic, expected = loaded
    stop = threading.Event()
    members = [
        kafka_python_member(gateway.bootstrap, topic, "mixed", stop),
        aiokafka_member(gateway.bootstrap, topic, "mixed", stop),
        confluent_member(gateway.bootstrap, topic, "mixed", stop),
    ]
    consume_until(members, expected, PARTITIONS, stop, timeout=90)
    duplicates = _check_split(members, expected)
    assert duplicates < len(expected)  # only re-reads of uncommitted batches around rebalances
    # The offsets live here: the gateway has them, upstream's own coordinator knows nothing.
    ours = committed(gateway.bootstrap, "mixed", topic, PARTITIONS)
    assert sum(o or 0 for o in ours.values()) == len(expected)
    theirs = committed(f"127.0.0.1:{tansu_port}", "mixed", topic, PARTITIONS)
    assert all(o is None for o in theirs.values())
    assert "group mixed: generation" in gateway.log_text()


def test_kip848_members_on_an_upstream_without_kip848(loaded: tuple[ServerProcess, str, set[bytes]]) -> None:
    gateway, topic, expected = loaded
    stop = threading.Event()
    members = [
        confluent_member(gateway.bootstrap, topic, "next-gen", stop, "consumer", name=f"kip848-{i}")
        for i in range(2)
    ]
    consume_until(members, expected, PARTITIONS, stop, timeout=90)
    _check_split(members, expected)
    assert sum(o or 0 for o in committed(gateway.bootstrap, "next-gen", topic, PARTITIONS).values()) == len(
        expected
    )
