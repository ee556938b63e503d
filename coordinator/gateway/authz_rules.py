"""Kafka's authorization rules per forwarded API (KafkaApis' checks), for authorization.py.

* Produce: WRITE on the transactional id when there is one (else every partition 53), WRITE on
  each topic (else 29 per partition). acks=0 with a refused part closes the connection, as Kafka does.
* Fetch: a follower (replica id >= 0) needs CLUSTER_ACTION, a consumer READ on each topic (29).
* ListOffsets, OffsetForLeaderEpoch: DESCRIBE on each topic (OffsetForLeaderEpoch: or
  CLUSTER_ACTION on the cluster). DeleteRecords: DELETE. DescribeProducers: READ.
* Metadata: DESCRIBE per topic; an all-topics request leaves out what the principal may not
  describe; a topic that would be auto-created needs CREATE on the cluster or the topic.
* CreateTopics: CREATE on the cluster or topic (configs shown only with DESCRIBE_CONFIGS);
  DeleteTopics: DESCRIBE and DELETE; CreatePartitions: ALTER.
* DescribeConfigs/AlterConfigs/IncrementalAlterConfigs: DESCRIBE_CONFIGS/ALTER_CONFIGS on the
  topic (29) or, for broker, broker-logger and client-metrics resources, the cluster (31).
  ListConfigResources: DESCRIBE_CONFIGS on the cluster (31 for the whole request).
* InitProducerId: WRITE on the transactional id (53), or without one IDEMPOTENT_WRITE on the
  cluster or WRITE on some topic (31). AddPartitionsToTxn: WRITE on the transactional id and
  topics (v4+, brokers only: CLUSTER_ACTION). AddOffsetsToTxn: WRITE on the transactional id (53),
  then READ on the group (30). EndTxn: WRITE on the transactional id.
* FindCoordinator (transactions), DescribeTransactions: DESCRIBE on the transactional id;
  ListTransactions shows only those; DescribeCluster/Metadata authorized operations are computed
  for the client's principal.

Topic ids: an id the gateway does not know is answered UNKNOWN_TOPIC_ID here (never forwarded);
a known topic the principal may not describe is answered with its id and no name.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Final

from coordinator.gateway.authorization import FORWARD, Access, Decision, Preview, Rule
from coordinator.security.acl import Operation, ResourceType
from protocol.errors import ErrorCode
from protocol.gateway_wire import fetch_topics, produce_topics
from protocol.messages import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_configs,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    init_producer_id,
    list_config_resources,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    produce,
)

TOPIC_DENIED: Final = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
CLUSTER_DENIED: Final = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED: Final = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
GROUP_DENIED: Final = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
UNKNOWN_TOPIC_ID: Final = int(ErrorCode.UNKNOWN_TOPIC_ID)
NOT_ATTEMPTED: Final = int(ErrorCode.OPERATION_NOT_ATTEMPTED)
DENIED_MESSAGE: Final = "Authorization failed."
ZERO_UUID: Final = bytes(16)
UNSET_OPERATIONS: Final = -2147483648
# Config resource types (DescribeConfigs and the alter APIs).
TOPIC_RESOURCE: Final = 2
CLUSTER_RESOURCES: Final = frozenset({4, 8, 16})  # BROKER, BROKER_LOGGER, CLIENT_METRICS

Refusal = Callable[[Any, int], Any]  # (request entry, error code) -> response entry


def _in_order(
    keys: list[Hashable], refused: dict[int, Any], upstream: list[Any], key_of: Callable[[Any], Hashable]
) -> list[Any]:
    """Upstream's entries and the refusals, in the order of the request's entries."""
    by_key: dict[Hashable, list[Any]] = {}
    for entry in upstream:
        by_key.setdefault(key_of(entry), []).append(entry)
    merged: list[Any] = []
    for index, key in enumerate(keys):
        if index in refused:
            merged.append(refused[index])
        else:
            merged.extend(by_key.pop(key, ()))
    for rest in by_key.values():
        merged.extend(rest)
    return merged


def _split(
    access: Access,
    body: Any,
    request_field: str,
    request_key: Callable[[Any], Hashable],
    decide: Callable[[Any], int],
    refusal: Refusal,
    response_field: str,
    response_key: Callable[[Any], Hashable],
    response: Callable[[list[Any]], Any],
) -> Decision:
    """The per-entry pattern of Kafka's handlers: ``decide`` gives 0 (allowed) or the error code
    of an entry; refused entries are answered here, the rest forwarded, the answers merged."""
    entries = getattr(body, request_field)
    refused: dict[int, Any] = {}
    kept: list[Any] = []
    for index, entry in enumerate(entries):
        code = decide(entry)
        if code:
            refused[index] = refusal(entry, code)
        else:
            kept.append(entry)
    if not refused:
        return FORWARD
    if not kept:
        return Decision(answer=response([refused[i] for i in range(len(entries))]))
    keys = [request_key(entry) for entry in entries]
    setattr(body, request_field, kept)

    def merge(answer: Any) -> None:
        setattr(
            answer, response_field, _in_order(keys, refused, getattr(answer, response_field), response_key)
        )

    return Decision(request=body, merge=merge)


def _topic_check(access: Access, operation: int) -> Callable[[str | None, bytes], int]:
    """0 or the error of a topic named or identified in a request."""

    def check(name: str | None, topic_id: bytes) -> int:
        if not name:
            if topic_id == ZERO_UUID:
                return 0 if name is not None and access.topic(operation, name) else TOPIC_DENIED
            name = access.topic_name(topic_id)
            if name is None:
                return UNKNOWN_TOPIC_ID
        return 0 if access.topic(operation, name) else TOPIC_DENIED

    return check


# ---- data plane ------------------------------------------------------------------------------
def produce_rule(access: Access, version: int, body: Any) -> Decision:
    def refusal(topic: Any, code: int) -> Any:
        partitions = [
            produce.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in topic.partition_data
        ]
        return produce.TopicProduceResponse(
            name=topic.name, topic_id=topic.topic_id, partition_responses=partitions
        )

    def topic_key(topic: Any) -> Hashable:
        return (topic.name, topic.topic_id)

    if body.transactional_id is not None and not access.transactional_id(
        Operation.WRITE, body.transactional_id
    ):
        decision = Decision(answer=produce.ProduceResponse([refusal(t, TXN_DENIED) for t in body.topic_data]))
    else:
        check = _topic_check(access, Operation.WRITE)
        decision = _split(
            access, body, "topic_data", topic_key, lambda t: check(t.name, t.topic_id), refusal,
            "responses", topic_key, lambda entries: produce.ProduceResponse(entries),
        )  # fmt: skip
    if body.acks == 0 and decision is not FORWARD:
        return Decision(refuse="a Produce with acks=0 was refused in part (Kafka closes the connection)")
    return decision


def produce_preview(access: Access, version: int, frame: bytes, body_at: int) -> bool:
    """Produce carries megabytes of records: their names are read without decoding them."""
    transactional_id, topics = produce_topics(frame, body_at, version)
    if transactional_id is not None and not access.allowed(
        Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id, log_denied=False
    ):
        return False
    return _all_topics(access, Operation.WRITE, topics)


def fetch_preview(access: Access, version: int, frame: bytes, body_at: int) -> bool:
    """A consumer's Fetch comes every few hundred milliseconds: its topics are read without
    building the request's objects."""
    topics = fetch_topics(frame, body_at, version)
    return topics is not None and _all_topics(access, Operation.READ, topics)


