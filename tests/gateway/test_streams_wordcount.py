"""A Kafka Streams 4.4 application with group.protocol=streams (KIP-1071) through the gateway:
its streams group lives in the gateway, its topics (input, repartition, changelog, output) on
the upstream cluster, the internal ones created by the gateway (docs/streams-groups.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from tests.gateway.conftest import running_gateway
from tests.support.kafka_broker import KafkaCluster, KafkaUnavailable
from tests.support.server import ServerProcess
from tests.support.streams_app import input_lines, latest_counts, produce_lines, word_count_instances
from tests.support.wire_client import WireClient

APP = "wordcount"


def _create_topics(bootstrap: str) -> None:
    with WireClient(bootstrap) as client:
        response = client.request(
            ApiKey.CREATE_TOPICS,
            5,
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(name="words", num_partitions=3, replication_factor=1),
                    CreatableTopic(name="counts", num_partitions=3, replication_factor=1),
                ]
            ),
        )
    assert {t.name: t.error_code for t in response.topics} == {"words": 0, "counts": 0}


def _described(bootstrap: str) -> object:
    with WireClient(bootstrap) as client:
        return client.request(ApiKey.STREAMS_GROUP_DESCRIBE, 1, StreamsGroupDescribeRequest([APP])).groups[0]


def _run_word_count(gateway: ServerProcess, tmp_path: Path) -> None:
    _create_topics(gateway.bootstrap)
    lines, expected = input_lines()
    try:
        instances = word_count_instances(gateway.bootstrap, APP, tmp_path, 2)
        with instances as running:
            deadline = time.monotonic() + 120
            while not all(i.running() for i in running):
                assert time.monotonic() < deadline, "\n".join(i.text()[-3000:] for i in running)
                assert all(i.process.poll() is None for i in running), "\n".join(
                    i.text()[-3000:] for i in running
                )
                time.sleep(0.2)
            produce_lines(gateway.bootstrap, lines)
            counts = latest_counts(gateway.bootstrap, expected, 120)
            assert counts == expected, "\n".join(i.text()[-3000:] for i in running)
            group = _described(gateway.bootstrap)
            assert group.group_state == "Stable"  # type: ignore[attr-defined]
            tasks = [
                (t.subtopology_id, p)
                for m in group.members  # type: ignore[attr-defined]
                for t in m.assignment.active_tasks
                for p in t.partitions
            ]
            assert sorted(tasks) == [(s, p) for s in ("0", "1") for p in range(3)]
            assert len(group.members) == 2  # type: ignore[attr-defined]
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def streams_gateway(tansu_port: int) -> Iterator[ServerProcess]:
    with running_gateway(
        f"127.0.0.1:{tansu_port}", **{"group-streams-heartbeat-interval-ms": "500"}
    ) as server:
        yield server


def test_word_count_through_the_gateway_on_tansu(streams_gateway: ServerProcess, tmp_path: Path) -> None:
    _run_word_count(streams_gateway, tmp_path)


@pytest.mark.kafka
def test_word_count_through_the_gateway_on_kafka(kafka_broker: KafkaCluster, tmp_path: Path) -> None:
    with running_gateway(kafka_broker.bootstrap, **{"group-streams-heartbeat-interval-ms": "500"}) as gateway:
        _run_word_count(gateway, tmp_path)
