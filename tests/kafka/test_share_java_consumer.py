"""Kafka 4.4's Java KafkaShareConsumer (tests/java ShareScenario) through the gateway on Tansu,
and the same scenario on Kafka 4.4's own share groups as the oracle: three consumers share one
partition, every record is accepted exactly once, a record released once comes back with
delivery count 2 (docs/share-groups.md, "The data plane")."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.conftest import running_gateway, running_tansu
from tests.gateway.share_support import create_topic
from tests.support.java_driver import JavaDriver
from tests.support.kafka_broker import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.timeout(300)]

RECORDS = 120


@pytest.fixture(params=["gateway-tansu", "kafka-native"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "kafka-native":
        cluster: KafkaCluster = request.getfixturevalue("kafka_broker")
        yield cluster.bootstrap
        return
    with running_tansu(tmp_path) as port, running_gateway(f"127.0.0.1:{port}") as gateway:
        yield gateway.bootstrap


def test_java_share_consumers_share_a_partition(bootstrap: str, java_driver: JavaDriver) -> None:
    topic, group = f"jq-{uuid.uuid4().hex[:8]}", f"jg-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    answer = java_driver.call(
        "share", bootstrap=bootstrap, topic=topic, group=group, consumers=3, partitions=1,
        records=RECORDS, warmup_ms=6000, timeout_ms=90000, release_once=["r7"],
    )  # fmt: skip
    deliveries = [(int(c), str(v), int(n)) for c, v, n in answer["deliveries"]]
    values = Counter(v for _, v, _ in deliveries)
    assert set(values) == {f"r{n}" for n in range(RECORDS)}
    assert values["r7"] == 2 and all(count == 1 for v, count in values.items() if v != "r7")
    assert sorted(n for _, v, n in deliveries if v == "r7") == [1, 2]
    assert all(n == 1 for _, v, n in deliveries if v != "r7")
