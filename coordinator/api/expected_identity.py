"""KIP-1242: ApiVersions v5+ may carry the cluster id and node id the client expects to reach.

As Kafka's KafkaApis does (docs/protocol.md#kip-1242-the-cluster-and-node-a-client-expects): a
request that sets only one of the two is INVALID_REQUEST; one whose cluster id differs from the
cluster presented, or whose node id is not the node the connection reached, gets
REBOOTSTRAP_REQUIRED with no API list; a request without them is answered as before.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.api.amend import reply
from coordinator.api.routes import Handler
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

FIRST_VERSION = 5
NO_NODE = -1

# The (cluster id, node id) presented to a request's connection; a None cluster id while it is
# not known yet (gateway mode before the first upstream metadata) means no check.
Identity = Callable[[RequestContext], tuple[str | None, int]]


def expected_identity_check(
    identity: Identity, *, consume: bool = False
) -> Callable[[Handler[ApiVersionsRequest]], Handler[ApiVersionsRequest]]:
    """The check in front of ApiVersions. ``consume`` clears the expected ids once checked, for
    a layer that presents another identity than the handlers it wraps (gateway mode)."""

    def wrap(inner: Handler[ApiVersionsRequest]) -> Handler[ApiVersionsRequest]:
        def handle(ctx: RequestContext, req: ApiVersionsRequest) -> Result:
            if ctx.api_version < FIRST_VERSION:
                return inner(ctx, req)
            expected_cluster, expected_node = req.cluster_id, req.node_id
            if (expected_cluster is None) != (expected_node == NO_NODE):
                return reply(ctx, ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST))
            if consume:
                req.cluster_id, req.node_id = None, NO_NODE
            result = inner(ctx, req)
            if expected_cluster is None:
                return result
            cluster_id, node_id = identity(ctx)
            if cluster_id is None or (expected_cluster == cluster_id and expected_node == node_id):
                return result
            # Checked after the inner handler: its own refusals (e.g. an invalid client software
            # name, INVALID_REQUEST) come first, as in Kafka.
            for _, response in result.replies:
                if response.error_code == ErrorCode.NONE:
                    _refuse(response)
            return result

        return handle

    return wrap


def _refuse(response: ApiVersionsResponse) -> None:
    refused = ApiVersionsResponse(error_code=ErrorCode.REBOOTSTRAP_REQUIRED)
    for name in ApiVersionsResponse.__dataclass_fields__:
        setattr(response, name, getattr(refused, name))
