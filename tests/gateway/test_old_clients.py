"""A 2018-era client through the gateway: kafka-go 0.2.1 (Debian's
golang-github-segmentio-kafka-go-dev) produces with message format v1 (Produce v2) and reads with
Fetch v2, which modern clusters no longer serve; the gateway converts both ways (old_formats.py).
It also reads as a consumer group member of the gateway's coordinator."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.gateway.conftest import running_gateway
from tests.support.kafka_broker import KafkaCluster

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "kafka_go_021" / "main.go"
GOPATH = Path("/usr/share/gocode")  # where Debian's golang-*-dev packages put their sources
KAFKA_GO = GOPATH / "src/github.com/segmentio/kafka-go"
COUNT = 5


@pytest.fixture(scope="module")
def kafka_go(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client program, built offline against Debian's kafka-go 0.2.1 (GOPATH mode)."""
    assert KAFKA_GO.is_dir(), "golang-github-segmentio-kafka-go-dev is missing (.ci/setup)"
    binary = tmp_path_factory.mktemp("kafka-go") / "kafka_go_021"
    env = {**os.environ, "GOPATH": str(GOPATH), "GO111MODULE": "off", "GOFLAGS": "", "GOPROXY": "off"}
    subprocess.run(["go", "build", "-o", str(binary), str(SOURCE)], env=env, check=True, timeout=600)
    return binary


@pytest.fixture(params=["tansu", "kafka-4.4"])
def upstream(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "tansu":
        yield f"127.0.0.1:{request.getfixturevalue('tansu_port')}"
    else:
        request.applymarker(pytest.mark.kafka)
        cluster: KafkaCluster = request.getfixturevalue("kafka_broker")
        yield cluster.bootstrap


def test_kafka_go_0_2_1_produces_and_consumes_through_the_gateway(
    kafka_go: Path, upstream: str, request: pytest.FixtureRequest
) -> None:
    topic = f"old-client-{request.node.callspec.id}"
    with running_gateway(upstream) as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])
        finally:
            admin.close()
        done = subprocess.run(
            [str(kafka_go), gateway.bootstrap, topic, str(COUNT), str(COUNT)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [f"{i} k-{i} old-client-{i}" for i in range(COUNT)]

        # What it produced is stored as v2 batches a modern client reads...
        consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, auto_offset_reset="earliest")
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            values: list[bytes] = []
            for _ in range(50):
                values += [r.value for r in consumer.poll(500).get(partition, [])]
                if len(values) >= COUNT:
                    break
        finally:
            consumer.close()
        assert values == [f"old-client-{i}".encode() for i in range(COUNT)]

        # ...and what a modern client produces reaches the old one (it reads from offset 0).
        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)
        try:
            producer.send(topic, key=b"new", value=b"modern").get(30)
        finally:
            producer.close()
        again = subprocess.run(
            [str(kafka_go), gateway.bootstrap, topic, "0", str(COUNT + 1)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert f"{COUNT} new modern" in again.stdout.splitlines()

        # As a consumer group member (JoinGroup v1, SyncGroup v0, OffsetCommit v2), committing.
        member = subprocess.run(
            [str(kafka_go), gateway.bootstrap, topic, "0", str(COUNT + 1), "old-readers"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert member.returncode == 0, member.stderr
        assert [line.split()[0] for line in member.stdout.splitlines()] == [str(i) for i in range(COUNT + 1)]
        reader = KafkaConsumer(bootstrap_servers=gateway.bootstrap, group_id="old-readers")
        try:
            assert reader.committed(TopicPartition(topic, 0)) == COUNT + 1
        finally:
            reader.close()
