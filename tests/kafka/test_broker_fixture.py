"""The Kafka 4.4 fixture itself: the broker answers, and serves the four kinds of group."""

from __future__ import annotations

import pytest

from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from tests.support.kafka_broker import KafkaCluster
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

SHARE_GROUP_HEARTBEAT = 76
STREAMS_GROUP_HEARTBEAT = 88


def test_the_broker_serves_every_kind_of_group(kafka_broker: KafkaCluster) -> None:
    with WireClient(kafka_broker.bootstrap) as client:
        versions = client.request(
            ApiKey.API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="tests", client_software_version="1"),
        )
    assert versions.error_code == 0
    served = {api.api_key: (api.min_version, api.max_version) for api in versions.api_keys}
    assert served[ApiKey.CONSUMER_GROUP_HEARTBEAT][1] >= 1
    assert SHARE_GROUP_HEARTBEAT in served
    assert STREAMS_GROUP_HEARTBEAT in served