def _all_topics(access: Access, operation: int, topics: list[tuple[str, bytes]]) -> bool:
    for name, topic_id in topics:
        if not name:
            found = access.topic_name(topic_id) if topic_id != ZERO_UUID else None
            if found is None:
                return False
            name = found
        if not access.topic(operation, name, log_denied=False):
            return False
    return True


def fetch_rule(access: Access, version: int, body: Any) -> Decision:
    replica = body.replica_state.replica_id if version >= 15 else body.replica_id
    if replica >= 0:
        follower_allowed = access.cluster(Operation.CLUSTER_ACTION)
        check: Callable[[Any], int] = lambda t: 0 if follower_allowed else TOPIC_DENIED  # noqa: E731
    else:
        topic_check = _topic_check(access, Operation.READ)
        check = lambda t: topic_check(t.topic, t.topic_id)  # noqa: E731

    def refusal(topic: Any, code: int) -> Any:
        partitions = [
            fetch.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1, records=None)
            for p in topic.partitions
        ]
        return fetch.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id, partitions=partitions)

    def topic_key(topic: Any) -> Hashable:
        return (topic.topic, topic.topic_id)

    return _split(
        access, body, "topics", topic_key, check, refusal, "responses", topic_key,
        lambda entries: fetch.FetchResponse(responses=entries),
    )  # fmt: skip


