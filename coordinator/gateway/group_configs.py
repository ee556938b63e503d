"""Gateway mode: GROUP config resources are served here, every other resource upstream.

DescribeConfigs and IncrementalAlterConfigs requests that name no GROUP resource are forwarded
untouched. A request that names one is served here, and its other resources (TOPIC, BROKER,
...) are answered INVALID_REQUEST with a message saying to send them in a request of their
own: splitting one request between two servers could half-apply an IncrementalAlterConfigs.
Kafka's AdminClient sends the group resources of a call in one request with its topic
resources, so a tool that mixes them in one call sees that message (docs/gateway.md).
"""

from __future__ import annotations

from typing import Final

from coordinator.api.config_resources import GROUP, screen_alter, screen_describe
from coordinator.api.routes import Routes
from coordinator.core.context import RequestContext
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
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


def _other_than_group(_ctx: RequestContext, resource_type: int, _name: str) -> tuple[int, str | None] | None:
    return None if resource_type == GROUP else (int(ErrorCode.INVALID_REQUEST), MIXED_MESSAGE)


def serve_group_configs_only(routes: Routes) -> None:
    routes.wrap(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, screen_describe(_other_than_group))
    routes.wrap(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, screen_alter(_other_than_group)
    )
