"""The gateway asks upstream about a topic its catalog lacks only for what the request's own ACL
check would let through (docs/gateway.md#topics-the-catalog-has-not-seen-yet): a client without
READ on the group, or on a topic, cannot make the gateway send upstream a Metadata request."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.core.context import RequestContext
from coordinator.gateway.catalog import UpstreamCatalog
from coordinator.gateway.topic_lookup import UpstreamTopicLookup
from coordinator.security.acl import Authorizer, Operation, PatternType, Permission, ResourceType
from protocol.apis import ApiKey
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from storage.records import AclRecord

ALICE = "User:alice"


def allow(resource: int, name: str, operation: int, principal: str = ALICE) -> AclRecord:
    return AclRecord(resource, name, PatternType.LITERAL, principal, "*", operation, Permission.ALLOW)


def context(principal: str) -> RequestContext:
    return RequestContext(
        now_ms=0,
        wall_ms=0,
        api_version=8,
        client_id="c",
        client_host="10.0.0.1",
        reply_to=None,
        principal=principal,
    )


def lookup(acls: list[AclRecord] | None) -> UpstreamTopicLookup:
    found = UpstreamTopicLookup(SimpleNamespace(catalog=UpstreamCatalog()))  # type: ignore[arg-type]
    if acls is not None:
        authorizer = Authorizer()
        authorizer.load(acls)
        found.authorizer = authorizer
    return found


def commit(*topics: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        topics=[OffsetCommitRequestTopic(t, partitions=[OffsetCommitRequestPartition(0, 1)]) for t in topics],
    )


def txn_commit(*topics: str) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        topics=[
            TxnOffsetCommitRequestTopic(t, partitions=[TxnOffsetCommitRequestPartition(0, 1)]) for t in topics
        ],
    )


def delete(*topics: str) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(
        group_id="g",
        topics=[OffsetDeleteRequestTopic(t, partitions=[OffsetDeleteRequestPartition(0)]) for t in topics],
    )


def test_without_an_authorizer_every_unknown_topic_is_asked_about() -> None:
    assert lookup(None).unknown_names(context(ALICE), ApiKey.OFFSET_COMMIT, commit("b", "a")) == ["a", "b"]


GROUP_READ = allow(ResourceType.GROUP, "g", Operation.READ)
TOPIC_A = allow(ResourceType.TOPIC, "a", Operation.READ)


@pytest.mark.parametrize(
    ("api_key", "body", "acls", "asked"),
    [
        (ApiKey.OFFSET_COMMIT, commit("a", "b"), [GROUP_READ, TOPIC_A], ["a"]),
        (ApiKey.OFFSET_COMMIT, commit("a", "b"), [TOPIC_A], []),  # no READ on the group
        (ApiKey.OFFSET_COMMIT, commit("a"), [GROUP_READ], []),  # no READ on the topic
        (
            ApiKey.TXN_OFFSET_COMMIT,
            txn_commit("a", "b"),
            [GROUP_READ, TOPIC_A, allow(ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE)],
            ["a"],
        ),
        (ApiKey.TXN_OFFSET_COMMIT, txn_commit("a"), [GROUP_READ, TOPIC_A], []),  # no WRITE on the id
        (ApiKey.OFFSET_DELETE, delete("a"), [GROUP_READ, TOPIC_A], []),  # DELETE on the group, not READ
        (
            ApiKey.OFFSET_DELETE,
            delete("a", "b"),
            [allow(ResourceType.GROUP, "g", Operation.DELETE), TOPIC_A],
            ["a"],
        ),
    ],
)
def test_only_what_the_acl_check_lets_through_is_asked_about(
    api_key: int, body: Any, acls: list[AclRecord], asked: list[str]
) -> None:
    assert lookup(acls).unknown_names(context(ALICE), api_key, body) == asked


def test_denials_seen_by_the_lookup_are_not_logged_twice() -> None:
    """The request's own check logs its denials; the lookup's checks are quiet."""
    found = lookup([GROUP_READ])
    assert found.authorizer is not None
    denied: list[tuple[str, str, int, int, str]] = []
    found.authorizer.on_denied = lambda *args: denied.append(args)
    assert found.unknown_names(context(ALICE), ApiKey.OFFSET_COMMIT, commit("a")) == []
    assert found.unknown_names(context("User:mallory"), ApiKey.OFFSET_COMMIT, commit("a")) == []
    assert denied == []


def test_a_super_user_is_asked_about_as_without_acls() -> None:
    found = UpstreamTopicLookup(SimpleNamespace(catalog=UpstreamCatalog()))  # type: ignore[arg-type]
    found.authorizer = Authorizer(super_users=[ALICE])
    assert found.unknown_names(context(ALICE), ApiKey.OFFSET_COMMIT, commit("a")) == ["a"]