def list_offsets_rule(access: Access, version: int, body: Any) -> Decision:
    check = _topic_check(access, Operation.DESCRIBE)

    def refusal(topic: Any, code: int) -> Any:
        partitions = [
            list_offsets.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1
            )
            for p in topic.partitions
        ]
        return list_offsets.ListOffsetsTopicResponse(name=topic.name, partitions=partitions)

    return _split(
        access, body, "topics", lambda t: t.name, lambda t: check(t.name, ZERO_UUID), refusal,
        "topics", lambda t: t.name, lambda entries: list_offsets.ListOffsetsResponse(topics=entries),
    )  # fmt: skip


def offset_for_leader_epoch_rule(access: Access, version: int, body: Any) -> Decision:
    if access.cluster(Operation.CLUSTER_ACTION, log_denied=False):
        return FORWARD
    check = _topic_check(access, Operation.DESCRIBE)

    def refusal(topic: Any, code: int) -> Any:
        partitions = [
            offset_for_leader_epoch.EpochEndOffset(error_code=code, partition=p.partition, end_offset=-1)
            for p in topic.partitions
        ]
        return offset_for_leader_epoch.OffsetForLeaderTopicResult(topic=topic.topic, partitions=partitions)

    return _split(
        access, body, "topics", lambda t: t.topic, lambda t: check(t.topic, ZERO_UUID), refusal,
        "topics", lambda t: t.topic,
        lambda entries: offset_for_leader_epoch.OffsetForLeaderEpochResponse(topics=entries),
    )  # fmt: skip


def delete_records_rule(access: Access, version: int, body: Any) -> Decision:
    check = _topic_check(access, Operation.DELETE)

    def refusal(topic: Any, code: int) -> Any:
        partitions = [
            delete_records.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=code
            )
            for p in topic.partitions
        ]
        return delete_records.DeleteRecordsTopicResult(name=topic.name, partitions=partitions)

    return _split(
        access, body, "topics", lambda t: t.name, lambda t: check(t.name, ZERO_UUID), refusal,
        "topics", lambda t: t.name, lambda entries: delete_records.DeleteRecordsResponse(topics=entries),
    )  # fmt: skip


def describe_producers_rule(access: Access, version: int, body: Any) -> Decision:
    check = _topic_check(access, Operation.READ)

    def refusal(topic: Any, code: int) -> Any:
        partitions = [
            describe_producers.PartitionResponse(partition_index=i, error_code=code, error_message=None)
            for i in topic.partition_indexes
        ]
        return describe_producers.TopicResponse(name=topic.name, partitions=partitions)

    return _split(
        access, body, "topics", lambda t: t.name, lambda t: check(t.name, ZERO_UUID), refusal,
        "topics", lambda t: t.name, lambda entries: describe_producers.DescribeProducersResponse(topics=entries),
    )  # fmt: skip


# ---- metadata --------------------------------------------------------------------------------
def metadata_rule(access: Access, version: int, body: Any) -> Decision:
    topic_ops = version >= 8 and body.include_topic_authorized_operations
    cluster_ops = 8 <= version <= 10 and body.include_cluster_authorized_operations

    def operations(answer: Any) -> None:
        if cluster_ops:
            answer.cluster_authorized_operations = access.operations(ResourceType.CLUSTER, "kafka-cluster")
        if topic_ops:
            for topic in answer.topics:
                if topic.name and topic.error_code == 0:
                    topic.topic_authorized_operations = access.operations(ResourceType.TOPIC, topic.name)

    requested = body.topics
    if requested is None or (version == 0 and not requested):

        def described_only(answer: Any) -> None:
            answer.topics = [
                t
                for t in answer.topics
                if t.name is None or access.topic(Operation.DESCRIBE, t.name, log_denied=False)
            ]
            operations(answer)

        return Decision(merge=described_only)
    auto_create = body.allow_auto_topic_creation or version < 4
    refused: dict[int, Any] = {}
    kept: list[Any] = []
    for index, topic in enumerate(requested):
        name = topic.name
        if name is None:
            name = access.topic_name(topic.topic_id)
            if name is None:
                refused[index] = metadata.MetadataResponseTopic(
                    error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=topic.topic_id
                )
            elif not access.topic(Operation.DESCRIBE, name):
                refused[index] = metadata.MetadataResponseTopic(
                    error_code=TOPIC_DENIED, name=None, topic_id=topic.topic_id
                )
            else:
                kept.append(topic)
            continue
        allowed = access.topic(Operation.DESCRIBE, name)
        if allowed and auto_create and access.catalog.partitions_of(name) is None:
            allowed = access.may_create(name)
        if allowed:
            kept.append(topic)
        else:
            refused[index] = metadata.MetadataResponseTopic(error_code=TOPIC_DENIED, name=name)
    if not refused:
        return Decision(merge=operations) if topic_ops or cluster_ops else FORWARD
    keys: list[Hashable] = [(t.name, t.topic_id) if t.name is None else t.name for t in requested]
    # Nothing left: an empty list still asks upstream for the brokers (v0: it would mean "all
    # topics", whose answer is replaced by the refusals alone).
    body.topics = kept

    def merge(answer: Any) -> None:
        upstream = [] if not kept else answer.topics
        answer.topics = _in_order(
            keys, refused, upstream, lambda t: t.name if t.name in names else (None, t.topic_id)
        )
        operations(answer)

    names = {t.name for t in kept if t.name is not None}
    return Decision(request=body, merge=merge)


