"""Real clients through the gateway to a real upstream (Tansu, Kafka 4.4): records from upstream,
groups here."""

from __future__ import annotations

import threading
import time
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
from tests.gateway.conftest import Upstream, running_gateway
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 6
RECORDS = 2000  # CI size; test_100k_records is the on-demand variant (-m slow)


def _load(gateway: ServerProcess, topic: str, records: int) -> set[bytes]:
    """A topic filled through the gateway, half by kafka-python, half by confluent-kafka."""
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    half = records // 2
    values = [f"{topic}-{i}".encode() for i in range(records)]
    produce_kafka_python(gateway.bootstrap, topic, values[:half])
    produce_confluent(gateway.bootstrap, topic, values[half:])
    return set(values)


@pytest.fixture(scope="module")
def loaded(upstream: Upstream) -> Iterator[tuple[ServerProcess, str, set[bytes]]]:
    with running_gateway(upstream.bootstrap) as gateway:
        yield gateway, "orders", _load(gateway, "orders", RECORDS)


def _check_split(members: list[Member], expected: set[bytes]) -> int:
    """Every record delivered; returns the number of duplicates (re-deliveries after rebalances)."""
    # (consume_until has seen the members own disjoint shares covering every partition.)
    counts = Counter(value for m in members for _, _, value in m.records)
    assert set(counts) == expected
    return sum(counts.values()) - len(counts)


def test_three_client_libraries_share_one_classic_group(
    loaded: tuple[ServerProcess, str, set[bytes]], upstream: Upstream
) -> None:
    _three_libraries(*loaded, upstream.bootstrap, timeout=90)


def _three_libraries(
    gateway: ServerProcess, topic: str, expected: set[bytes], upstream: str, timeout: float
) -> int:
    stop = threading.Event()
    members = [
        kafka_python_member(gateway.bootstrap, topic, "mixed", stop),
        aiokafka_member(gateway.bootstrap, topic, "mixed", stop),
        confluent_member(gateway.bootstrap, topic, "mixed", stop),
    ]
    consume_until(members, expected, PARTITIONS, stop, timeout=timeout)
    duplicates = _check_split(members, expected)
    assert duplicates < len(expected)  # only re-reads of uncommitted batches around rebalances
    # The offsets live here: the gateway has them, upstream's own coordinator knows nothing.
    ours = committed(gateway.bootstrap, "mixed", topic, PARTITIONS)
    assert sum(o or 0 for o in ours.values()) == len(expected)
    theirs = committed(upstream, "mixed", topic, PARTITIONS)
    assert all(o is None for o in theirs.values())
    assert "group mixed: generation" in gateway.log_text()
    return duplicates


def test_kip848_members_on_an_upstream_without_kip848(loaded: tuple[ServerProcess, str, set[bytes]]) -> None:
    _kip848(*loaded, timeout=90)


def _kip848(gateway: ServerProcess, topic: str, expected: set[bytes], timeout: float) -> None:
    stop = threading.Event()
    members = [
        confluent_member(gateway.bootstrap, topic, "next-gen", stop, "consumer", name=f"kip848-{i}")
        for i in range(2)
    ]
    consume_until(members, expected, PARTITIONS, stop, timeout=timeout)
    _check_split(members, expected)
    assert sum(o or 0 for o in committed(gateway.bootstrap, "next-gen", topic, PARTITIONS).values()) == len(
        expected
    )


@pytest.mark.slow
def test_100k_records(upstream: Upstream) -> None:
    with running_gateway(upstream.bootstrap) as gateway:
        started = time.monotonic()
        expected = _load(gateway, "orders-100k", 100_000)
        produced = time.monotonic()
        duplicates = _three_libraries(gateway, "orders-100k", expected, upstream.bootstrap, timeout=600)
        consumed = time.monotonic()
        _kip848(gateway, "orders-100k", expected, timeout=600)
        print(
            f"100k records: produced in {produced - started:.1f} s, classic group of three libraries "
            f"{consumed - produced:.1f} s ({duplicates} duplicates), KIP-848 group {time.monotonic() - consumed:.1f} s"
        )
