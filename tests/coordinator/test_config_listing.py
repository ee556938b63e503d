"""ListConfigResources (KIP-1142) as Kafka 4.4's broker answers it: the types each version asks
for, the order of the listing, and the GROUP resources a durable config change adds or removes
(docs/group-configs.md#listing-config-resources). Pure core, injected clock."""

from __future__ import annotations

import pytest

from coordinator.api.config_listing import BROKER_LOGGER, CLIENT_METRICS, ConfigListing
from coordinator.api.config_resources import BROKER, GROUP, TOPIC, ConfigResources
from protocol.errors import ErrorCode
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from protocol.wire import decode_response, encode_response
from tests.coordinator.harness import Harness, Reply

LIST_CONFIG_RESOURCES, INCREMENTAL_ALTER_CONFIGS = 74, 44
SET, DELETE = 0, 1
SESSION = "consumer.session.timeout.ms"
UNSUPPORTED_VERSION = int(ErrorCode.UNSUPPORTED_VERSION)


@pytest.fixture
def h() -> Harness:
    return Harness()


def listing(h: Harness) -> ConfigListing:
    return ConfigListing(
        lambda: sorted(h.coordinator.group_configs.overrides), lambda _ctx: [3, 7], lambda: ["a", "b"]
    )


def listed(h: Harness, version: int, *types: int) -> ListConfigResourcesResponse:
    ctx = h.ctx(LIST_CONFIG_RESOURCES, version)
    h.apply(listing(h).list(ctx, ListConfigResourcesRequest(list(types))))
    assert isinstance(ctx.reply_to, Reply)
    (response,) = ctx.reply_to.responses
    assert isinstance(response, ListConfigResourcesResponse)
    return response


def alter(h: Harness, group: str, op: int, value: str | None) -> Reply:
    request = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(GROUP, group, [AlterableConfig(SESSION, op, value)])], False
    )
    ctx = h.ctx(INCREMENTAL_ALTER_CONFIGS, 1)
    configs = ConfigResources(h.config, h.coordinator.group_configs, lambda: 7, lambda _name: None)
    h.apply(configs.incremental_alter(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def accepted(reply: Reply) -> bool:
    return [[r.error_code for r in response.responses] for response in reply.responses] == [[0]]


def test_groups_are_listed_once_their_configs_are_durable_and_unlisted_without_any(h: Harness) -> None:
    assert listed(h, 1, GROUP) == ListConfigResourcesResponse()
    h.hold = True
    writes = [alter(h, "g2", SET, "50000"), alter(h, "g1", SET, "50000")]
    assert listed(h, 1, GROUP).config_resources == []  # the writes are not durable yet
    h.flush()
    assert all(accepted(reply) for reply in writes)
    assert listed(h, 1, GROUP).config_resources == [ConfigResource("g1", GROUP), ConfigResource("g2", GROUP)]
    h.hold = False
    assert accepted(alter(h, "g1", DELETE, None))
    assert listed(h, 1, GROUP).config_resources == [ConfigResource("g2", GROUP)]


def test_no_type_named_lists_every_type_in_kafkas_order(h: Harness) -> None:
    assert accepted(alter(h, "g", SET, "50000"))
    expected = [
        ConfigResource("g", GROUP),
        ConfigResource("3", BROKER),
        ConfigResource("7", BROKER),
        ConfigResource("a", TOPIC),
        ConfigResource("b", TOPIC),
    ]
    assert listed(h, 1).config_resources == expected
    # Named in any order, twice: each type once, in the same order.
    assert (
        listed(h, 1, TOPIC, GROUP, BROKER, TOPIC, CLIENT_METRICS, BROKER_LOGGER).config_resources == expected
    )
    assert listed(h, 1, TOPIC).config_resources == expected[3:]


@pytest.mark.parametrize(
    ("version", "types"),
    [(1, (0,)), (1, (1,)), (1, (GROUP, 3)), (1, (64,)), (1, (-1,))],
)
def test_a_type_the_version_does_not_list_is_unsupported_version(
    h: Harness, version: int, types: tuple[int, ...]
) -> None:
    assert accepted(alter(h, "g", SET, "50000"))
    assert listed(h, version, *types) == ListConfigResourcesResponse(error_code=UNSUPPORTED_VERSION)


def test_v0_lists_client_metrics_resources_only(h: Harness) -> None:
    assert accepted(alter(h, "g", SET, "50000"))
    response = listed(h, 0)
    assert response == ListConfigResourcesResponse()
    frame = encode_response(LIST_CONFIG_RESOURCES, 0, 5, response)
    assert decode_response(LIST_CONFIG_RESOURCES, 0, frame[4:]) == (5, response)
