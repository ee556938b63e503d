"""What the gateway learns from the Metadata answers its clients receive."""

from __future__ import annotations

from coordinator.gateway.upstream import UpstreamSettings
from coordinator.gateway.upstream_cluster import UpstreamCluster
from protocol.messages.metadata import MetadataResponse, MetadataResponseBroker


async def _no_change(_brokers: dict[int, tuple[str, int]]) -> None:
    return None


def test_a_clients_metadata_answer_teaches_the_addresses_of_its_nodes() -> None:
    """A client's Metadata, forwarded before the gateway's own first refresh, opens a virtual
    broker for each node it names: requests to it must find the node's upstream address."""
    cluster = UpstreamCluster([("127.0.0.1", 9092)], UpstreamSettings(), 30000, 30000, _no_change)
    answer = MetadataResponse(
        brokers=[
            MetadataResponseBroker(111, "broker-a", 9092, None),
            MetadataResponseBroker(112, "broker-b", 9093, None),
        ],
        topics=[],
    )
    cluster.observe_metadata(answer)
    assert cluster.known_addresses == {111: ("broker-a", 9092), 112: ("broker-b", 9093)}
    assert cluster.brokers == {}  # the cluster's own view changes only with its own refresh
