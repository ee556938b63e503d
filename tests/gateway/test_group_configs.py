"""Gateway mode: GROUP config resources are served by the gateway, TOPIC ones by upstream (a
real Tansu broker or Kafka 4.4), and a request mixing them is answered for its groups only."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from tests.gateway.conftest import Upstream
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

GROUP, TOPIC = 32, 2
SESSION = "consumer.session.timeout.ms"


def test_group_configs_are_served_by_the_gateway_and_topic_configs_forwarded(
    gateway: ServerProcess, upstream: Upstream
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        admin.create_topics([NewTopic("configured", 1, 1)])
        assert admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "g", {SESSION: "50000"})]) == {
            "group": {"g": "OK"}
        }
        described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, "g")])
        assert described["group"]["g"][SESSION]["value"] == "50000"
    finally:
        admin.close()
    topic_request = DescribeConfigsRequest([DescribeConfigsResource(TOPIC, "configured", None)])
    with WireClient(upstream.bootstrap) as direct:
        theirs = direct.request(ApiKey.DESCRIBE_CONFIGS, 4, topic_request)
    with WireClient(gateway.bootstrap) as wire:
        topic_only = wire.request(ApiKey.DESCRIBE_CONFIGS, 4, topic_request)
        [topic] = topic_only.results
        assert (topic.resource_type, topic.resource_name, topic.error_code) == (TOPIC, "configured", 0)
        # Upstream's answer, not ours: the same as upstream gives directly.
        assert topic_only.results == theirs.results
        mixed = wire.request(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            DescribeConfigsRequest([
                DescribeConfigsResource(TOPIC, "configured", None),
                DescribeConfigsResource(GROUP, "g", [SESSION]),
            ]),
        )  # fmt: skip
        refused, served = mixed.results
        assert refused.resource_name == "configured" and refused.error_code == ErrorCode.INVALID_REQUEST
        assert refused.error_message and "request without GROUP resources" in refused.error_message
        assert (served.error_code, [(c.name, c.value) for c in served.configs]) == (0, [(SESSION, "50000")])
