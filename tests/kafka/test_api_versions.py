"""Our ApiVersions against Kafka 4.4's own, for every group API.

The max version we advertise equals the real broker's; the min version is no higher (we keep
the versions Kafka 4 dropped for 2018-era clients, docs/protocol.md#versions-older-than-kafka-4).
A deliberate difference is listed in DIFFERENCES with its reason; there is none today.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

GROUP_APIS = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
    ApiKey.LIST_GROUPS,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_DELETE,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
)

# api key -> why our max version differs from Kafka 4.4's on purpose.
DIFFERENCES: dict[ApiKey, str] = {}


def _versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    with WireClient(bootstrap) as client:
        answer = client.request(
            ApiKey.API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="tests", client_software_version="1"),
        )
    assert answer.error_code == 0
    return {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    with running_server("memory://") as server:
        yield server


@pytest.mark.parametrize("api", GROUP_APIS, ids=lambda k: k.name)
def test_group_api_versions_match_kafka_4_4(
    kafka_broker: KafkaCluster, ours: ServerProcess, api: ApiKey
) -> None:
    kafka = _versions(kafka_broker.bootstrap)[api]
    served = _versions(ours.bootstrap)[api]
    if api in DIFFERENCES:
        assert served[1] != kafka[1], f"{api.name} no longer differs: drop it from DIFFERENCES"
        return
    assert served[1] == kafka[1], (api.name, served, kafka)
    assert served[0] <= kafka[0], (api.name, served, kafka)


def test_api_versions_itself_matches_kafka_4_4(kafka_broker: KafkaCluster, ours: ServerProcess) -> None:
    """KIP-1242 (ApiVersions v5) is served at Kafka 4.4's version."""
    assert (
        _versions(ours.bootstrap)[ApiKey.API_VERSIONS]
        == _versions(kafka_broker.bootstrap)[ApiKey.API_VERSIONS]
    )
