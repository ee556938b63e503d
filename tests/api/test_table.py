"""The pure route table: authorization and the unknown-topic filter in front of the core, their
partial answers merged into the core's response whenever it leaves."""

from __future__ import annotations

from typing import Any

from coordinator.api.authz import AclLayer
from coordinator.api.table import api_routes
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.result import Result
from coordinator.security.acl import Authorizer, Operation, ResourceType
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
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
from tests.cluster.test_cluster import Sent, create, make_cluster

LITERAL, ALLOW = 3, 3
USER = "User:alice"


def _run(routes: Any, api_key: ApiKey, version: int, request: Any) -> Any:
    """Handle one request and release its Results as the runtime does (every write durable)."""
    sent = Sent()
    ctx = RequestContext(0, 0, version, "client", "127.0.0.1", sent, principal=USER)
    route = routes.get(api_key)
    pending: list[Result] = [route.handle(ctx, request)]
    while pending:
        result = pending.pop()
        for reply_to, response in result.replies:
            reply_to.send(response)
        if result.on_durable is not None:
            pending.append(result.on_durable(0))
    assert len(sent.responses) == 1
    return sent.responses[0]


def _routes(*, acls: list[AclRecord] | None = None) -> Any:
    cluster = make_cluster(auto_create=False)
    create(cluster, "known", 2)
    create(cluster, "secret", 2)
    coordinator = GroupCoordinator(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    coordinator.attach_catalog(cluster)
    routes = api_routes(cluster, coordinator)
    if acls is not None:
        authorizer = Authorizer()
        authorizer.load(acls)
        AclLayer(authorizer).install(routes)
    return routes


def _commit(*topics: tuple[str, list[int]]) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name, partitions=[OffsetCommitRequestPartition(p, 5) for p in partitions]
            )
            for name, partitions in topics
        ],
    )


def _codes(response: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


def test_unknown_partitions_are_answered_beside_the_cores_answer() -> None:
    routes = _routes()
    response = _run(routes, ApiKey.OFFSET_COMMIT, 8, _commit(("known", [0, 7]), ("nope", [0])))
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _codes(response) == [("known", 0, 0), ("known", 7, unknown), ("nope", 0, unknown)]
    only_unknown = _run(routes, ApiKey.OFFSET_COMMIT, 8, _commit(("nope", [1])))
    assert _codes(only_unknown) == [("nope", 1, unknown)]


def test_authorization_runs_before_the_unknown_topic_filter_and_has_the_last_word() -> None:
    acl = AclRecord(ResourceType.GROUP, "g", LITERAL, USER, "*", Operation.READ, ALLOW)
    read_known = AclRecord(ResourceType.TOPIC, "known", LITERAL, USER, "*", Operation.READ, ALLOW)
    read_missing = AclRecord(ResourceType.TOPIC, "nope", LITERAL, USER, "*", Operation.READ, ALLOW)
    routes = _routes(acls=[acl, read_known, read_missing])
    response = _run(
        routes, ApiKey.OFFSET_COMMIT, 8, _commit(("known", [1, 9]), ("secret", [0]), ("nope", [0]))
    )
    unknown, denied = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _codes(response) == [
        ("known", 1, 0),
        ("known", 9, unknown),
        ("nope", 0, unknown),
        ("secret", 0, denied),
    ]
    # Without READ on the group nothing reaches the core or the catalog: every partition is 30.
    no_group = _run(
        _routes(acls=[read_known]), ApiKey.OFFSET_COMMIT, 8, _commit(("known", [0]), ("nope", [0]))
    )
    group_denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert _codes(no_group) == [("known", 0, group_denied), ("nope", 0, group_denied)]


def test_offset_delete_keeps_a_top_level_error_without_topics() -> None:
    routes = _routes()
    request = OffsetDeleteRequest(
        "missing-group", [OffsetDeleteRequestTopic("nope", [OffsetDeleteRequestPartition(0)])]
    )
    response = _run(routes, ApiKey.OFFSET_DELETE, 0, request)
    assert (response.error_code, response.topics) == (ErrorCode.GROUP_ID_NOT_FOUND, [])


def test_acl_apis_answer_security_disabled_until_an_authorizer_is_installed() -> None:
    request = CreateAclsRequest(
        [AclCreation(ResourceType.GROUP, "g", LITERAL, USER, "*", Operation.READ, ALLOW)]
    )
    response = _run(_routes(), ApiKey.CREATE_ACLS, 3, request)
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    ]


def test_a_transactional_commit_has_its_unknown_partitions_answered_as_kafka_does() -> None:
    routes = _routes()
    request = TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id="g",
        producer_id=7,
        producer_epoch=0,
        topics=[
            TxnOffsetCommitRequestTopic(
                "known", partitions=[TxnOffsetCommitRequestPartition(p, 5) for p in (0, 7)]
            ),
            TxnOffsetCommitRequestTopic("nope", partitions=[TxnOffsetCommitRequestPartition(0, 5)]),
        ],
    )
    response = _run(routes, ApiKey.TXN_OFFSET_COMMIT, 3, request)
    # Standalone coordinates no transactions: the known partition reaches that answer.
    unknown, no_txn = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert _codes(response) == [("known", 0, no_txn), ("known", 7, unknown), ("nope", 0, unknown)]
