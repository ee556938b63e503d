"""Several upstream brokers (a scripted three-broker upstream over real Tansu): node ids map to
virtual broker ports, leadership moves reach clients through NOT_LEADER and a metadata refresh,
brokers leave and join."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.wire import encode_request
from tests.gateway.conftest import running_gateway
from tests.gateway.scripted_cluster import ScriptedCluster, scripted_cluster
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

TOPIC = "spread"


@pytest.fixture
def cluster(tansu_port: int) -> Iterator[ScriptedCluster]:
    with scripted_cluster(tansu_port, [1, 2, 3]) as scripted:
        yield scripted


def _metadata(gateway: ServerProcess) -> MetadataResponse:
    with WireClient(gateway.bootstrap) as client:
        request = MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False)
        response: MetadataResponse = client.request(ApiKey.METADATA, 12, request)
        return response


def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_node_ids_leadership_moves_and_brokers_that_come_and_go(cluster: ScriptedCluster) -> None:
    with running_gateway(
        f"127.0.0.1:{cluster.ports[1]}", **{"upstream-metadata-refresh-ms": "300"}
    ) as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic(TOPIC, 3, 1)])
        finally:
            admin.close()
        upstream_ports = set(cluster.ports.values())
        metadata = _metadata(gateway)
        virtual = {b.node_id: b.port for b in metadata.brokers if b.node_id in (1, 2, 3)}
        assert set(virtual) == {1, 2, 3} and len(set(virtual.values())) == 3
        assert not upstream_ports & {b.port for b in metadata.brokers}
        assert {p.partition_index: p.leader_id for p in metadata.topics[0].partitions} == {0: 1, 1: 2, 2: 3}

        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, acks=1, retries=5, retry_backoff_ms=100)
        try:
            for partition in range(3):
                producer.send(TOPIC, b"before", partition=partition).get(20)
            assert cluster.not_leader_answers == 0

            # Partition 0 moves from node 1 to node 2: NOT_LEADER, metadata refresh, retry on node 2.
            cluster.leaders[(TOPIC, 0)] = 2
            producer.send(TOPIC, b"moved", partition=0).get(30)
            assert cluster.not_leader_answers >= 1

            # Node 3 leaves the metadata, node 4 appears and leads partition 2.
            cluster.add_node(4)
            cluster.listed = [1, 2, 4]
            cluster.leaders[(TOPIC, 2)] = 4
            _wait(
                lambda: "virtual broker for upstream node 4 listening" in gateway.log_text(),
                60,  # the gateway's next metadata refresh, however loaded the machine
                "no virtual broker for the new node",
            )
            producer.send(TOPIC, b"new node", partition=2).get(30)
        finally:
            producer.close()
        metadata = _metadata(gateway)
        now = {b.node_id: b.port for b in metadata.brokers if b.node_id < 1000}
        assert set(now) == {1, 2, 4}
        assert now[1] == virtual[1] and now[2] == virtual[2]  # node ids keep their ports
        assert now[4] not in virtual.values() and now[4] not in set(cluster.ports.values())
        assert "upstream node 3 left the cluster metadata" in gateway.log_text()

        # A client still talking to node 3's virtual broker after node 3 is gone for good.
        cluster.stop_node(3)
        _wait(lambda: _refuses(cluster.ports[3]), 10, "node 3 to stop listening")  # stop_node is asynchronous
        with WireClient(f"127.0.0.1:{virtual[3]}") as stale, WireClient(f"127.0.0.1:{now[4]}") as other:
            stale.send_raw(_metadata_frame())
            assert stale.is_closed_by_peer()  # closed: the client refreshes metadata elsewhere
            assert other.request(ApiKey.METADATA, 12, MetadataRequest(topics=[])).brokers
        assert gateway.process.poll() is None


def _refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def _metadata_frame() -> bytes:
    return encode_request(ApiKey.METADATA, 12, 1, "stale", MetadataRequest(topics=[]))
