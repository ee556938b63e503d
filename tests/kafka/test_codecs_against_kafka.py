"""Oracle for the versions Kafka 4.4 added that kafka-python's classes predate: Kafka itself.

Each request is encoded by our codec and sent to a real Kafka 4.4 broker (Kafka decoding it and
answering on its fields checks our request layout); Kafka's response frame is decoded by our
codec and must re-encode to the very same bytes. Every pair model.kafka_broker_pairs() lists
has a case here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from protocol import wire
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import streams_group_heartbeat as sgh
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from tests.protocol.model import kafka_broker_pairs
from tests.support.kafka_broker import KafkaCluster
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

UNKNOWN_ID = uuid.UUID("0b7e6c1a-54d2-4c6b-9a57-7d1f2b3c4d5e").bytes


def _api_versions(cluster: KafkaCluster, node_id: int) -> ApiVersionsRequest:
    return ApiVersionsRequest(
        client_software_name="tests",
        client_software_version="1",
        cluster_id=cluster.cluster_id,
        node_id=node_id,
    )


def _busy_group(cluster: KafkaCluster, group: str) -> DeleteGroupsRequest:
    """A consumer group with one member on the broker, then a request to delete it."""
    with WireClient(cluster.bootstrap) as client:
        joined = client.request(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=["codec-oracle-topic"],
                topic_partitions=[],
            ),
        )
    assert joined.error_code == 0, joined
    return DeleteGroupsRequest([group])


def _streams_join(group: str) -> sgh.StreamsGroupHeartbeatRequest:
    """A streams member joining with a one-subtopology topology whose source topic is missing."""
    return sgh.StreamsGroupHeartbeatRequest(
        group_id=group,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=sgh.Topology(
            epoch=1,
            subtopologies=[
                sgh.Subtopology(
                    subtopology_id="0",
                    source_topics=["codec-oracle-missing"],
                    state_changelog_topics=[sgh.TopicInfo(f"{group}-store-changelog")],
                )
            ],
        ),
        active_tasks=[],
        standby_tasks=[],
        warmup_tasks=[],
        process_id=str(uuid.uuid4()),
    )


def _joined_streams_group(cluster: KafkaCluster, group: str) -> StreamsGroupDescribeRequest:
    with WireClient(cluster.bootstrap) as client:
        joined = client.request(ApiKey.STREAMS_GROUP_HEARTBEAT, 1, _streams_join(group))
    assert joined.error_code == 0, joined
    return StreamsGroupDescribeRequest([group, "codec-oracle-none"], include_authorized_operations=True)


def _missing_source(r: sgh.StreamsGroupHeartbeatResponse) -> bool:
    details = [s.status_detail for s in r.status or ()]
    return (
        r.error_code == 0
        and r.member_epoch == 1
        and "Source topics codec-oracle-missing are missing." in details
    )


# (api, version, case) -> (request for the broker, what Kafka's answer must show)
Case = tuple[Callable[[KafkaCluster], Any], Callable[[Any], bool]]
CASES: dict[tuple[ApiKey, int, str], Case] = {
    (ApiKey.API_VERSIONS, 5, "expected-identity"): (
        lambda k: _api_versions(k, 1),
        lambda r: (
            r.error_code == 0
            and any(a.api_key == ApiKey.API_VERSIONS and a.max_version == 5 for a in r.api_keys)
        ),
    ),
    (ApiKey.API_VERSIONS, 5, "another-node"): (
        lambda k: _api_versions(k, 2),
        lambda r: r.error_code == ErrorCode.REBOOTSTRAP_REQUIRED and r.api_keys == [],
    ),
    (ApiKey.DELETE_GROUPS, 3, "unknown-groups"): (
        lambda k: DeleteGroupsRequest(["codec-oracle-a", "codec-oracle-b"]),
        lambda r: (
            [(g.group_id, g.error_code) for g in r.results]
            == [
                ("codec-oracle-a", ErrorCode.GROUP_ID_NOT_FOUND),
                ("codec-oracle-b", ErrorCode.GROUP_ID_NOT_FOUND),
            ]
        ),
    ),
    (ApiKey.DELETE_GROUPS, 3, "non-empty-group"): (
        lambda k: _busy_group(k, "codec-oracle-busy"),
        lambda r: [(g.error_code, g.error_message) for g in r.results] == [(ErrorCode.NON_EMPTY_GROUP, None)],
    ),
    (ApiKey.DESCRIBE_GROUPS, 6, "unknown-group"): (
        lambda k: DescribeGroupsRequest(["codec-oracle-a"]),
        lambda r: r.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND and r.groups[0].error_message,
    ),
    (ApiKey.OFFSET_COMMIT, 10, "unknown-id"): (
        lambda k: OffsetCommitRequest(
            group_id="codec-oracle-c",
            topics=[
                OffsetCommitRequestTopic(topic_id=UNKNOWN_ID, partitions=[OffsetCommitRequestPartition(0, 5)])
            ],
        ),
        lambda r: (
            r.topics[0].topic_id == UNKNOWN_ID
            and r.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        ),
    ),
    (ApiKey.STREAMS_GROUP_HEARTBEAT, 0, "missing-source"): (
        lambda k: _streams_join("codec-oracle-s0"),
        _missing_source,
    ),
    (ApiKey.STREAMS_GROUP_HEARTBEAT, 1, "missing-source"): (
        lambda k: _streams_join("codec-oracle-s1"),
        _missing_source,
    ),
    (ApiKey.STREAMS_GROUP_DESCRIBE, 0, "joined-and-unknown"): (
        lambda k: _joined_streams_group(k, "codec-oracle-d0"),
        lambda r: (
            sorted(g.error_code for g in r.groups) == [0, ErrorCode.GROUP_ID_NOT_FOUND]
            and [m.topology_epoch for g in r.groups for m in g.members] == [1]
        ),
    ),
    (ApiKey.STREAMS_GROUP_DESCRIBE, 1, "joined-and-unknown"): (
        lambda k: _joined_streams_group(k, "codec-oracle-d1"),
        lambda r: (
            sorted(g.error_code for g in r.groups) == [0, ErrorCode.GROUP_ID_NOT_FOUND]
            and [g.topology.subtopologies[0].source_topics for g in r.groups if g.topology]
            == [["codec-oracle-missing"]]
        ),
    ),
    (ApiKey.OFFSET_FETCH, 10, "unknown-id"): (
        lambda k: OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    "codec-oracle-c",
                    topics=[OffsetFetchRequestTopics(topic_id=UNKNOWN_ID, partition_indexes=[0, 1])],
                )
            ]
        ),
        lambda r: (
            [p.error_code for p in r.groups[0].topics[0].partitions] == [ErrorCode.UNKNOWN_TOPIC_ID] * 2
        ),
    ),
    (ApiKey.TXN_OFFSET_COMMIT, 6, "no-transaction"): (
        lambda k: TxnOffsetCommitRequest(
            transactional_id="codec-oracle-txn",
            group_id="codec-oracle-txn-group",
            producer_id=424242,
            producer_epoch=0,
            topics=[
                TxnOffsetCommitRequestTopic(
                    topic_id=UNKNOWN_ID,
                    partitions=[
                        TxnOffsetCommitRequestPartition(0, 5, -1, ""),
                        TxnOffsetCommitRequestPartition(1, 6, -1, ""),
                    ],
                )
            ],
        ),
        # No open transaction of that producer: every partition refused, none committed.
        lambda r: (
            [p.partition_index for p in r.topics[0].partitions] == [0, 1]
            and all(p.error_code != ErrorCode.NONE for p in r.topics[0].partitions)
        ),
    ),
}


def test_every_version_newer_than_kafka_python_has_a_case() -> None:
    assert set(kafka_broker_pairs()) <= {(key, version) for key, version, _ in CASES}


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: f"{c[0].name}-v{c[1]}-{c[2]}")
def test_kafkas_answer_decodes_and_reencodes_byte_for_byte(
    kafka_broker: KafkaCluster, case: tuple[ApiKey, int, str]
) -> None:
    key, version, _ = case
    build, expected = CASES[case]
    request = build(kafka_broker)
    frame = wire.encode_request(key, version, 41, "codec-oracle", request)
    assert wire.decode_request(frame[4:]).body == request
    # A fresh broker answers group requests COORDINATOR_LOAD_IN_PROGRESS until it has loaded the
    # offsets partition: asked again until it has (every answer is checked to re-encode).
    deadline = time.monotonic() + 60
    while True:
        with WireClient(kafka_broker.bootstrap) as client:
            client.send_raw(frame)
            answer = client.read_frame()
        correlation_id, response = wire.decode_response(key, version, answer)
        assert correlation_id == 41
        assert wire.encode_response(key, version, correlation_id, response)[4:] == answer
        if not _coordinator_loading(response) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert expected(response), response


def _coordinator_loading(response: Any) -> bool:
    loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    groups = getattr(response, "groups", None) or []
    return getattr(response, "error_code", None) == loading or any(
        getattr(g, "error_code", None) == loading for g in groups
    )
