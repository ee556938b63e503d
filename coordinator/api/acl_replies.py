"""What the ACL checks of the group APIs share (coordinator/api/authz.py, share_authz.py): the
whole-request denial and the heartbeat check of consumer and share groups (docs/gateway.md#security-model)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Protocol

from coordinator.api.amend import reply
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.security.acl import Authorizer, Operation, ResourceType
from protocol.apis import ApiKey
from protocol.error_responses import error_response
from protocol.errors import ErrorCode

GROUP_DENIED: Final = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
TOPIC_DENIED: Final = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


class AclChecks(Protocol):
    """What the checks use of coordinator.api.authz.AclLayer."""

    @property
    def authorizer(self) -> Authorizer: ...

    def allowed(
        self, ctx: RequestContext, operation: int, resource_type: int, name: str, *, log_denied: bool = True
    ) -> bool: ...


def denied(ctx: RequestContext, api_key: ApiKey, req: Any, code: int, message: str | None = None) -> Result:
    """The whole request refused with ``code`` in the API's error response."""
    return reply(ctx, error_response(api_key, ctx.api_version, req, code, message))


def heartbeat_refusal(
    checks: AclChecks, ctx: RequestContext, api_key: ApiKey, req: Any, group_id: str, topics: Iterable[str]
) -> Result | None:
    """A consumer or share group heartbeat as Kafka's KafkaApis checks it: READ on the group, then
    DESCRIBE on every subscribed topic; None when allowed."""
    if not checks.allowed(ctx, Operation.READ, ResourceType.GROUP, group_id):
        return denied(ctx, api_key, req, GROUP_DENIED)
    refused = [t for t in topics if not checks.allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, t)]
    if refused:
        message = f"Not authorized to describe topics: {', '.join(sorted(refused))}."
        return denied(ctx, api_key, req, TOPIC_DENIED, message)
    return None
