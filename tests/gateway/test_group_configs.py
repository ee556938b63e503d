"""Gateway mode: GROUP config resources are served by the gateway, TOPIC ones by upstream (a
real Tansu broker), and a request mixing them is answered for its groups only."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

GROUP, TOPIC = 32, 2
SESSION = "consumer.session.timeout.ms"


def test_group_configs_are_served_by_the_gateway_and_topic_configs_forwarded(gateway: ServerProcess) -> None:
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
    with WireClient(gateway.bootstrap) as wire:
        topic_only = wire.request(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            DescribeConfigsRequest([DescribeConfigsResource(TOPIC, "configured", None)]),
        )
        [topic] = topic_only.results
        assert (topic.resource_type, topic.resource_name, topic.error_code) == (TOPIC, "configured", 0)
        # Tansu's answer, not ours: it fills the message of a success, our handler leaves it null.
        assert topic.error_message == "No error."
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
