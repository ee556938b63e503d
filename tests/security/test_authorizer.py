"""The pure authorizer: Kafka's matching, deny-wins, implied DESCRIBE, super users, no-ACL rule."""

from __future__ import annotations

from coordinator.security.acl import (
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    validation_error,
)
from storage.records import AclRecord

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
READ, DESCRIBE, DELETE, ALL = Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def binding(name: str, operation: int, permission: int = ALLOW, *, principal: str = "User:alice",
            prefixed: bool = False, resource: int = GROUP, host: str = "*") -> AclRecord:  # fmt: skip
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    return AclRecord(resource, name, pattern, principal, host, operation, permission)


def test_literal_prefixed_wildcard_and_implied_describe() -> None:
    auth = Authorizer()
    auth.load(
        [
            binding("g1", READ),
            binding("team-", DESCRIBE, prefixed=True),
            binding("*", READ, principal="User:bob"),
        ]
    )
    assert auth.authorize("User:alice", "h", READ, GROUP, "g1")
    assert auth.authorize("User:alice", "h", DESCRIBE, GROUP, "g1")  # READ implies DESCRIBE
    assert not auth.authorize("User:alice", "h", DELETE, GROUP, "g1")
    assert auth.authorize("User:alice", "h", DESCRIBE, GROUP, "team-x")
    assert not auth.authorize("User:alice", "h", READ, GROUP, "team-x")
    assert auth.authorize("User:bob", "h", READ, GROUP, "anything")
    assert not auth.authorize("User:alice", "h", READ, GROUP, "other")  # bob's wildcard binding exists
    assert not auth.authorize("User:alice", "h", READ, TOPIC, "g1")  # another resource type


def test_deny_wins_and_hosts() -> None:
    auth = Authorizer()
    auth.load(
        [
            binding("g", ALL),
            binding("g", READ, DENY, host="10.0.0.1"),
            binding("*", DESCRIBE, DENY, principal="User:*"),
        ]
    )
    assert auth.authorize("User:alice", "127.0.0.1", READ, GROUP, "g")
    assert not auth.authorize("User:alice", "10.0.0.1", READ, GROUP, "g")
    assert not auth.authorize("User:alice", "127.0.0.1", DESCRIBE, GROUP, "g")  # explicit deny of DESCRIBE


def test_super_users_and_no_acl_found() -> None:
    strict = Authorizer(super_users=["User:admin"])
    assert strict.authorize("User:admin", "h", DELETE, GROUP, "g")
    assert not strict.authorize("User:alice", "h", READ, GROUP, "g")
    lenient = Authorizer(allow_everyone_if_no_acl_found=True)
    assert lenient.authorize("User:alice", "h", READ, GROUP, "g")
    lenient.add(binding("g", READ, principal="User:bob"))
    assert not lenient.authorize("User:alice", "h", READ, GROUP, "g")  # now an ACL exists for g
    lenient.remove(binding("g", READ, principal="User:bob"))
    assert lenient.authorize("User:alice", "h", READ, GROUP, "g")


def test_authorized_operations_bits() -> None:
    auth = Authorizer()
    auth.load([binding("g", ALL)])
    assert auth.authorized_operations("User:alice", "h", GROUP, "g") == 328  # READ, DELETE, DESCRIBE
    auth.load([binding("g", READ)])
    assert auth.authorized_operations("User:alice", "h", GROUP, "g") == (1 << READ) | (1 << DESCRIBE)
    assert auth.authorized_operations("User:eve", "h", GROUP, "g") == 0


def test_filters_and_validation() -> None:
    auth = Authorizer()
    a, b = binding("g", READ), binding("t", DESCRIBE, resource=TOPIC, principal="User:bob")
    auth.load([a, b])
    any_filter = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
    assert auth.matching(any_filter) == [b, a]
    assert auth.matching(
        AclFilter(GROUP, "g", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    ) == [a]
    assert auth.matching(
        AclFilter(ResourceType.ANY, None, PatternType.ANY, "User:bob", None, Operation.ANY, Permission.ANY)
    ) == [b]
    assert validation_error(a) is None
    assert validation_error(AclRecord(GROUP, "g", PatternType.ANY, "User:a", "*", READ, ALLOW)) is not None
    assert validation_error(AclRecord(GROUP, "g", PatternType.LITERAL, "alice", "*", READ, ALLOW)) is not None
    assert validation_error(
        AclRecord(ResourceType.CLUSTER, "x", PatternType.LITERAL, "User:a", "*", READ, ALLOW)
    )


def test_denials_are_reported_unless_the_check_only_filters() -> None:
    auth = Authorizer()
    auth.load([binding("g", READ)])
    denied: list[tuple[str, str, int, int, str]] = []
    auth.on_denied = lambda *denial: denied.append(denial)
    assert auth.authorize("User:alice", "h", READ, GROUP, "g")
    assert not auth.authorize("User:alice", "h", DELETE, GROUP, "g")
    assert not auth.authorize("User:eve", "h", READ, GROUP, "hidden", log_denied=False)
    assert auth.authorized_operations("User:eve", "h", GROUP, "g") == 0
    assert denied == [("User:alice", "h", DELETE, GROUP, "g")]