def describe_cluster_rule(access: Access, version: int, body: Any) -> Decision:
    if not body.include_cluster_authorized_operations:
        return FORWARD

    def operations(answer: Any) -> None:
        answer.cluster_authorized_operations = access.operations(ResourceType.CLUSTER, "kafka-cluster")

    return Decision(merge=operations)


# ---- topics ----------------------------------------------------------------------------------
def create_topics_rule(access: Access, version: int, body: Any) -> Decision:
    def refusal(topic: Any, code: int) -> Any:
        return create_topics.CreatableTopicResult(
            name=topic.name, error_code=code, error_message=DENIED_MESSAGE, configs=None
        )

    decision = _split(
        access, body, "topics", lambda t: t.name, lambda t: 0 if access.may_create(t.name) else TOPIC_DENIED,
        refusal, "topics", lambda t: t.name, lambda entries: create_topics.CreateTopicsResponse(topics=entries),
    )  # fmt: skip
    if version < 5 or decision.answer is not None:
        return decision
    merged = decision.merge

    def hide_configs(answer: Any) -> None:
        if merged is not None:
            merged(answer)
        for topic in answer.topics:
            if topic.error_code == 0 and not access.topic(
                Operation.DESCRIBE_CONFIGS, topic.name, log_denied=False
            ):
                topic.topic_config_error_code = TOPIC_DENIED
                topic.configs = None
                topic.num_partitions = topic.replication_factor = -1

    return Decision(request=decision.request, merge=hide_configs)


def delete_topics_rule(access: Access, version: int, body: Any) -> Decision:
    def decide_name(name: str) -> int:
        if not access.topic(Operation.DESCRIBE, name):
            return TOPIC_DENIED
        return 0 if access.topic(Operation.DELETE, name) else TOPIC_DENIED

    if version < 6:
        return _split(
            access, body, "topic_names", lambda n: n, decide_name,
            lambda n, code: delete_topics.DeletableTopicResult(name=n, error_code=code, error_message=DENIED_MESSAGE),
            "responses", lambda r: r.name, lambda entries: delete_topics.DeleteTopicsResponse(responses=entries),
        )  # fmt: skip
    hidden: set[int] = set()

    def decide(topic: Any) -> int:
        if topic.name is not None:
            return decide_name(topic.name)
        name = access.topic_name(topic.topic_id)
        if name is None:
            return UNKNOWN_TOPIC_ID
        if not access.topic(Operation.DESCRIBE, name):
            hidden.add(id(topic))  # its name is not told
            return TOPIC_DENIED
        return 0 if access.topic(Operation.DELETE, name) else TOPIC_DENIED

    def refusal(topic: Any, code: int) -> Any:
        name = None if id(topic) in hidden or topic.name is None else topic.name
        if code == TOPIC_DENIED and topic.name is None and id(topic) not in hidden:
            name = access.topic_name(topic.topic_id)
        message = DENIED_MESSAGE if code == TOPIC_DENIED else None
        return delete_topics.DeletableTopicResult(
            name=name, topic_id=topic.topic_id, error_code=code, error_message=message
        )

    requested_ids = {t.topic_id for t in body.topics if t.name is None}

    def key(entry: Any) -> Hashable:
        topic_id: bytes = entry.topic_id
        return topic_id if topic_id in requested_ids else entry.name

    return _split(
        access, body, "topics", key, decide, refusal, "responses", key,
        lambda entries: delete_topics.DeleteTopicsResponse(responses=entries),
    )  # fmt: skip


