"""Gateway mode: GROUP config resources are served here, every other resource upstream.

DescribeConfigs and IncrementalAlterConfigs requests that name no GROUP resource are forwarded
untouched. A request that names one is served here, and its other resources (TOPIC, BROKER,
...) are answered INVALID_REQUEST with a message saying to send them in a request of their
own: splitting one request between two servers could half-apply an IncrementalAlterConfigs.
Kafka's AdminClient sends the group resources of a call in one request with its topic
resources, so a tool that mixes them in one call sees that message (docs/gateway.md).

ListConfigResources is split by resource type instead, a listing changing nothing: a request
that asks for no GROUP resources (v0, or v1 naming only other types) is forwarded untouched; one
that asks for GROUP resources alone is served here; one that asks for GROUP and other types (a v1
naming no type asks for every type) goes upstream naming the other types only, and the GROUP
resources listed here are put first into upstream's answer (an error from upstream is answered
as it is). When upstream does not serve the version, a request that needs upstream's part is
answered UNSUPPORTED_VERSION, as upstream would (docs/group-configs.md#gateway-mode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from coordinator.api.amend import reply
from coordinator.api.config_listing import LISTING_ORDER, asked_types
from coordinator.api.config_resources import GROUP, screen_alter, screen_describe
from coordinator.api.routes import Handler, Routes
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.gateway_wire import (
    decode_forwarded,
    decode_forwarded_response,
    encode_forwarded,
    encode_forwarded_response,
)
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from protocol.wire import decode_request, peek_header

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


def upstream_part(frame: bytes) -> bytes | None:
    """For a v1 ListConfigResources frame (no length prefix) that asks for GROUP and other types:
    the frame naming the other types only, in Kafka's order (an empty list names every type, so
    it becomes the explicit list of the others). None for every other frame."""
    try:
        _, version, _ = peek_header(frame)
        header_end, body = decode_forwarded(frame)
    except Exception:  # DecodeError, UnsupportedApi: the dispatcher's answer
        return None
    asked = asked_types(version, body)
    if version < 1 or asked is None or GROUP not in asked or asked == {GROUP}:
        return None
    others: list[int] = [t for t in reversed(LISTING_ORDER) if t in asked and t != GROUP]
    return encode_forwarded(frame, header_end, ListConfigResourcesRequest(resource_types=others))


def with_group_resources(version: int, group_ids: Callable[[], Iterable[str]]) -> Callable[[bytes], bytes]:
    """Puts the GROUP resources listed here before upstream's (GROUP comes first in Kafka's
    order); upstream's error is answered as it is, with no partial list."""

    def merge(frame: bytes) -> bytes:
        correlation_id, body = decode_forwarded_response(ApiKey.LIST_CONFIG_RESOURCES, version, frame)
        if body.error_code != 0:
            return frame
        groups = [ConfigResource(name, GROUP) for name in group_ids()]
        body.config_resources = groups + list(body.config_resources)
        return encode_forwarded_response(ApiKey.LIST_CONFIG_RESOURCES, version, correlation_id, body)

    return merge


def _group_types_only(
    upstream_lists: Callable[[int], bool],
) -> Callable[[Handler[ListConfigResourcesRequest]], Handler[ListConfigResourcesRequest]]:
    """The listing served here: GROUP resources alone. A request that needs other types gets
    here when upstream does not serve its version: UNSUPPORTED_VERSION, as upstream would answer,
    rather than a list without upstream's part; or with several nodes, whose GROUP list comes
    from storage and is not split (INVALID_REQUEST as a whole)."""

    def wrap(inner: Handler[ListConfigResourcesRequest]) -> Handler[ListConfigResourcesRequest]:
        def handle(ctx: RequestContext, req: ListConfigResourcesRequest) -> Result:
            asked = asked_types(ctx.api_version, req)
            if asked is None or asked == {GROUP}:
                return inner(ctx, req)
            served = upstream_lists(ctx.api_version)
            code = ErrorCode.INVALID_REQUEST if served and GROUP in asked else ErrorCode.UNSUPPORTED_VERSION
            return reply(ctx, ListConfigResourcesResponse(error_code=int(code)))

        return handle

    return wrap


def _other_than_group(_ctx: RequestContext, resource_type: int, _name: str) -> tuple[int, str | None] | None:
    return None if resource_type == GROUP else (int(ErrorCode.INVALID_REQUEST), MIXED_MESSAGE)


def serve_group_configs_only(routes: Routes, upstream_lists: Callable[[int], bool]) -> None:
    routes.wrap(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, screen_describe(_other_than_group))
    routes.wrap(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, screen_alter(_other_than_group)
    )
    routes.wrap(ApiKey.LIST_CONFIG_RESOURCES, ListConfigResourcesRequest, _group_types_only(upstream_lists))
