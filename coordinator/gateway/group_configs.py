"""Gateway mode: GROUP config resources are served here, every other resource upstream.

DescribeConfigs and IncrementalAlterConfigs requests that name no GROUP resource are forwarded
untouched. A request that names one is served here, and its other resources (TOPIC, BROKER,
...) are answered INVALID_REQUEST with a message saying to send them in a request of their
own: splitting one request between two servers could half-apply an IncrementalAlterConfigs.
Kafka's AdminClient sends the group resources of a call in one request with its topic
resources, so a tool that mixes them in one call sees that message (docs/gateway.md).

ListConfigResources follows the same rule by resource type: a request that asks for no GROUP
resources (v0, or v1 naming only other types) is forwarded untouched; one that asks for GROUP
resources alone is served here; one that asks for GROUP and other types (a v1 naming no type
asks for every type) is answered INVALID_REQUEST as a whole, the answer having no room for a
refusal per type (docs/gateway.md#group-configs). A request without GROUP whose version upstream
does not serve gets UNSUPPORTED_VERSION here.
"""

from __future__ import annotations

from typing import Final

from coordinator.api.amend import reply
from coordinator.api.config_listing import asked_types
from coordinator.api.config_resources import GROUP, screen_alter, screen_describe
from coordinator.api.routes import Handler, Routes
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.wire import decode_request

MIXED_MESSAGE: Final = (
    "in gateway mode GROUP config resources are served by the gateway and the others by the "
    "upstream cluster: send this resource in a request without GROUP resources"
)


def names_group_resources(frame: bytes) -> bool:
    """True when a DescribeConfigs / IncrementalAlterConfigs frame names a GROUP resource (a
    version we do not decode, or a malformed frame, is left to upstream: False)."""
    try:
        request = decode_request(frame)
    except Exception:  # UnsupportedApi, DecodeError, ...: upstream answers as it would
        return False
    return any(r.resource_type == GROUP for r in request.body.resources)


def lists_group_resources(frame: bytes) -> bool:
    """True when a ListConfigResources frame asks for GROUP resources (a v1 naming GROUP or no
    type at all); a malformed frame is left to the dispatcher (True: it answers as it does)."""
    try:
        request = decode_request(frame)
    except Exception:  # DecodeError, UnsupportedApi: the dispatcher's answer
        return True
    return request.api_version >= 1 and (
        not request.body.resource_types or GROUP in request.body.resource_types
    )


def _group_types_only(inner: Handler[ListConfigResourcesRequest]) -> Handler[ListConfigResourcesRequest]:
    """The listing served here: GROUP resources alone. A request without GROUP gets here only
    when upstream does not serve its version: UNSUPPORTED_VERSION, as upstream would answer."""

    def handle(ctx: RequestContext, req: ListConfigResourcesRequest) -> Result:
        asked = asked_types(ctx.api_version, req)
        if asked is None or asked == {GROUP}:
            return inner(ctx, req)
        code = ErrorCode.INVALID_REQUEST if GROUP in asked else ErrorCode.UNSUPPORTED_VERSION
        return reply(ctx, ListConfigResourcesResponse(error_code=int(code)))

    return handle


def _other_than_group(_ctx: RequestContext, resource_type: int, _name: str) -> tuple[int, str | None] | None:
    return None if resource_type == GROUP else (int(ErrorCode.INVALID_REQUEST), MIXED_MESSAGE)


def serve_group_configs_only(routes: Routes) -> None:
    routes.wrap(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, screen_describe(_other_than_group))
    routes.wrap(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, screen_alter(_other_than_group)
    )
    routes.wrap(ApiKey.LIST_CONFIG_RESOURCES, ListConfigResourcesRequest, _group_types_only)
