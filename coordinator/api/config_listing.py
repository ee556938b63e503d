"""ListConfigResources (API 74, KIP-1142; v0 was ListClientMetricsResources): which config
resources of each type this coordinator has.

As Kafka 4.4's broker answers it (docs/group-configs.md#listing-config-resources): v0 asks for
CLIENT_METRICS resources only; v1 for the types it names, every type when it names none. A type
the version does not list gets UNSUPPORTED_VERSION for the whole request. The resources are
listed type by type in Kafka's order (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC):

* GROUP: the groups with dynamic configs (overrides applied once durable);
* BROKER: the brokers the cluster view lists (the ids DescribeConfigs answers for);
* TOPIC: the topics of the catalog;
* CLIENT_METRICS and BROKER_LOGGER: none (no config API serves them here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from coordinator.api.amend import reply
from coordinator.api.config_resources import BROKER, GROUP, TOPIC
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.errors import ErrorCode
from protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

BROKER_LOGGER: Final = 8
CLIENT_METRICS: Final = 16
# Kafka's ListConfigResourcesRequest.supportedResourceTypes, per version.
SUPPORTED_TYPES: Final[dict[int, frozenset[int]]] = {
    0: frozenset({CLIENT_METRICS}),
    1: frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP}),
}
# The order in which Kafka's KafkaApis lists the types.
LISTING_ORDER: Final = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


def asked_types(version: int, req: ListConfigResourcesRequest) -> frozenset[int] | None:
    """The types a request asks for (none named: every type of its version), or None when it
    names a type its version does not list (UNSUPPORTED_VERSION)."""
    supported = SUPPORTED_TYPES[min(version, max(SUPPORTED_TYPES))]
    asked = frozenset(req.resource_types) if req.resource_types else supported
    return asked if asked <= supported else None


class ConfigListing:
    def __init__(
        self,
        group_ids: Callable[[], Iterable[str]],
        broker_ids: Callable[[RequestContext], Iterable[int]],
        topic_names: Callable[[], Iterable[str]],
    ) -> None:
        self.group_ids = group_ids
        self.broker_ids = broker_ids
        self.topic_names = topic_names

    def list(self, ctx: RequestContext, req: ListConfigResourcesRequest) -> Result:
        return reply(ctx, self.response(ctx, req))

    def response(self, ctx: RequestContext, req: ListConfigResourcesRequest) -> ListConfigResourcesResponse:
        asked = asked_types(ctx.api_version, req)
        if asked is None:
            return ListConfigResourcesResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION))
        listed: list[ConfigResource] = []
        for resource_type in LISTING_ORDER:
            if resource_type in asked:
                listed += (ConfigResource(name, resource_type) for name in self._names(ctx, resource_type))
        return ListConfigResourcesResponse(config_resources=listed)

    def _names(self, ctx: RequestContext, resource_type: int) -> Iterable[str]:
        if resource_type == GROUP:
            return self.group_ids()
        if resource_type == BROKER:
            return [str(node_id) for node_id in self.broker_ids(ctx)]
        if resource_type == TOPIC:
            return self.topic_names()
        return []  # CLIENT_METRICS, BROKER_LOGGER
