"""Authorization: Kafka's ACL model (StandardAuthorizer semantics) for GROUP, TOPIC and CLUSTER.

An ACL binding is (resource type, resource name, pattern type LITERAL|PREFIXED, principal,
host, operation, permission ALLOW|DENY). A request by ``principal`` from ``host`` for
``operation`` on a resource is

1. allowed for super users (``super.users``, ``User:a;User:b``);
2. denied when any matching DENY binding exists (deny wins);
3. allowed when a matching ALLOW binding exists; DESCRIBE is implied by READ, WRITE, DELETE
   and ALTER, and ALL matches every operation;
4. otherwise allowed only when no binding at all matches the resource and
   ``allow.everyone.if.no.acl.found`` is true (default false).

"Matching" bindings: same resource type, and a LITERAL name equal to the resource or the
wildcard ``*``, or a PREFIXED name the resource starts with; principal equal or ``User:*``;
host equal or ``*``.

The authorizer is off unless ``authorizer.enabled`` is true; then everything is allowed and
the ACL APIs answer SECURITY_DISABLED, as a broker without an authorizer does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from storage.records import AclRecord


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


CLUSTER_NAME: Final = "kafka-cluster"
WILDCARD: Final = "*"
WILDCARD_PRINCIPAL: Final = "User:*"
_IMPLY_DESCRIBE: Final = frozenset(
    {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
)
_IMPLY_DESCRIBE_CONFIGS: Final = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})
# Operations a resource type supports (for authorized-operations bit fields).
OPERATIONS_OF: Final = {
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter; ANY (1) and None mean "any"; MATCH pattern matches like a request."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: AclRecord) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.operation != Operation.ANY and acl.operation != self.operation:
            return False
        if self.permission != Permission.ANY and acl.permission != self.permission:
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.pattern_type == PatternType.MATCH:
            return self.resource_name is None or _resource_matches(acl, self.resource_name)
        if self.pattern_type not in (PatternType.ANY,) and acl.pattern_type != self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def validation_error(acl: AclRecord) -> str | None:
    """Why CreateAcls must refuse this binding (Kafka's checks), or None."""
    if acl.resource_type not in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                 ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER):  # fmt: skip
        return "Invalid resource type"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid pattern type: only LITERAL and PREFIXED bindings can be created"
    if (
        acl.operation in (Operation.ANY, Operation.UNKNOWN)
        or acl.operation not in Operation._value2member_map_
    ):
        return "Invalid operation"
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        return "Invalid permission type"
    if not acl.resource_name:
        return "Resource name must not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.principal or ":" not in acl.principal:
        return f"Invalid principal {acl.principal!r}: expected TYPE:NAME"
    if not acl.host:
        return "Host must not be empty (use * for any host)"
    return None


def _resource_matches(acl: AclRecord, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    if acl.pattern_type == PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return False


# Told of every denial a request would see (principal, host, operation, resource type, name).
DenialListener = Callable[[str, str, int, int, str], None]


class Authorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.on_denied: DenialListener | None = None
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self.acls: set[AclRecord] = set()
        # resource type -> bindings, for a cheap scan per check.
        self._by_type: dict[int, list[AclRecord]] = {}
        self.generation = 0  # bumped on every change: cached decisions older than it are stale

    def load(self, acls: Iterable[AclRecord]) -> None:
        self.acls = set(acls)
        self._reindex()

    def add(self, acl: AclRecord) -> None:
        self.acls.add(acl)
        self._reindex()

    def remove(self, acl: AclRecord) -> None:
        self.acls.discard(acl)
        self._reindex()

    def _reindex(self) -> None:
        by_type: dict[int, list[AclRecord]] = {}
        for acl in self.acls:
            by_type.setdefault(acl.resource_type, []).append(acl)
        self._by_type = by_type
        self.generation += 1

    def matching(self, acl_filter: AclFilter) -> list[AclRecord]:
        found = [acl for acl in self.acls if acl_filter.matches(acl)]
        found.sort(
            key=lambda a: (
                a.resource_type,
                a.resource_name,
                a.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission,
            )
        )
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: int,
        resource_type: int,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        """``log_denied=False`` for checks that only filter what is shown (Kafka's logIfDenied)."""
        allowed = self._decide(principal, host, operation, resource_type, name)
        if not allowed and log_denied and self.on_denied is not None:
            self.on_denied(principal, host, operation, resource_type, name)
        return allowed

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        resource_acls = [acl for acl in self._by_type.get(resource_type, ()) if _resource_matches(acl, name)]
        if not resource_acls:
            return self.allow_if_no_acl
        allowed = False
        for acl in resource_acls:
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.permission == Permission.DENY:
                if acl.operation == operation or acl.operation == Operation.ALL:
                    return False
            elif acl.permission == Permission.ALLOW and not allowed:
                allowed = _implies(acl.operation, operation)
        return allowed

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's ``authorizeByResourceType``: is there some resource of the type the principal may
        do ``operation`` on? An ALLOW binding counts unless a DENY covers every name it grants
        (a DENY on the wildcard, or a LITERAL/PREFIXED DENY covering the ALLOW's pattern)."""
        if principal in self.super_users:
            return True
        bindings = [
            acl
            for acl in self._by_type.get(resource_type, ())
            if acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)
        ]
        denies = [
            acl
            for acl in bindings
            if acl.permission == Permission.DENY and acl.operation in (operation, Operation.ALL)
        ]
        if self.allow_if_no_acl and not denies:
            return True
        for acl in bindings:
            if acl.permission != Permission.ALLOW or not _implies(acl.operation, operation):
                continue
            if not any(_deny_covers(deny, acl) for deny in denies):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """Kafka's bit field (bit n = operation n) of what the principal may do on a resource."""
        bits = 0
        for operation in OPERATIONS_OF.get(ResourceType(resource_type), ()):
            if self._decide(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits


def _deny_covers(deny: AclRecord, allow: AclRecord) -> bool:
    """Does ``deny`` cover every resource name ``allow`` grants?"""
    if deny.pattern_type == PatternType.LITERAL and deny.resource_name == WILDCARD:
        return True
    if deny.pattern_type == PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name)
    return (
        deny.pattern_type == PatternType.LITERAL
        and allow.pattern_type == PatternType.LITERAL
        and deny.resource_name == allow.resource_name
    )


def _implies(granted: int, wanted: int) -> bool:
    if granted == wanted or granted == Operation.ALL:
        return True
    if wanted == Operation.DESCRIBE:
        return granted in _IMPLY_DESCRIBE
    if wanted == Operation.DESCRIBE_CONFIGS:
        return granted in _IMPLY_DESCRIBE_CONFIGS
    return False