def create_partitions_rule(access: Access, version: int, body: Any) -> Decision:
    return _split(
        access, body, "topics", lambda t: t.name,
        lambda t: 0 if access.topic(Operation.ALTER, t.name) else TOPIC_DENIED,
        lambda t, code: create_partitions.CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=DENIED_MESSAGE
        ),
        "results", lambda r: r.name, lambda entries: create_partitions.CreatePartitionsResponse(results=entries),
    )  # fmt: skip


# ---- configs ---------------------------------------------------------------------------------
def _config_check(access: Access, operation: int) -> Callable[[Any], int]:
    def check(resource: Any) -> int:
        if resource.resource_type == TOPIC_RESOURCE:
            return 0 if access.topic(operation, resource.resource_name) else TOPIC_DENIED
        if resource.resource_type in CLUSTER_RESOURCES:
            return 0 if access.cluster(operation) else CLUSTER_DENIED
        return int(ErrorCode.INVALID_REQUEST)

    return check


def _resource_key(resource: Any) -> Hashable:
    return (resource.resource_type, resource.resource_name)


def _config_message(code: int) -> str:
    return DENIED_MESSAGE if code != ErrorCode.INVALID_REQUEST else "Unexpected resource type"


def describe_configs_rule(access: Access, version: int, body: Any) -> Decision:
    return _split(
        access, body, "resources", _resource_key, _config_check(access, Operation.DESCRIBE_CONFIGS),
        lambda r, code: describe_configs.DescribeConfigsResult(
            error_code=code, error_message=_config_message(code), resource_type=r.resource_type,
            resource_name=r.resource_name, configs=[],
        ),
        "results", _resource_key, lambda entries: describe_configs.DescribeConfigsResponse(results=entries),
    )  # fmt: skip


def alter_configs_rule(access: Access, version: int, body: Any) -> Decision:
    return _split(
        access, body, "resources", _resource_key, _config_check(access, Operation.ALTER_CONFIGS),
        lambda r, code: alter_configs.AlterConfigsResourceResponse(
            error_code=code, error_message=_config_message(code), resource_type=r.resource_type,
            resource_name=r.resource_name,
        ),
        "responses", _resource_key, lambda entries: alter_configs.AlterConfigsResponse(responses=entries),
    )  # fmt: skip


def incremental_alter_configs_rule(access: Access, version: int, body: Any) -> Decision:
    return _split(
        access, body, "resources", _resource_key, _config_check(access, Operation.ALTER_CONFIGS),
        lambda r, code: incremental_alter_configs.AlterConfigsResourceResponse(
            error_code=code, error_message=_config_message(code), resource_type=r.resource_type,
            resource_name=r.resource_name,
        ),
        "responses", _resource_key,
        lambda entries: incremental_alter_configs.IncrementalAlterConfigsResponse(responses=entries),
    )  # fmt: skip


def list_config_resources_rule(access: Access, version: int, body: Any) -> Decision:
    if access.cluster(Operation.DESCRIBE_CONFIGS):
        return FORWARD
    return Decision(answer=list_config_resources.ListConfigResourcesResponse(error_code=CLUSTER_DENIED))


# ---- transactions ----------------------------------------------------------------------------
def init_producer_id_rule(access: Access, version: int, body: Any) -> Decision:
    if body.transactional_id is not None:
        if access.transactional_id(Operation.WRITE, body.transactional_id):
            return FORWARD
        code = TXN_DENIED
    elif access.cluster(Operation.IDEMPOTENT_WRITE, log_denied=False) or access.may_write_some_topic():
        return FORWARD
    else:
        code = CLUSTER_DENIED
    return Decision(
        answer=init_producer_id.InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
    )


def add_partitions_to_txn_rule(access: Access, version: int, body: Any) -> Decision:
    if version >= 4:  # the brokers' batched verification
        if access.cluster(Operation.CLUSTER_ACTION):
            return FORWARD
        return Decision(answer=add_partitions_to_txn.AddPartitionsToTxnResponse(error_code=CLUSTER_DENIED))
    topics = body.v3_and_below_topics
    if not access.transactional_id(Operation.WRITE, body.v3_and_below_transactional_id):
        codes = {t.name: TXN_DENIED for t in topics}
    else:
        codes = {t.name: 0 if access.topic(Operation.WRITE, t.name) else TOPIC_DENIED for t in topics}
        if not any(codes.values()):
            return FORWARD
        codes = {name: code or NOT_ATTEMPTED for name, code in codes.items()}
    results = [
        add_partitions_to_txn.AddPartitionsToTxnTopicResult(
            name=t.name,
            results_by_partition=[
                add_partitions_to_txn.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=codes[t.name])
                for p in t.partitions
            ],
        )
        for t in topics
    ]  # fmt: skip
    return Decision(
        answer=add_partitions_to_txn.AddPartitionsToTxnResponse(results_by_topic_v3_and_below=results)
    )


