"""The cluster view: catalog validations and the empty-log answers, on the pure module."""

from __future__ import annotations

from functools import partial
from itertools import count
from typing import Any

import pytest

from coordinator.core.cluster import Cluster, NodeIdentity, topic_name_error
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from storage.records import TopicRecord, TopicTombstone


class Sent:
    def __init__(self) -> None:
        self.responses: list[Any] = []

    def send(self, response: Any) -> None:
        self.responses.append(response)


def make_cluster(auto_create: bool = True) -> Cluster:
    ids = count(1)
    return Cluster(
        NodeIdentity(7, "coord.local", 9092, "cid"),
        auto_create_topics=auto_create,
        num_partitions=3,
        topic_id_factory=lambda: next(ids).to_bytes(16, "big"),
    )


def call(handler: Any, request: Any, version: int, *, durable: bool = True) -> tuple[Any, Result]:
    """Run a handler; make its records durable (or fail them) like the runtime; return the reply."""
    sent = Sent()
    ctx = RequestContext(
        now_ms=0, wall_ms=0, api_version=version, client_id="c", client_host="h", reply_to=sent
    )
    result = handler(ctx, request)
    pending = [result]
    while pending:
        current = pending.pop()
        if current.records and not durable:
            assert current.on_failed is not None
            pending.append(current.on_failed(0, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            continue
        for reply_to, response in current.replies:
            reply_to.send(response)
        if current.on_durable is not None:
            pending.append(current.on_durable(0))
    assert len(sent.responses) == 1
    return sent.responses[0], result


def create(cluster: Cluster, name: str, partitions: int = 6) -> None:
    response, _ = call(cluster.create_topics, CreateTopicsRequest([CreatableTopic(name, partitions, 1)]), 5)
    assert response.topics[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("name", "ok"),
    [("orders", True), ("a.b_c-D9", True), ("", False), (".", False), ("..", False), ("x" * 249, True),
     ("x" * 250, False), ("has space", False), ("ünicode", False)],
)  # fmt: skip
def test_topic_names(name: str, ok: bool) -> None:
    assert (topic_name_error(name) is None) is ok


def test_create_topics_validations() -> None:
    cluster = make_cluster()
    create(cluster, "existing")
    request = CreateTopicsRequest(
        [
            CreatableTopic("good", 6, 1, configs=[CreatableTopicConfig("retention.ms", "1000")]),
            CreatableTopic("existing", 1, 1),
            CreatableTopic("bad name", 1, 1),
            CreatableTopic("rf3", 1, 3),
            CreatableTopic("zero", 0, 1),
            CreatableTopic("defaults", -1, -1),
            CreatableTopic("dup", 1, 1),
            CreatableTopic("dup", 1, 1),
            CreatableTopic("badconfig", 1, 1, configs=[CreatableTopicConfig("no.such.config", "1")]),
            CreatableTopic(
                "assigned",
                -1,
                -1,
                assignments=[CreatableReplicaAssignment(0, [7]), CreatableReplicaAssignment(1, [7])],
            ),
            CreatableTopic("badassign", -1, -1, assignments=[CreatableReplicaAssignment(0, [1])]),
        ]
    )
    response, result = call(cluster.create_topics, request, 7)
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {
        "good": ErrorCode.NONE,
        "existing": ErrorCode.TOPIC_ALREADY_EXISTS,
        "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "rf3": ErrorCode.INVALID_REPLICATION_FACTOR,
        "zero": ErrorCode.INVALID_PARTITIONS,
        "defaults": ErrorCode.NONE,
        "dup": ErrorCode.INVALID_REQUEST,
        "badconfig": ErrorCode.INVALID_CONFIG,
        "assigned": ErrorCode.NONE,
        "badassign": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    }
    by_name = {t.name: t for t in response.topics}
    assert by_name["rf3"].error_message == "Replication factor: 3 larger than available brokers: 1."
    assert by_name["good"].num_partitions == 6 and by_name["good"].configs[0].name == "retention.ms"
    assert by_name["defaults"].num_partitions == 3  # num.partitions
    assert by_name["assigned"].num_partitions == 2
    assert by_name["existing"].num_partitions == -1 and by_name["existing"].configs is None
    assert {r.name for r in result.records if isinstance(r, TopicRecord)} == {"good", "defaults", "assigned"}
    assert cluster.partitions_of("good") == 6


def test_create_topics_v0_has_no_defaults_and_validate_only_creates_nothing() -> None:
    cluster = make_cluster()
    response, _ = call(cluster.create_topics, CreateTopicsRequest([CreatableTopic("t", -1, -1)]), 3)
    assert response.topics[0].error_code == ErrorCode.INVALID_PARTITIONS  # -1 means "default" only from v4
    response, result = call(
        cluster.create_topics, CreateTopicsRequest([CreatableTopic("t", 2, 1)], validate_only=True), 5
    )
    assert response.topics[0].error_code == ErrorCode.NONE and not result.records
    assert cluster.partitions_of("t") is None


def test_failed_catalog_write_fails_the_topic_and_changes_nothing() -> None:
    cluster = make_cluster()
    response, _ = call(
        cluster.create_topics, CreateTopicsRequest([CreatableTopic("t", 2, 1)]), 5, durable=False
    )
    assert response.topics[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert cluster.partitions_of("t") is None


def test_metadata_lists_autocreates_and_rejects() -> None:
    cluster = make_cluster()
    create(cluster, "known", 2)
    request = MetadataRequest(topics=[MetadataRequestTopic(name="known"), MetadataRequestTopic(name="fresh"),
                                      MetadataRequestTopic(name="bad/name")], allow_auto_topic_creation=True)  # fmt: skip
    response, _ = call(cluster.metadata, request, 12)
    assert [b.node_id for b in response.brokers] == [7] and response.controller_id == 7
    assert response.cluster_id == "cid"
    topics = {t.name: t for t in response.topics}
    assert len(topics["known"].partitions) == 2
    assert topics["known"].partitions[0].leader_id == 7 and topics["known"].partitions[0].isr_nodes == [7]
    assert len(topics["fresh"].partitions) == 3 and cluster.partitions_of("fresh") == 3
    assert topics["bad/name"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    no_create = MetadataRequest(topics=[MetadataRequestTopic(name="other")], allow_auto_topic_creation=False)
    response, _ = call(cluster.metadata, no_create, 12)
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    everything, _ = call(cluster.metadata, MetadataRequest(topics=None), 12)
    assert sorted(t.name for t in everything.topics) == ["fresh", "known"]
    v0_all, _ = call(cluster.metadata, MetadataRequest(topics=[]), 0)  # v0: empty list means all
    assert len(v0_all.topics) == 2


def test_metadata_autocreate_disabled_by_config() -> None:
    cluster = make_cluster(auto_create=False)
    response, result = call(cluster.metadata, MetadataRequest(topics=[MetadataRequestTopic(name="t")]), 3)
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not result.records


def test_metadata_autocreate_write_failure_is_retriable() -> None:
    cluster = make_cluster()
    response, _ = call(
        cluster.metadata, MetadataRequest(topics=[MetadataRequestTopic(name="t")]), 9, durable=False
    )
    assert response.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert cluster.partitions_of("t") is None


def test_delete_topics_by_name_and_id() -> None:
    cluster = make_cluster()
    create(cluster, "a")
    create(cluster, "b")
    topic_id = cluster.topics["b"].topic_id
    sent = Sent()
    ctx = RequestContext(0, 0, 6, "c", "h", sent)
    result, deleted = cluster.delete_topics(
        ctx,
        DeleteTopicsRequest(
            topics=[DeleteTopicState("a"), DeleteTopicState(None, topic_id), DeleteTopicState("zz")]
        ),
    )
    assert deleted == ["a", "b"]
    assert result.records == [TopicTombstone("a"), TopicTombstone("b")]
    assert result.on_durable is not None
    result.on_durable(0).replies[0][0].send(result.on_durable(0).replies[0][1])
    codes = [r.error_code for r in sent.responses[0].responses]
    assert codes == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert cluster.topics == {}


def test_create_partitions() -> None:
    cluster = make_cluster()
    create(cluster, "t", 2)
    request = CreatePartitionsRequest(
        [CreatePartitionsTopic("t", 4, None), CreatePartitionsTopic("missing", 3, None)], timeout_ms=1000
    )
    response, _ = call(cluster.create_partitions, request, 3)
    assert [r.error_code for r in response.results] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert cluster.partitions_of("t") == 4
    shrink, _ = call(
        cluster.create_partitions, CreatePartitionsRequest([CreatePartitionsTopic("t", 3, None)]), 3
    )
    assert shrink.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    bad_assign = CreatePartitionsRequest([CreatePartitionsTopic("t", 5, [CreatePartitionsAssignment([9])])])
    response, _ = call(cluster.create_partitions, bad_assign, 1)
    assert response.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_answers_this_node(version: int) -> None:
    cluster = make_cluster()
    request = FindCoordinatorRequest(key="g", key_type=0, coordinator_keys=["g", ""])
    response, _ = call(cluster.find_coordinator, request, version)
    if version >= 4:
        assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators] == [
            ("g", 7, "coord.local", 9092, 0), ("", 7, "coord.local", 9092, 0)]  # fmt: skip
    else:
        assert (response.node_id, response.host, response.port, response.error_code) == (
            7,
            "coord.local",
            9092,
            0,
        )


def test_find_coordinator_refuses_transactions_and_share_groups() -> None:
    cluster = make_cluster()
    response, _ = call(cluster.find_coordinator, FindCoordinatorRequest(key="tx", key_type=1), 3)
    assert response.error_code == ErrorCode.INVALID_REQUEST and response.node_id == -1 and response.port == -1
    response, _ = call(
        cluster.find_coordinator, FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), 5
    )
    assert response.coordinators[0].error_code == ErrorCode.INVALID_REQUEST


def test_list_offsets_on_empty_logs() -> None:
    cluster = make_cluster()
    create(cluster, "t", 1)
    partitions = [ListOffsetsPartition(0, timestamp=-1), ListOffsetsPartition(0, timestamp=-2),
                  ListOffsetsPartition(0, timestamp=1700000000000), ListOffsetsPartition(5, timestamp=-1)]  # fmt: skip
    response, _ = call(
        cluster.list_offsets, ListOffsetsRequest(topics=[ListOffsetsTopic("t", partitions)]), 8
    )
    answers = [(p.error_code, p.offset, p.timestamp) for p in response.topics[0].partitions]
    assert answers == [(0, 0, -1), (0, 0, -1), (0, -1, -1), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    v0, _ = call(
        cluster.list_offsets,
        ListOffsetsRequest(topics=[ListOffsetsTopic("t", [ListOffsetsPartition(0, timestamp=-1)])]),
        0,
    )
    assert v0.topics[0].partitions[0].old_style_offsets == [0]


def test_fetch_answers_empty_partitions() -> None:
    cluster = make_cluster()
    create(cluster, "t", 1)
    request = FetchRequest(max_wait_ms=100, topics=[FetchTopic("t", partitions=[FetchPartition(0, fetch_offset=0),
                                                                             FetchPartition(0, fetch_offset=5)])])  # fmt: skip
    response = cluster.fetch_response(11, request)
    first, second = response.responses[0].partitions
    assert (first.error_code, first.high_watermark, first.records) == (0, 0, b"")
    assert second.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    by_id = FetchRequest(
        topics=[FetchTopic(topic_id=cluster.topics["t"].topic_id, partitions=[FetchPartition(0)])]
    )
    assert cluster.fetch_response(13, by_id).responses[0].partitions[0].error_code == 0
    unknown = FetchRequest(topics=[FetchTopic("nope", partitions=[FetchPartition(0)])])
    assert (
        cluster.fetch_response(12, unknown).responses[0].partitions[0].error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    incremental = FetchRequest(session_id=42, session_epoch=3)
    assert cluster.fetch_response(12, incremental).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_produce_refused_and_acks_zero_unanswered() -> None:
    cluster = make_cluster()
    request = ProduceRequest(
        acks=-1, topic_data=[TopicProduceData("t", partition_data=[PartitionProduceData(0)])]
    )
    response, _ = call(cluster.produce, request, 9)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUEST
    ctx = RequestContext(0, 0, 9, "c", "h", Sent())
    assert cluster.produce(ctx, ProduceRequest(acks=0)).replies == []


def test_api_versions_and_describe_cluster() -> None:
    cluster = make_cluster()
    response, _ = call(cluster.api_versions, ApiVersionsRequest("kafka-python", "3.0.12"), 3)
    assert response.error_code == 0 and any(k.api_key == 11 and k.max_version == 9 for k in response.api_keys)
    bad, _ = call(cluster.api_versions, ApiVersionsRequest("bad name!", "1"), 3)
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    described, _ = call(cluster.describe_cluster, DescribeClusterRequest(), 1)
    assert (described.cluster_id, described.controller_id, described.brokers[0].broker_id) == ("cid", 7, 7)


def _first(handler: Any, ctx: RequestContext, request: Any) -> Result:
    result: Result = handler(ctx, request)[0]
    return result


def _encodes(api_key: int, version: int, response: Any) -> None:
    from protocol.messages import CODECS

    CODECS[(api_key, version)][3](response, bytearray())  # raises on a field the version lacks


@pytest.mark.parametrize(
    ("api_key", "low", "high"),
    [
        (2, 0, 8),
        (3, 0, 12),
        (10, 0, 6),
        (19, 0, 7),
        (20, 0, 6),
        (37, 0, 3),
        (60, 0, 1),
        (0, 3, 9),
        (18, 0, 4),
    ],
)
def test_every_answer_encodes_in_the_version_asked(api_key: int, low: int, high: int) -> None:
    """Handlers must not set fields the request's version does not have (the encoder refuses them)."""
    for version in range(low, high + 1):
        cluster = make_cluster()
        create(cluster, "t", 2)
        request: Any
        handler: Any
        if api_key == 2:
            handler = cluster.list_offsets
            request = ListOffsetsRequest(
                topics=[
                    ListOffsetsTopic("t", [ListOffsetsPartition(0, timestamp=-1), ListOffsetsPartition(9)])
                ]
            )
        elif api_key == 3:
            handler = cluster.metadata
            request = MetadataRequest(
                topics=[MetadataRequestTopic(name="t"), MetadataRequestTopic(name="new")]
            )
        elif api_key == 10:
            handler = cluster.find_coordinator
            request = (
                FindCoordinatorRequest(key="g")
                if version < 4
                else FindCoordinatorRequest(coordinator_keys=["g"])
            )
        elif api_key == 19:
            handler = cluster.create_topics
            request = CreateTopicsRequest([CreatableTopic("u", 3, 1), CreatableTopic("t", 3, 1)])
        elif api_key == 20:
            handler = partial(_first, cluster.delete_topics)
            request = (
                DeleteTopicsRequest(topics=[DeleteTopicState(name="t"), DeleteTopicState(name="zz")])
                if version >= 6
                else DeleteTopicsRequest(topic_names=["t", "zz"])
            )
        elif api_key == 37:
            handler = cluster.create_partitions
            request = CreatePartitionsRequest([CreatePartitionsTopic("t", 4), CreatePartitionsTopic("zz", 4)])
        elif api_key == 60:
            handler = cluster.describe_cluster
            request = DescribeClusterRequest()
        elif api_key == 0:
            handler = cluster.produce
            request = ProduceRequest(
                acks=-1, topic_data=[TopicProduceData("t", partition_data=[PartitionProduceData(0)])]
            )
        else:
            handler = cluster.api_versions
            request = ApiVersionsRequest()
        response, _ = call(handler, request, version)
        _encodes(api_key, version, response)
    for version in range(4, 14):
        cluster = make_cluster()
        create(cluster, "t", 1)
        fetch = FetchRequest(topics=[FetchTopic("t", partitions=[FetchPartition(0), FetchPartition(3)])])
        if version >= 13:
            fetch = FetchRequest(
                topics=[FetchTopic(topic_id=cluster.topics["t"].topic_id, partitions=[FetchPartition(0)])]
            )
        _encodes(1, version, cluster.fetch_response(version, fetch))
