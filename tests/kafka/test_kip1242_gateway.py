"""KIP-1242 in gateway mode, in front of a real Kafka 4.4: one identity on every listener.

Clients learn the cluster id and the node ids from the Metadata the gateway forwards (upstream's
cluster id, a virtual broker per upstream node, the coordinator's own node id at the bootstrap
address); ApiVersions v5 accepts exactly that identity on each listener
(docs/protocol.md#kip-1242-the-cluster-and-node-a-client-expects).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess, start_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

COORDINATOR_NODE = 2**30


@pytest.fixture(scope="module")
def gateway(kafka_broker: KafkaCluster) -> Iterator[ServerProcess]:
    server = start_server(
        "memory://",
        {"upstream-bootstrap-servers": kafka_broker.bootstrap, "upstream-metadata-refresh-ms": "500"},
    )
    try:
        yield server
    finally:
        server.stop()


def _metadata(bootstrap: str, timeout: float = 60) -> MetadataResponse:
    """The gateway's Metadata once it names the upstream cluster (polled)."""
    deadline = time.monotonic() + timeout
    while True:
        with WireClient(bootstrap) as client:
            answer: MetadataResponse = client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        if answer.cluster_id and len(answer.brokers) >= 2:
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)


def _api_versions(address: str, cluster_id: str | None, node_id: int) -> int:
    with WireClient(address) as client:
        answer = client.request(
            ApiKey.API_VERSIONS,
            5,
            ApiVersionsRequest(
                client_software_name="tests",
                client_software_version="1",
                cluster_id=cluster_id,
                node_id=node_id,
            ),
        )
    return int(answer.error_code)


def test_each_listener_accepts_the_identity_metadata_gave_it(
    kafka_broker: KafkaCluster, gateway: ServerProcess
) -> None:
    metadata = _metadata(gateway.bootstrap)
    assert metadata.cluster_id == kafka_broker.cluster_id
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    assert set(addresses) == {1, COORDINATOR_NODE}
    cluster = kafka_broker.cluster_id
    rebootstrap = int(ErrorCode.REBOOTSTRAP_REQUIRED)

    # A virtual broker stands for upstream node 1.
    assert _api_versions(addresses[1], cluster, 1) == 0
    assert _api_versions(addresses[1], cluster, COORDINATOR_NODE) == rebootstrap
    # The bootstrap address is the coordinator's node.
    assert _api_versions(gateway.bootstrap, cluster, COORDINATOR_NODE) == 0
    assert _api_versions(gateway.bootstrap, cluster, 1) == rebootstrap
    # Another cluster's id is refused everywhere; no expectation is accepted everywhere.
    for address in (gateway.bootstrap, addresses[1]):
        assert _api_versions(address, "another-cluster", 1) == rebootstrap
        assert _api_versions(address, None, -1) == 0