def add_offsets_to_txn_rule(access: Access, version: int, body: Any) -> Decision:
    if not access.transactional_id(Operation.WRITE, body.transactional_id):
        code = TXN_DENIED
    elif not access.allowed(Operation.READ, ResourceType.GROUP, body.group_id):
        code = GROUP_DENIED
    else:
        return FORWARD
    return Decision(answer=add_offsets_to_txn.AddOffsetsToTxnResponse(error_code=code))


def end_txn_rule(access: Access, version: int, body: Any) -> Decision:
    if access.transactional_id(Operation.WRITE, body.transactional_id):
        return FORWARD
    return Decision(answer=end_txn.EndTxnResponse(error_code=TXN_DENIED, producer_id=-1, producer_epoch=-1))


def find_coordinator_rule(access: Access, version: int, body: Any) -> Decision:
    """Transaction coordinators only (groups are served here)."""
    if version < 4:
        if access.transactional_id(Operation.DESCRIBE, body.key):
            return FORWARD
        return Decision(
            answer=find_coordinator.FindCoordinatorResponse(
                error_code=TXN_DENIED, error_message=DENIED_MESSAGE, node_id=-1, host="", port=-1
            )
        )
    return _split(
        access, body, "coordinator_keys", lambda k: k,
        lambda k: 0 if access.transactional_id(Operation.DESCRIBE, k) else TXN_DENIED,
        lambda k, code: find_coordinator.Coordinator(
            key=k, node_id=-1, host="", port=-1, error_code=code, error_message=DENIED_MESSAGE
        ),
        "coordinators", lambda c: c.key, lambda entries: find_coordinator.FindCoordinatorResponse(coordinators=entries),
    )  # fmt: skip


def describe_transactions_rule(access: Access, version: int, body: Any) -> Decision:
    def described_topics_only(answer: Any) -> None:
        for state in answer.transaction_states:
            state.topics = [
                t for t in state.topics if access.topic(Operation.DESCRIBE, t.topic, log_denied=False)
            ]

    decision = _split(
        access, body, "transactional_ids", lambda i: i,
        lambda i: 0 if access.transactional_id(Operation.DESCRIBE, i) else TXN_DENIED,
        lambda i, code: describe_transactions.TransactionState(error_code=code, transactional_id=i),
        "transaction_states", lambda s: s.transactional_id,
        lambda entries: describe_transactions.DescribeTransactionsResponse(transaction_states=entries),
    )  # fmt: skip
    if decision.answer is not None:
        return decision
    merged = decision.merge

    def merge(answer: Any) -> None:
        if merged is not None:
            merged(answer)
        described_topics_only(answer)

    return Decision(request=decision.request, merge=merge)


def list_transactions_rule(access: Access, version: int, body: Any) -> Decision:
    def describable_only(answer: Any) -> None:
        answer.transaction_states = [
            s
            for s in answer.transaction_states
            if access.allowed(
                Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id, log_denied=False
            )
        ]

    return Decision(merge=describable_only)


RULES: Final[dict[int, Rule]] = {
    0: produce_rule,
    1: fetch_rule,
    2: list_offsets_rule,
    3: metadata_rule,
    10: find_coordinator_rule,
    19: create_topics_rule,
    20: delete_topics_rule,
    21: delete_records_rule,
    22: init_producer_id_rule,
    23: offset_for_leader_epoch_rule,
    24: add_partitions_to_txn_rule,
    25: add_offsets_to_txn_rule,
    26: end_txn_rule,
    32: describe_configs_rule,
    33: alter_configs_rule,
    37: create_partitions_rule,
    44: incremental_alter_configs_rule,
    60: describe_cluster_rule,
    61: describe_producers_rule,
    65: describe_transactions_rule,
    66: list_transactions_rule,
    74: list_config_resources_rule,
}

PREVIEWS: Final[dict[int, Preview]] = {0: produce_preview, 1: fetch_preview}
