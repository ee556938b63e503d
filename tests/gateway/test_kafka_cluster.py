"""The gateway in front of a three-broker Apache Kafka 4.4 cluster (the session's ``kafka_cluster``):
a partition leader stopped mid-stream (its partitions move to the other brokers, clients hear
NOT_LEADER_OR_FOLLOWER through the gateway and follow the new leaders), then restarted; no record
lost, the group's commits kept here."""

from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.gateway.clients import committed, confluent_member, consume_until, produce_confluent
from tests.gateway.conftest import running_gateway
from tests.support.kafka_broker import KafkaCluster
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

TOPIC = "moving-leaders"
PARTITIONS = 3
GATEWAY_NODE_ID = 1 << 30


def _leaders(bootstrap: str) -> tuple[dict[int, int], set[int]]:
    """Partition leaders and the upstream node ids the gateway lists (itself left out)."""
    with WireClient(bootstrap) as client:
        answer = client.request(
            ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])
        )
    nodes = {b.node_id for b in answer.brokers if b.node_id != GATEWAY_NODE_ID}
    return {p.partition_index: p.leader_id for p in answer.topics[0].partitions}, nodes


def _until(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_leader_stopped_and_restarted_under_producers_and_a_group(kafka_cluster: KafkaCluster) -> None:
    with running_gateway(kafka_cluster.bootstrap) as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])
        finally:
            admin.close()
        before = [f"before-{i}".encode() for i in range(300)]
        produce_confluent(gateway.bootstrap, TOPIC, before)
        leaders, nodes = _leaders(gateway.bootstrap)
        assert nodes == {1, 2, 3} and set(leaders) == set(range(PARTITIONS))
        victim = leaders[0]

        kafka_cluster.stop_node(victim)
        try:
            _until(
                lambda: victim not in _leaders(gateway.bootstrap)[0].values(),
                60,
                f"partitions still led by stopped node {victim}",
            )
            during = [f"during-{i}".encode() for i in range(300)]
            produce_confluent(gateway.bootstrap, TOPIC, during)
            stop = threading.Event()
            members = [
                confluent_member(gateway.bootstrap, TOPIC, "followers", stop, name=f"c{i}") for i in range(2)
            ]
            consume_until(members, set(before + during), PARTITIONS, stop, timeout=120)
        finally:
            kafka_cluster.start_node(victim)

        _until(lambda: victim in _leaders(gateway.bootstrap)[1], 60, f"node {victim} never came back")
        after = [f"after-{i}".encode() for i in range(300)]
        produce_confluent(gateway.bootstrap, TOPIC, after)
        stop = threading.Event()
        member = confluent_member(gateway.bootstrap, TOPIC, "followers", stop, name="c-after")
        consume_until([member], set(after), PARTITIONS, stop, timeout=120)
        offsets = committed(gateway.bootstrap, "followers", TOPIC, PARTITIONS)
        assert sum(o or 0 for o in offsets.values()) == len(before) + len(during) + len(after)
        # The group and its offsets are the gateway's: Kafka's own coordinator knows nothing of it.
        assert all(
            o is None for o in committed(kafka_cluster.bootstrap, "followers", TOPIC, PARTITIONS).values()
        )
