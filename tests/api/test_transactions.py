"""The transactional APIs: refused in standalone mode, TxnOffsetCommit served once outcomes are
learned (gateway mode), v6 topic ids resolved (docs/transactions.md)."""

from __future__ import annotations

from typing import Any

from coordinator.api.authz import AclLayer
from coordinator.api.table import api_routes
from coordinator.api.topic_ids import TopicIds
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.security.acl import Authorizer, Operation, ResourceType
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from storage.records import AclRecord
from tests.api.test_table import ALLOW, LITERAL, USER, _run
from tests.cluster.test_cluster import create, make_cluster

MAPPING = ErrorCode.INVALID_PRODUCER_ID_MAPPING


def _setup(*, gateway: bool) -> tuple[Any, GroupCoordinator, bytes]:
    cluster = make_cluster(auto_create=False)
    create(cluster, "known", 2)
    create(cluster, "secret", 2)
    coordinator = GroupCoordinator(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    coordinator.attach_catalog(cluster)
    coordinator.accepts_transactional_offsets = gateway
    routes = api_routes(cluster, coordinator)
    TopicIds(cluster).install(routes)
    topic_id = cluster.topics["known"].topic_id
    return routes, coordinator, topic_id


def _txn_commit(topic: TxnOffsetCommitRequestTopic) -> TxnOffsetCommitRequest:
    return TxnOffsetCommitRequest("tx", "g", 7, 0, -1, "", None, [topic])


def test_standalone_answers_an_unknown_transactional_id() -> None:
    routes, coordinator, _ = _setup(gateway=False)
    add = _run(routes, ApiKey.ADD_OFFSETS_TO_TXN, 3, AddOffsetsToTxnRequest("tx", 7, 0, "g"))
    assert add.error_code == MAPPING
    end = _run(routes, ApiKey.END_TXN, 4, EndTxnRequest("tx", 7, 0, True))
    assert end.error_code == MAPPING
    topic = TxnOffsetCommitRequestTopic("known", partitions=[TxnOffsetCommitRequestPartition(0, 5)])
    commit = _run(routes, ApiKey.TXN_OFFSET_COMMIT, 3, _txn_commit(topic))
    assert [p.error_code for t in commit.topics for p in t.partitions] == [MAPPING]
    assert coordinator.pending_txn_offset_count() == 0


def test_gateway_takes_txn_offset_commit_v6_by_topic_id() -> None:
    routes, coordinator, topic_id = _setup(gateway=True)
    known = TxnOffsetCommitRequestTopic(topic_id=topic_id, partitions=[TxnOffsetCommitRequestPartition(1, 5)])
    unknown = TxnOffsetCommitRequestTopic(
        topic_id=b"\x09" * 16, partitions=[TxnOffsetCommitRequestPartition(0, 1)]
    )
    request = TxnOffsetCommitRequest("tx", "g", 7, 0, -1, "", None, [known, unknown])
    answer = _run(routes, ApiKey.TXN_OFFSET_COMMIT, 6, request)
    assert [(t.topic_id, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions] == [
        (b"\x09" * 16, 0, ErrorCode.UNKNOWN_TOPIC_ID),
        (topic_id, 1, 0),
    ]
    assert [(r.topic, r.partition, r.offset) for r in coordinator.pending_txn_offsets("g")] == [
        ("known", 1, 5)
    ]


def _acl_routes(*acls: AclRecord) -> tuple[Any, GroupCoordinator]:
    routes, coordinator, _ = _setup(gateway=True)
    authorizer = Authorizer()
    authorizer.load(list(acls))
    AclLayer(authorizer).install(routes)
    return routes, coordinator


def _acl(resource_type: int, name: str, operation: int) -> AclRecord:
    return AclRecord(resource_type, name, LITERAL, USER, "*", operation, ALLOW)


def test_txn_offset_commit_needs_write_on_the_transactional_id_then_read_on_group_and_topics() -> None:
    topics = [
        TxnOffsetCommitRequestTopic("known", partitions=[TxnOffsetCommitRequestPartition(0, 5)]),
        TxnOffsetCommitRequestTopic("secret", partitions=[TxnOffsetCommitRequestPartition(0, 5)]),
    ]
    group_read = _acl(ResourceType.GROUP, "g", Operation.READ)
    topic_read = _acl(ResourceType.TOPIC, "known", Operation.READ)
    txn_write = _acl(ResourceType.TRANSACTIONAL_ID, "tx", Operation.WRITE)

    def codes(*acls: AclRecord) -> list[tuple[str, int]]:
        routes, _ = _acl_routes(*acls)
        request = TxnOffsetCommitRequest("tx", "g", 7, 0, -1, "", None, [*topics])
        answer = _run(routes, ApiKey.TXN_OFFSET_COMMIT, 3, request)
        return sorted((t.name, p.error_code) for t in answer.topics for p in t.partitions)

    denied_txn = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert codes(group_read, topic_read) == [("known", denied_txn), ("secret", denied_txn)]
    denied_group = ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert codes(txn_write, topic_read) == [("known", denied_group), ("secret", denied_group)]
    assert codes(txn_write, group_read, topic_read) == [
        ("known", 0),
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
