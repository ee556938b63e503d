"""The gateway's authorization of forwarded requests, per API, without sockets: a request frame
goes through ForwardedAuthorization.screen and the forwarded frame, the local answer and the
merged response are decoded and checked."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.gateway.authorization import ForwardedAuthorization, Screened
from coordinator.gateway.authz_rules import PREVIEWS, RULES
from coordinator.gateway.catalog import UpstreamCatalog
from coordinator.security.acl import Authorizer, Operation, PatternType, Permission, ResourceType
from protocol.errors import ErrorCode
from protocol.gateway_wire import decode_forwarded, decode_forwarded_response, encode_forwarded_response
from protocol.messages import (
    GATEWAY_CODECS,
    GATEWAY_FLEXIBLE,
    add_offsets_to_txn,
    create_topics,
    delete_topics,
    describe_configs,
    end_txn,
    fetch,
    init_producer_id,
    list_config_resources,
    list_offsets,
    metadata,
    produce,
)
from protocol.messages.headers import RequestHeader, encode_request_header_v1, encode_request_header_v2
from storage.records import AclRecord

DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
SECRET_ID = bytes(range(1, 17))
PUBLIC_ID = bytes(range(2, 18))


def frame_of(api_key: int, version: int, body: Any, correlation_id: int = 7) -> bytes:
    out = bytearray()
    header = RequestHeader(api_key, version, correlation_id, "unit")
    if (api_key, version) in GATEWAY_FLEXIBLE:
        encode_request_header_v2(header, out)
    else:
        encode_request_header_v1(header, out)
    GATEWAY_CODECS[(api_key, version)][1](body, out)
    return bytes(out)


def binding(
    name: str,
    principal: str,
    operation: int,
    *,
    resource: int = ResourceType.TOPIC,
    pattern: int = PatternType.LITERAL,
    permission: int = Permission.ALLOW,
) -> AclRecord:
    return AclRecord(resource, name, pattern, principal, "*", operation, permission)


def catalog() -> UpstreamCatalog:
    known = UpstreamCatalog()
    partitions = [metadata.MetadataResponsePartition(partition_index=0)]
    known.replace_all(
        [
            metadata.MetadataResponseTopic(name="secret", topic_id=SECRET_ID, partitions=partitions),
            metadata.MetadataResponseTopic(name="pub-a", topic_id=PUBLIC_ID, partitions=partitions),
        ]
    )
    return known


def gate(*acls: AclRecord, super_users: tuple[str, ...] = ("User:admin",)) -> ForwardedAuthorization:
    authorizer = Authorizer(super_users)
    authorizer.load(acls)
    return ForwardedAuthorization(authorizer, catalog(), RULES, PREVIEWS)


def answer_of(api_key: int, version: int, screened: Screened) -> Any:
    assert screened.answer is not None, screened
    correlation_id, body = decode_forwarded_response(api_key, version, screened.answer)
    assert correlation_id == 7
    return body


def forwarded_body(screened: Screened) -> Any:
    assert screened.frame is not None, screened
    return decode_forwarded(screened.frame)[1]


def produce_request(*names: str, version: int = 9, acks: int = -1, txn: str | None = None) -> bytes:
    topics = [
        produce.TopicProduceData(name=n, partition_data=[produce.PartitionProduceData(0, b"batch")])
        for n in names
    ]
    return frame_of(
        0,
        version,
        produce.ProduceRequest(transactional_id=txn, acks=acks, timeout_ms=1000, topic_data=topics),
    )


def produce_answer(version: int, *names: str) -> bytes:
    responses = [
        produce.TopicProduceResponse(name=n, partition_responses=[produce.PartitionProduceResponse(0, 0, 5)])
        for n in names
    ]
    return encode_forwarded_response(0, version, 7, produce.ProduceResponse(responses))


def test_no_acl_refuses_every_topic_and_forwards_nothing() -> None:
    screened = gate().screen("User:alice", "127.0.0.1", 0, 9, produce_request("secret", "pub-a"))
    body = answer_of(0, 9, screened)
    assert [(t.name, [p.error_code for p in t.partition_responses]) for t in body.responses] == [
        ("secret", [DENIED]),
        ("pub-a", [DENIED]),
    ]


def test_super_user_forwards_the_frame_untouched() -> None:
    frame = produce_request("secret", "pub-a")
    screened = gate().screen("User:admin", "127.0.0.1", 0, 9, frame)
    assert screened.frame == frame and screened.merge is None


def test_deny_beats_allow_and_the_answer_is_merged_in_request_order() -> None:
    acls = (
        binding("*", "User:bob", Operation.ALL),
        binding("secret", "User:bob", Operation.WRITE, permission=Permission.DENY),
    )
    screened = gate(*acls).screen("User:bob", "127.0.0.1", 0, 9, produce_request("secret", "pub-a", "other"))
    assert [t.name for t in forwarded_body(screened).topic_data] == ["pub-a", "other"]
    assert screened.merge is not None
    _, merged = decode_forwarded_response(0, 9, screened.merge(produce_answer(9, "other", "pub-a")))
    assert [(t.name, t.partition_responses[0].error_code) for t in merged.responses] == [
        ("secret", DENIED),
        ("pub-a", 0),
        ("other", 0),
    ]


def test_produce_by_topic_id_unknown_ids_are_not_forwarded() -> None:
    topics = [
        produce.TopicProduceData(topic_id=SECRET_ID, partition_data=[produce.PartitionProduceData(0, b"x")]),
        produce.TopicProduceData(
            topic_id=bytes(16 * [9]), partition_data=[produce.PartitionProduceData(0, b"x")]
        ),
    ]
    frame = frame_of(0, 13, produce.ProduceRequest(acks=-1, timeout_ms=1, topic_data=topics))
    body = answer_of(
        0,
        13,
        gate(binding("pub-", "User:carol", Operation.WRITE, pattern=PatternType.PREFIXED)).screen(
            "User:carol", "h", 0, 13, frame
        ),
    )
    assert [t.partition_responses[0].error_code for t in body.responses] == [
        DENIED,
        ErrorCode.UNKNOWN_TOPIC_ID,
    ]


def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    acls = (binding("*", "User:bob", Operation.WRITE),)
    body = answer_of(0, 9, gate(*acls).screen("User:bob", "h", 0, 9, produce_request("pub-a", txn="tx")))
    assert (
        body.responses[0].partition_responses[0].error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def test_acks_zero_refused_in_part_closes_the_connection() -> None:
    acls = (binding("pub-", "User:carol", Operation.WRITE, pattern=PatternType.PREFIXED),)
    screened = gate(*acls).screen("User:carol", "h", 0, 9, produce_request("pub-a", "secret", acks=0))
    assert screened.refuse is not None and screened.frame is None


def test_fetch_with_a_prefixed_allow() -> None:
    acls = (binding("pub-", "User:carol", Operation.READ, pattern=PatternType.PREFIXED),)
    topics = [
        fetch.FetchTopic(topic_id=SECRET_ID, partitions=[fetch.FetchPartition(partition=0)]),
        fetch.FetchTopic(topic_id=PUBLIC_ID, partitions=[fetch.FetchPartition(partition=0)]),
    ]
    frame = frame_of(1, 16, fetch.FetchRequest(replica_id=-1, max_wait_ms=10, topics=topics))
    screened = gate(*acls).screen("User:carol", "h", 1, 16, frame)
    assert [t.topic_id for t in forwarded_body(screened).topics] == [PUBLIC_ID]
    upstream = fetch.FetchResponse(
        responses=[
            fetch.FetchableTopicResponse(
                topic_id=PUBLIC_ID, partitions=[fetch.PartitionData(0, records=b"r")]
            )
        ]
    )
    assert screened.merge is not None
    _, merged = decode_forwarded_response(
        1, 16, screened.merge(encode_forwarded_response(1, 16, 7, upstream))
    )
    assert [(t.topic_id, t.partitions[0].error_code) for t in merged.responses] == [
        (SECRET_ID, DENIED),
        (PUBLIC_ID, 0),
    ]


def test_a_follower_fetch_needs_cluster_action() -> None:
    acls = (binding("*", "User:bob", Operation.READ),)
    frame = frame_of(
        1,
        12,
        fetch.FetchRequest(
            replica_id=1, topics=[fetch.FetchTopic(topic="pub-a", partitions=[fetch.FetchPartition()])]
        ),
    )
    body = answer_of(1, 12, gate(*acls).screen("User:bob", "h", 1, 12, frame))
    assert body.responses[0].partitions[0].error_code == DENIED


def test_list_offsets_needs_describe_implied_by_read() -> None:
    acls = (binding("pub-a", "User:bob", Operation.READ),)
    topics = [
        list_offsets.ListOffsetsTopic(name=n, partitions=[list_offsets.ListOffsetsPartition(0)])
        for n in ("pub-a", "secret")
    ]
    frame = frame_of(2, 7, list_offsets.ListOffsetsRequest(replica_id=-1, topics=topics))
    screened = gate(*acls).screen("User:bob", "h", 2, 7, frame)
    assert [t.name for t in forwarded_body(screened).topics] == ["pub-a"]


def test_metadata_all_topics_lists_only_described_ones() -> None:
    acls = (binding("pub-", "User:carol", Operation.DESCRIBE, pattern=PatternType.PREFIXED),)
    screened = gate(*acls).screen(
        "User:carol", "h", 3, 12, frame_of(3, 12, metadata.MetadataRequest(topics=None))
    )
    assert screened.frame is not None and screened.merge is not None
    upstream = metadata.MetadataResponse(
        topics=[metadata.MetadataResponseTopic(name=n) for n in ("secret", "pub-a", "pub-b")]
    )
    _, merged = decode_forwarded_response(
        3, 12, screened.merge(encode_forwarded_response(3, 12, 7, upstream))
    )
    assert [t.name for t in merged.topics] == ["pub-a", "pub-b"]


def test_metadata_named_topics_and_auto_creation() -> None:
    acls = (binding("pub-", "User:carol", Operation.DESCRIBE, pattern=PatternType.PREFIXED),)
    topics = [metadata.MetadataRequestTopic(name=n) for n in ("secret", "pub-new", "pub-a")]
    topics.append(metadata.MetadataRequestTopic(topic_id=SECRET_ID, name=None))
    frame = frame_of(3, 12, metadata.MetadataRequest(topics=topics, allow_auto_topic_creation=True))
    screened = gate(*acls).screen("User:carol", "h", 3, 12, frame)
    assert [t.name for t in forwarded_body(screened).topics] == ["pub-a"]  # pub-new would be created
    upstream = metadata.MetadataResponse(
        topics=[metadata.MetadataResponseTopic(name="pub-a", topic_id=PUBLIC_ID)]
    )
    assert screened.merge is not None
    _, merged = decode_forwarded_response(
        3, 12, screened.merge(encode_forwarded_response(3, 12, 7, upstream))
    )
    assert [(t.name, t.error_code) for t in merged.topics] == [
        ("secret", DENIED),
        ("pub-new", DENIED),
        ("pub-a", 0),
        (None, DENIED),  # the id of a topic it may not describe: no name told
    ]


def test_create_and_delete_topics() -> None:
    acls = (
        binding("pub-", "User:carol", Operation.CREATE, pattern=PatternType.PREFIXED),
        binding("pub-", "User:carol", Operation.DELETE, pattern=PatternType.PREFIXED),
    )
    authz = gate(*acls)
    create = create_topics.CreateTopicsRequest(
        topics=[
            create_topics.CreatableTopic(name=n, num_partitions=1, replication_factor=1)
            for n in ("secret2", "pub-x")
        ]
    )
    screened = authz.screen("User:carol", "h", 19, 7, frame_of(19, 7, create))
    assert [t.name for t in forwarded_body(screened).topics] == ["pub-x"]
    body = answer_of(
        20,
        6,
        authz.screen(
            "User:alice",
            "h",
            20,
            6,
            frame_of(
                20,
                6,
                delete_topics.DeleteTopicsRequest(
                    topics=[delete_topics.DeleteTopicState(name=None, topic_id=SECRET_ID)]
                ),
            ),
        ),
    )
    assert [(r.name, r.error_code) for r in body.responses] == [(None, DENIED)]
    body = answer_of(
        20,
        3,
        authz.screen(
            "User:carol",
            "h",
            20,
            3,
            frame_of(20, 3, delete_topics.DeleteTopicsRequest(topic_names=["secret"])),
        ),
    )
    assert [(r.name, r.error_code) for r in body.responses] == [("secret", DENIED)]


def test_configs_of_topics_and_brokers() -> None:
    acls = (binding("pub-a", "User:bob", Operation.DESCRIBE_CONFIGS),)
    resources = [
        describe_configs.DescribeConfigsResource(2, "pub-a"),
        describe_configs.DescribeConfigsResource(4, "1"),
    ]
    screened = gate(*acls).screen(
        "User:bob", "h", 32, 4, frame_of(32, 4, describe_configs.DescribeConfigsRequest(resources=resources))
    )
    assert [r.resource_name for r in forwarded_body(screened).resources] == ["pub-a"]
    assert screened.merge is not None
    upstream = describe_configs.DescribeConfigsResponse(
        results=[describe_configs.DescribeConfigsResult(resource_type=2, resource_name="pub-a")]
    )
    _, merged = decode_forwarded_response(
        32, 4, screened.merge(encode_forwarded_response(32, 4, 7, upstream))
    )
    assert [(r.resource_name, r.error_code) for r in merged.results] == [
        ("pub-a", 0),
        ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ]


def test_transactions_need_the_transactional_id() -> None:
    authz = gate(binding("pub-", "User:carol", Operation.WRITE, pattern=PatternType.PREFIXED))
    body = answer_of(
        22,
        4,
        authz.screen(
            "User:carol",
            "h",
            22,
            4,
            frame_of(22, 4, init_producer_id.InitProducerIdRequest(transactional_id="tx")),
        ),
    )
    assert body.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # Idempotence without a transactional id: WRITE on some topic is enough (KIP-679).
    idempotent = frame_of(22, 4, init_producer_id.InitProducerIdRequest(transactional_id=None))
    assert authz.screen("User:carol", "h", 22, 4, idempotent).frame == idempotent
    body = answer_of(22, 4, authz.screen("User:alice", "h", 22, 4, idempotent))
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    body = answer_of(
        26,
        3,
        authz.screen("User:carol", "h", 26, 3, frame_of(26, 3, end_txn.EndTxnRequest(transactional_id="tx"))),
    )
    assert body.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_add_offsets_to_txn_needs_the_transactional_id_then_the_group() -> None:
    authz = gate(
        binding("tx", "User:carol", Operation.WRITE, resource=ResourceType.TRANSACTIONAL_ID),
        binding("tx", "User:dave", Operation.WRITE, resource=ResourceType.TRANSACTIONAL_ID),
        binding("g", "User:dave", Operation.READ, resource=ResourceType.GROUP),
        binding("g", "User:erin", Operation.READ, resource=ResourceType.GROUP),
    )
    for version in (0, 3, 4):
        frame = frame_of(
            25,
            version,
            add_offsets_to_txn.AddOffsetsToTxnRequest(
                transactional_id="tx", producer_id=5, producer_epoch=0, group_id="g"
            ),
        )
        refused = answer_of(25, version, authz.screen("User:erin", "h", 25, version, frame))
        assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        refused = answer_of(25, version, authz.screen("User:carol", "h", 25, version, frame))
        assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert authz.screen("User:dave", "h", 25, version, frame).frame == frame


def test_a_version_without_a_codec_is_refused_never_forwarded() -> None:
    screened = gate().screen("User:admin", "h", 23, 1, b"\x00\x17\x00\x01\x00\x00\x00\x07\x00\x00")
    assert screened.refuse is not None and screened.frame is None
    assert (
        gate().screen("User:admin", "h", 57, 0, b"\x00\x39\x00\x00\x00\x00\x00\x07\x00\x00").refuse
        is not None
    )


def test_a_cached_decision_follows_an_acl_change() -> None:
    authz = gate()
    frame = produce_request("pub-a")
    assert authz.screen("User:bob", "h", 0, 9, frame).answer is not None
    authz.authorizer.add(binding("pub-a", "User:bob", Operation.WRITE))
    assert authz.screen("User:bob", "h", 0, 9, frame).frame == frame


_NAMES = ["a", "b", "c", "d", "e"]


@settings(max_examples=60, deadline=None)
@given(
    requested=st.lists(st.sampled_from(_NAMES), min_size=1, max_size=5, unique=True),
    allowed=st.sets(st.sampled_from(_NAMES)),
    denied=st.sets(st.sampled_from(_NAMES)),
)
def test_forwarded_and_refused_parts_follow_the_acls(
    requested: list[str], allowed: set[str], denied: set[str]
) -> None:
    acls = [binding(n, "User:u", Operation.WRITE) for n in allowed]
    acls += [binding(n, "User:u", Operation.ALL, permission=Permission.DENY) for n in denied]
    may = [n for n in requested if n in allowed and n not in denied]
    screened = gate(*acls).screen("User:u", "h", 0, 9, produce_request(*requested))
    if not may:
        body = answer_of(0, 9, screened)
    elif len(may) == len(requested):
        assert screened.merge is None and screened.frame == produce_request(*requested)
        return
    else:
        assert [t.name for t in forwarded_body(screened).topic_data] == may
        assert screened.merge is not None
        _, body = decode_forwarded_response(0, 9, screened.merge(produce_answer(9, *reversed(may))))
    assert [t.name for t in body.responses] == requested
    assert [t.partition_responses[0].error_code for t in body.responses] == [
        0 if n in may else DENIED for n in requested
    ]


# ---- every API: a principal without ACLs gets its authorization error, a super user is forwarded ----
def _sample_requests() -> dict[tuple[int, int], Any]:
    from protocol.messages import (
        add_partitions_to_txn,
        alter_configs,
        create_partitions,
        delete_records,
        describe_producers,
        describe_transactions,
        find_coordinator,
        incremental_alter_configs,
        offset_for_leader_epoch,
    )

    return {
        (0, 9): produce.ProduceRequest(
            acks=-1,
            topic_data=[
                produce.TopicProduceData("secret", partition_data=[produce.PartitionProduceData(0, b"x")])
            ],
        ),
        (1, 12): fetch.FetchRequest(
            topics=[fetch.FetchTopic(topic="secret", partitions=[fetch.FetchPartition(0)])]
        ),
        (2, 7): list_offsets.ListOffsetsRequest(
            topics=[list_offsets.ListOffsetsTopic("secret", [list_offsets.ListOffsetsPartition(0)])]
        ),
        (10, 3): find_coordinator.FindCoordinatorRequest(key="tx", key_type=1),
        (10, 6): find_coordinator.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]),
        (19, 7): create_topics.CreateTopicsRequest(topics=[create_topics.CreatableTopic("secret", 1, 1)]),
        (20, 6): delete_topics.DeleteTopicsRequest(topics=[delete_topics.DeleteTopicState(name="secret")]),
        (21, 2): delete_records.DeleteRecordsRequest(
            topics=[
                delete_records.DeleteRecordsTopic("secret", [delete_records.DeleteRecordsPartition(0, 1)])
            ]
        ),
        (22, 4): init_producer_id.InitProducerIdRequest(transactional_id="tx"),
        (23, 4): offset_for_leader_epoch.OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[
                offset_for_leader_epoch.OffsetForLeaderTopic(
                    "secret", [offset_for_leader_epoch.OffsetForLeaderPartition(0)]
                )
            ],
        ),
        (24, 3): add_partitions_to_txn.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_topics=[add_partitions_to_txn.AddPartitionsToTxnTopic("secret", [0])],
        ),
        (24, 5): add_partitions_to_txn.AddPartitionsToTxnRequest(
            transactions=[add_partitions_to_txn.AddPartitionsToTxnTransaction("tx", 1, 0, True, [])]
        ),
        (25, 3): add_offsets_to_txn.AddOffsetsToTxnRequest(transactional_id="tx", group_id="g"),
        (26, 3): end_txn.EndTxnRequest(transactional_id="tx"),
        (32, 4): describe_configs.DescribeConfigsRequest(
            [describe_configs.DescribeConfigsResource(2, "secret")]
        ),
        (33, 2): alter_configs.AlterConfigsRequest([alter_configs.AlterConfigsResource(4, "1", [])]),
        (37, 3): create_partitions.CreatePartitionsRequest(
            [create_partitions.CreatePartitionsTopic("secret", 2, None)]
        ),
        (44, 1): incremental_alter_configs.IncrementalAlterConfigsRequest(
            [incremental_alter_configs.AlterConfigsResource(2, "secret", [])]
        ),
        (61, 0): describe_producers.DescribeProducersRequest(
            [describe_producers.TopicRequest("secret", [0])]
        ),
        (65, 0): describe_transactions.DescribeTransactionsRequest(["tx"]),
        (74, 1): list_config_resources.ListConfigResourcesRequest([2]),
    }


def _error_codes(value: Any) -> set[int]:
    """Every error code anywhere in a response body."""
    found: set[int] = set()
    if isinstance(value, list):
        for item in value:
            found |= _error_codes(item)
    elif hasattr(value, "__slots__"):
        for name in value.__slots__:
            item = getattr(value, name)
            if name.endswith("error_code") and isinstance(item, int):
                found.add(item)
            else:
                found |= _error_codes(item)
    return found


AUTHZ_ERRORS = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def test_every_rule_refuses_a_principal_without_acls_and_forwards_a_super_user() -> None:
    from coordinator.gateway.versions import FORWARDED_MAX

    samples = _sample_requests()
    assert {key for key, _ in samples} | {3, 60, 66} == set(RULES)
    assert set(FORWARDED_MAX) | {10} == set(RULES)  # every forwarded API has its rule
    authz = gate()
    for (api_key, version), body in samples.items():
        frame = frame_of(api_key, version, body)
        assert authz.screen("User:admin", "h", api_key, version, frame).frame == frame, api_key
        codes = _error_codes(
            answer_of(api_key, version, authz.screen("User:alice", "h", api_key, version, frame))
        )
        assert codes and codes <= AUTHZ_ERRORS | {ErrorCode.OPERATION_NOT_ATTEMPTED, 0}, (api_key, codes)
        assert codes & AUTHZ_ERRORS, (api_key, codes)


def test_list_transactions_and_describe_cluster_answers_follow_the_principal() -> None:
    from protocol.messages import describe_cluster, list_transactions

    authz = gate(
        binding(
            "tx-",
            "User:bob",
            Operation.DESCRIBE,
            resource=ResourceType.TRANSACTIONAL_ID,
            pattern=PatternType.PREFIXED,
        )
    )
    screened = authz.screen(
        "User:bob", "h", 66, 1, frame_of(66, 1, list_transactions.ListTransactionsRequest())
    )
    assert screened.merge is not None
    states = [list_transactions.TransactionState(transactional_id=i) for i in ("tx-1", "other", "tx-2")]
    upstream = encode_forwarded_response(
        66, 1, 7, list_transactions.ListTransactionsResponse(transaction_states=states)
    )
    _, merged = decode_forwarded_response(66, 1, screened.merge(upstream))
    assert [s.transactional_id for s in merged.transaction_states] == ["tx-1", "tx-2"]
    request = describe_cluster.DescribeClusterRequest(include_cluster_authorized_operations=True)
    screened = authz.screen("User:bob", "h", 60, 1, frame_of(60, 1, request))
    assert screened.merge is not None
    upstream = encode_forwarded_response(
        60, 1, 7, describe_cluster.DescribeClusterResponse(cluster_authorized_operations=0x7FFFFFFF)
    )
    _, merged = decode_forwarded_response(60, 1, screened.merge(upstream))
    assert merged.cluster_authorized_operations == 0  # nothing on the cluster, whatever upstream says


@settings(max_examples=80, deadline=None)
@given(
    version=st.integers(3, 13),
    transactional_id=st.one_of(st.none(), st.text(max_size=8)),
    topics=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=12),
            st.binary(min_size=16, max_size=16),
            st.lists(st.binary(max_size=40), max_size=3),
        ),
        max_size=4,
    ),
)
def test_the_produce_preview_reads_what_the_decoder_reads(
    version: int, transactional_id: str | None, topics: list[tuple[str, bytes, list[bytes]]]
) -> None:
    from protocol.gateway_wire import produce_topics, request_header_end

    data = [
        produce.TopicProduceData(
            name if version < 13 else "",
            topic_id if version >= 13 else bytes(16),
            [produce.PartitionProduceData(i, batch) for i, batch in enumerate(batches)],
        )
        for name, topic_id, batches in topics
    ]
    frame = frame_of(0, version, produce.ProduceRequest(transactional_id, -1, 1000, data))
    seen_id, seen = produce_topics(frame, request_header_end(frame), version)
    header_end, decoded = decode_forwarded(frame)
    assert request_header_end(frame) == header_end
    assert seen_id == decoded.transactional_id
    assert seen == [(t.name, t.topic_id) for t in decoded.topic_data]


@settings(max_examples=80, deadline=None)
@given(
    version=st.integers(0, 18),
    replica_id=st.sampled_from([-1, -1, 2]),
    topics=st.lists(
        st.tuples(st.text(min_size=1, max_size=12), st.binary(min_size=16, max_size=16), st.integers(0, 3)),
        max_size=4,
    ),
    forgotten=st.lists(
        st.tuples(st.text(min_size=1, max_size=5), st.lists(st.integers(0, 9), max_size=3)), max_size=2
    ),
)
def test_the_fetch_preview_reads_what_the_decoder_reads(
    version: int,
    replica_id: int,
    topics: list[tuple[str, bytes, int]],
    forgotten: list[tuple[str, list[int]]],
) -> None:
    from protocol.gateway_wire import fetch_topics, request_header_end

    by_id = version >= 13
    request = fetch.FetchRequest(
        replica_id=replica_id if version < 15 else -1,
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=1 << 20 if version >= 3 else 0x7FFFFFFF,
        topics=[
            fetch.FetchTopic(
                "" if by_id else name,
                topic_id if by_id else bytes(16),
                [
                    fetch.FetchPartition(partition=p, fetch_offset=5, partition_max_bytes=100)
                    for p in range(count)
                ],
            )
            for name, topic_id, count in topics
        ],
    )
    if version >= 15 and replica_id >= 0:
        request.replica_state = fetch.ReplicaState(replica_id=replica_id, replica_epoch=1)
    if version >= 7:
        request.forgotten_topics_data = [
            fetch.ForgottenTopic("" if by_id else name, bytes(16), partitions)
            for name, partitions in forgotten
        ]
    if version >= 11:
        request.rack_id = "rack"
    frame = frame_of(1, version, request)
    seen = fetch_topics(frame, request_header_end(frame), version)
    if replica_id >= 0:
        assert seen is None  # a follower: decided by the full rule
        return
    decoded = decode_forwarded(frame)[1]
    assert seen == [(t.topic, t.topic_id) for t in decoded.topics]


def test_list_config_resources_needs_describe_configs_on_the_cluster() -> None:
    """As Kafka's KafkaApis: the whole request is CLUSTER_AUTHORIZATION_FAILED without it."""
    frame = frame_of(74, 1, list_config_resources.ListConfigResourcesRequest([2]))
    allowed = binding("kafka-cluster", "User:bob", Operation.DESCRIBE_CONFIGS, resource=ResourceType.CLUSTER)
    assert gate(allowed).screen("User:bob", "h", 74, 1, frame).frame == frame
    refused = answer_of(74, 1, gate(allowed).screen("User:carol", "h", 74, 1, frame))
    assert refused == list_config_resources.ListConfigResourcesResponse(
        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
