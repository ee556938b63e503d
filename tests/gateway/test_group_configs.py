"""Gateway mode: GROUP config resources are served by the gateway, TOPIC ones by upstream (a
real Tansu broker or Kafka 4.4), and a request mixing them is answered for its groups only."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from coordinator.gateway.group_configs import upstream_part, with_group_resources
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.gateway_wire import encode_forwarded_response
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_config_resources import (
    ConfigResource as ListedResource,
)
from protocol.messages.list_config_resources import (
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from protocol.wire import decode_request, decode_response, encode_request
from tests.gateway.conftest import Upstream
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

GROUP, TOPIC, BROKER = 32, 2, 4
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


def _altered_once_loaded(wire: WireClient, change: IncrementalAlterConfigsRequest) -> list[int]:
    """The change's error codes, asked again while the gateway still loads its groups."""
    deadline = time.monotonic() + 30
    while True:
        response = wire.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, change)
        codes = [int(r.error_code) for r in response.responses]
        if codes != [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS] or time.monotonic() > deadline:
            return codes
        time.sleep(0.1)


def test_group_resources_are_listed_by_the_gateway_and_the_rest_by_upstream(
    gateway: ServerProcess, upstream: Upstream
) -> None:
    """ListConfigResources (docs/group-configs.md#gateway-mode): GROUP alone is the gateway's
    listing, a request without GROUP is upstream's, and GROUP with other types (or no type: all)
    is upstream's answer for the others with the gateway's GROUP resources first. When upstream
    lacks the version (Tansu has no API 74), whatever needs upstream's part is UNSUPPORTED_VERSION
    as a whole, never a list without it; GROUP alone is still listed."""
    group = f"listed-{upstream.kind}"
    change = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(GROUP, group, [AlterableConfig(SESSION, 0, "50000")])], False
    )
    mixes: list[list[int]] = [[], [GROUP, TOPIC], [TOPIC, GROUP, BROKER]]
    with WireClient(gateway.bootstrap) as wire:
        assert _altered_once_loaded(wire, change) == [0]
        groups = wire.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([GROUP]))
        assert groups.error_code == 0
        assert ListedResource(group, GROUP) in groups.config_resources
        assert {r.resource_type for r in groups.config_resources} == {GROUP}
        topics = wire.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([TOPIC]))
        mixed = [wire.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest(t)) for t in mixes]
    with WireClient(upstream.bootstrap) as direct:
        versions = direct.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("tests", "1"))
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        low, high = served.get(int(ApiKey.LIST_CONFIG_RESOURCES), (0, -1))
        if low <= 1 <= high:
            theirs = direct.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([TOPIC]))
            assert topics == theirs
            for types, answer in zip(mixes, mixed, strict=True):
                asked = [t for t in types if t != GROUP]
                upstreams = direct.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest(asked))
                ours = [r for r in answer.config_resources if r.resource_type == GROUP]
                assert answer.error_code == 0
                assert answer.config_resources[: len(ours)] == groups.config_resources
                rest = answer.config_resources[len(ours) :]
                assert {(r.resource_type, r.resource_name) for r in rest} >= {
                    (r.resource_type, r.resource_name)
                    for r in upstreams.config_resources
                    if r.resource_type != GROUP
                }
        else:
            assert topics == ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
            for answer in mixed:
                assert answer == ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)


def test_a_split_listing_names_the_other_types_and_keeps_upstreams_error() -> None:
    """The upstream part of a listing of every type names the four others explicitly, in
    Kafka's order; an error from upstream is answered as it is, without the GROUP resources."""
    request = encode_request(ApiKey.LIST_CONFIG_RESOURCES, 1, 7, "tests", ListConfigResourcesRequest([]))[4:]
    others = upstream_part(request)
    assert others is not None
    assert decode_request(others).body == ListConfigResourcesRequest([TOPIC, BROKER, 8, 16])
    assert decode_request(others).correlation_id == 7
    assert (
        upstream_part(
            encode_request(ApiKey.LIST_CONFIG_RESOURCES, 1, 8, "tests", ListConfigResourcesRequest([GROUP]))[
                4:
            ]
        )
        is None
    )
    merge = with_group_resources(1, lambda: ["g"])
    denied = ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    frame = encode_forwarded_response(ApiKey.LIST_CONFIG_RESOURCES, 1, 7, denied)
    assert merge(frame) == frame
    listed = ListConfigResourcesResponse(config_resources=[ListedResource("t", TOPIC)])
    merged = merge(encode_forwarded_response(ApiKey.LIST_CONFIG_RESOURCES, 1, 7, listed))
    assert decode_response(ApiKey.LIST_CONFIG_RESOURCES, 1, merged[4:]) == (
        7,
        ListConfigResourcesResponse(
            config_resources=[ListedResource("g", GROUP), ListedResource("t", TOPIC)]
        ),
    )
