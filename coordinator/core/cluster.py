"""The cluster view clients need before they reach the coordinator.

This node is the whole cluster: Metadata, DescribeCluster and FindCoordinator name it, and it
keeps a persisted topic catalog (CreateTopics, DeleteTopics, CreatePartitions, auto-creation).
Standalone mode holds no records: every topic is an empty log, so ListOffsets and Fetch answer
as Kafka does for an empty partition and Produce is refused.

Like the group core, this module is pure: handlers take a request and return a Result whose
records the runtime persists before the reply is released.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from coordinator.core.admin_write import admin_write
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.core.shard_map import ShardMap
from protocol.apis import SERVED_VERSIONS
from protocol.errors import ErrorCode
from protocol.features import STANDALONE_COORDINATOR
from protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    SupportedFeatureKey,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from protocol.messages.fetch import FetchableTopicResponse, FetchRequest, FetchResponse, PartitionData
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from storage.records import Record, TopicRecord, TopicTombstone

ZERO_UUID: Final = bytes(16)
NOT_REQUESTED_OPERATIONS: Final = -(2**31)
_LEGAL_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_NAME_LENGTH: Final = 249
# KIP-511: client software name and version must match this.
_SOFTWARE_NAME: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
# ListOffsets special timestamps
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
NO_RECORDS_MESSAGE: Final = (
    "this server is a standalone group coordinator: it stores no records, every topic is an empty log"
)

# Topic-level configuration names Kafka accepts in CreateTopics.
TOPIC_CONFIG_NAMES: Final = frozenset(
    {
        "cleanup.policy", "compression.type", "compression.gzip.level", "compression.lz4.level",
        "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
        "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
        "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
        "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.storage.enable",
        "remote.log.copy.disable", "remote.log.delete.on.disable", "retention.bytes", "retention.ms",
        "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable", "message.downconversion.enable",
        "message.format.version", "message.timestamp.difference.max.ms",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    node_id: int
    host: str
    port: int
    cluster_id: str


def topic_name_error(name: str | None) -> str | None:
    """Kafka's Topic.validate: why a name is illegal, or None when it is fine."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > _MAX_TOPIC_NAME_LENGTH:
        return f"Topic name is illegal, it can't be longer than {_MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        return f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    return None


class PartitionCatalog(Protocol):
    """A topic catalog kept elsewhere (gateway mode: the upstream cluster's metadata)."""

    def has_partition(self, topic: str, partition: int) -> bool: ...


class Cluster:
    def __init__(
        self,
        node: NodeIdentity,
        *,
        auto_create_topics: bool,
        num_partitions: int,
        topic_id_factory: Callable[[], bytes] = lambda: uuid.uuid4().bytes,
        shard_map: ShardMap | None = None,
    ) -> None:
        self.node = node
        # Who answers for which group (docs/multinode.md); one process owns them all by default.
        self.shard_map = shard_map or ShardMap.for_one_process(1, node.node_id)
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self._new_topic_id = topic_id_factory
        self.topics: dict[str, TopicRecord] = {}
        self._by_id: dict[bytes, TopicRecord] = {}
        # Bumped on every catalog change: consumer groups re-read their subscribed topics then.
        self.version = 0
        self.external: PartitionCatalog | None = None

    def use_catalog(self, catalog: PartitionCatalog) -> None:
        """Gateway mode: partitions are checked against upstream metadata, not the local catalog."""
        self.external = catalog

    # ---- catalog -------------------------------------------------------------------------
    def load(self, topics: list[TopicRecord]) -> None:
        for topic in topics:
            self._apply(topic)

    def merge_topics(self, topics: list[TopicRecord]) -> None:
        """Topics another node created or changed (docs/multinode.md); unchanged ones are left
        alone so that the catalog version only moves on a change."""
        for topic in topics:
            if self.topics.get(topic.name) != topic:
                self._apply(topic)

    def forget_topics(self, names: list[str]) -> None:
        """Topics another node deleted (docs/multinode.md)."""
        for name in names:
            if name in self.topics:
                self._apply(TopicTombstone(name))

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None:
        return self._by_id.get(topic_id)

    def _apply(self, record: Record) -> None:
        self.version += 1
        if isinstance(record, TopicRecord | TopicTombstone):
            old = record.apply_to(self.topics)
            if old is not None:
                self._by_id.pop(old.topic_id, None)
            if isinstance(record, TopicRecord):
                self._by_id[record.topic_id] = record

    def _persist(self, ctx: RequestContext, records: list[Record], response: Any) -> Result:
        """Apply catalog changes once durable, then answer."""
        if not records:
            return Result(replies=[(ctx.reply_to, response)])

        def apply() -> None:
            for record in records:
                self._apply(record)

        def fail_entries(code: int) -> None:
            _fail_all(response, code)

        return admin_write(ctx.reply_to, records, response, apply=apply, fail_entries=fail_entries)

    def partitions_of(self, topic: str) -> int | None:
        record = self.topics.get(topic)
        return record.num_partitions if record is not None else None

    def has_partition(self, topic: str, partition: int) -> bool:
        if self.external is not None:
            return self.external.has_partition(topic, partition)
        record = self.topics.get(topic)
        return record is not None and 0 <= partition < record.num_partitions

    def _new_topic(
        self, name: str, partitions: int, configs: tuple[tuple[str, str | None], ...] = ()
    ) -> TopicRecord:
        return TopicRecord(name, self._new_topic_id(), partitions, 1, configs)

    # ---- ApiVersions ---------------------------------------------------------------------
    @staticmethod
    def api_versions_response(error_code: int = ErrorCode.NONE) -> ApiVersionsResponse:
        keys = [ApiVersion(int(key), low, high) for key, (low, high) in sorted(SERVED_VERSIONS.items())]
        # Tells our admin tools that ListOffsets answers 0 for want of a log (see protocol.features).
        features = [SupportedFeatureKey(STANDALONE_COORDINATOR, 1, 1)]
        return ApiVersionsResponse(error_code=error_code, api_keys=keys, supported_features=features)

    def api_versions(self, ctx: RequestContext, req: ApiVersionsRequest) -> Result:
        if ctx.api_version >= 3 and not (
            _SOFTWARE_NAME.fullmatch(req.client_software_name or "")
            and _SOFTWARE_NAME.fullmatch(req.client_software_version or "")
        ):
            return Result(replies=[(ctx.reply_to, ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST))])
        return Result(replies=[(ctx.reply_to, self.api_versions_response())])

    # ---- Metadata / DescribeCluster / FindCoordinator --------------------------------------
    def _brokers(self, ctx: RequestContext) -> list[tuple[int, str, int]]:
        """The live nodes (id, host, port): this one at the address the client came through."""
        here = (self.node.node_id, *self._endpoint(ctx))
        if self.shard_map.single_node:
            return [here]
        others = [(n.node_id, n.host, n.port) for n in self.shard_map.live_nodes() if n.node_id != here[0]]
        return sorted([here, *others])

    def broker_ids(self, ctx: RequestContext) -> list[int]:
        """The ids of the live nodes, as Metadata and DescribeCluster list them."""
        return [broker[0] for broker in self._brokers(ctx)]

    def metadata(self, ctx: RequestContext, req: MetadataRequest) -> Result:
        version = ctx.api_version
        brokers = self._brokers(ctx)
        response = MetadataResponse(
            brokers=[MetadataResponseBroker(*broker, None) for broker in brokers],
            cluster_id=self.node.cluster_id,
            controller_id=brokers[0][0],
        )
        leaders = [broker[0] for broker in brokers]
        if version >= 8 and req.include_cluster_authorized_operations:
            response.cluster_authorized_operations = 0
        requested = req.topics
        if requested is None or (version == 0 and not requested):
            names: list[str | None] = list(sorted(self.topics))
        else:
            names = []
            for topic in requested:
                if topic.name is None and topic.topic_id != ZERO_UUID:
                    known = self._by_id.get(topic.topic_id)
                    names.append(known.name if known else None)
                else:
                    names.append(topic.name)
        allow_create = self.auto_create_topics and (req.allow_auto_topic_creation or version < 4)
        created: list[Record] = []
        pending: dict[str, TopicRecord] = {}
        for name in names:
            record = self.topics.get(name) if name is not None else None
            if record is None and name is not None and name in pending:
                record = pending[name]
            if record is None:
                error = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID
                )
                if name is not None and topic_name_error(name) is not None:
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
                elif name is not None and allow_create:
                    record = self._new_topic(name, self.num_partitions)
                    pending[name] = record
                    created.append(record)
                if record is None:
                    response.topics.append(MetadataResponseTopic(error_code=error, name=name))
                    continue
            response.topics.append(
                self._describe_topic(
                    record, version >= 8 and req.include_topic_authorized_operations, leaders
                )
            )
        if not created:
            return Result(replies=[(ctx.reply_to, response)])

        def durable(_now_ms: int) -> Result:
            for record in created:
                self._apply(record)
            return Result(replies=[(ctx.reply_to, response)])

        def failed(_now_ms: int, _error_code: int) -> Result:
            for topic in response.topics:
                if topic.name in pending:
                    topic.error_code, topic.partitions = ErrorCode.LEADER_NOT_AVAILABLE, []
            return Result(replies=[(ctx.reply_to, response)])

        return Result(records=created, on_durable=durable, on_failed=failed)

    def _describe_topic(
        self, record: TopicRecord, include_operations: bool, leaders: list[int]
    ) -> MetadataResponseTopic:
        # Several nodes: partitions are led round-robin by the live nodes, the same on every node.
        partitions = [
            MetadataResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=p,
                leader_id=leaders[p % len(leaders)],
                leader_epoch=0,
                replica_nodes=[leaders[p % len(leaders)]],
                isr_nodes=[leaders[p % len(leaders)]],
                offline_replicas=[],
            )
            for p in range(record.num_partitions)
        ]
        return MetadataResponseTopic(
            error_code=ErrorCode.NONE,
            name=record.name,
            topic_id=record.topic_id,
            is_internal=False,
            partitions=partitions,
            topic_authorized_operations=0 if include_operations else NOT_REQUESTED_OPERATIONS,
        )

    def describe_cluster(self, ctx: RequestContext, req: DescribeClusterRequest) -> Result:
        brokers = self._brokers(ctx)
        response = DescribeClusterResponse(
            endpoint_type=req.endpoint_type,
            cluster_id=self.node.cluster_id,
            controller_id=brokers[0][0],
            brokers=[DescribeClusterBroker(*broker, None) for broker in brokers],
            cluster_authorized_operations=0
            if req.include_cluster_authorized_operations
            else NOT_REQUESTED_OPERATIONS,
        )
        if req.endpoint_type not in (1, 2):
            response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            response.error_message = f"endpoint type {req.endpoint_type} is not known"
            response.brokers = []
        return Result(replies=[(ctx.reply_to, response)])

    def find_coordinator(self, ctx: RequestContext, req: FindCoordinatorRequest) -> Result:
        version = ctx.api_version
        keys = req.coordinator_keys if version >= 4 else [req.key]
        coordinators = [self._coordinator_for(ctx, key, req.key_type, version) for key in keys]
        if version >= 4:
            response = FindCoordinatorResponse(coordinators=coordinators)
        else:
            only = coordinators[0]
            response = FindCoordinatorResponse(
                error_code=only.error_code,
                error_message=only.error_message if only.error_code else None,
                node_id=only.node_id,
                host=only.host,
                port=only.port,
            )
        return Result(replies=[(ctx.reply_to, response)])

    def _endpoint(self, ctx: RequestContext) -> tuple[str, int]:
        """The address of the listener the client came through (Kafka advertises per listener)."""
        return ctx.advertised if ctx.advertised is not None else (self.node.host, self.node.port)

    def _coordinator_for(self, ctx: RequestContext, key: str, key_type: int, version: int) -> Coordinator:
        if key_type == 0:
            owner = self.shard_map.owner(key, ctx.now_ms)
            if owner == self.node.node_id:
                return Coordinator(key, owner, *self._endpoint(ctx), ErrorCode.NONE, None)
            address = None if owner is None else self.shard_map.nodes.get(owner)
            if owner is None or address is None:  # Kafka: the partition has no leader right now (retriable)
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                return Coordinator(key, -1, "", -1, code, "the group's shard has no live owner yet")
            return Coordinator(key, owner, address.host, address.port, ErrorCode.NONE, None)
        if key_type == 1:
            message = "transactions are not supported by this group coordinator"
        elif key_type == 2 and version < 6:
            message = "share coordinators need FindCoordinator v6 or later"
        elif key_type == 2:
            message = "share groups are not supported by this group coordinator"
        else:
            message = f"unknown coordinator key type {key_type}"
        return Coordinator(key, -1, "", -1, ErrorCode.INVALID_REQUEST, message)

    # ---- topic administration ------------------------------------------------------------
    def create_topics(self, ctx: RequestContext, req: CreateTopicsRequest) -> Result:
        version = ctx.api_version
        seen: dict[str, int] = {}
        for topic in req.topics:
            seen[topic.name] = seen.get(topic.name, 0) + 1
        response = CreateTopicsResponse()
        records: list[Record] = []
        for topic in req.topics:
            if seen[topic.name] > 1:
                result = CreatableTopicResult(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"Create topics request from client contains multiple entries for topic {topic.name}",
                )
            else:
                result, record = self._create_one(topic, version, req.validate_only)
                if record is not None:
                    records.append(record)
            if version < 5 or result.error_code:
                result.num_partitions, result.replication_factor, result.configs = -1, -1, None
            if result.error_code and version < 1:
                result.error_message = None
            response.topics.append(result)
        return self._persist(ctx, records, response)

    def _create_one(
        self, topic: CreatableTopic, version: int, validate_only: bool
    ) -> tuple[CreatableTopicResult, TopicRecord | None]:
        def error(code: ErrorCode, message: str) -> tuple[CreatableTopicResult, None]:
            return CreatableTopicResult(name=topic.name, error_code=code, error_message=message), None

        name_error = topic_name_error(topic.name)
        if name_error is not None:
            return error(ErrorCode.INVALID_TOPIC_EXCEPTION, name_error)
        if topic.name in self.topics:
            return error(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                return error(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                )
            indexes = sorted(a.partition_index for a in topic.assignments)
            if indexes != list(range(len(indexes))):
                return error(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "Partitions should be a consecutive 0-based integer sequence",
                )
            for assignment in topic.assignments:
                if assignment.broker_ids != [self.node.node_id]:
                    return error(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignment {assignment.broker_ids} for partition {assignment.partition_index} "
                        f"must be [{self.node.node_id}] on this one-node cluster",
                    )
            partitions = len(indexes)
        else:
            partitions = topic.num_partitions
            if partitions == -1 and version >= 4:
                partitions = self.num_partitions
            if partitions <= 0:
                return error(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            factor = topic.replication_factor
            if factor == -1 and version >= 4:
                factor = 1
            if factor <= 0:
                return error(
                    ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
                )
            if factor > 1:
                return error(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {factor} larger than available brokers: 1.",
                )
        for config in topic.configs:
            if config.name not in TOPIC_CONFIG_NAMES:
                return error(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {config.name}")
        configs = tuple((c.name, c.value) for c in topic.configs)
        record = self._new_topic(topic.name, partitions, configs)
        result = CreatableTopicResult(
            name=topic.name,
            topic_id=record.topic_id,
            error_code=ErrorCode.NONE,
            error_message=None,
            num_partitions=partitions,
            replication_factor=1,
            configs=[CreatableTopicConfigs(name, value, False, 1, False) for name, value in configs],
        )
        return result, (None if validate_only else record)

    def delete_topics(self, ctx: RequestContext, req: DeleteTopicsRequest) -> tuple[Result, list[str]]:
        """Returns the Result and the names being deleted (their offsets go too)."""
        version = ctx.api_version
        if version >= 6:
            wanted = [(t.name, t.topic_id) for t in req.topics]
        else:
            wanted = [(name, ZERO_UUID) for name in req.topic_names]
        response = DeleteTopicsResponse()
        records: list[Record] = []
        deleted: list[str] = []
        for name, topic_id in wanted:
            if name is None:
                record = self._by_id.get(topic_id)
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                record = self.topics.get(name)
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if record is None or record.name in deleted:
                response.responses.append(
                    DeletableTopicResult(
                        name=name,
                        topic_id=topic_id,
                        error_code=missing,
                        error_message="This server does not host this topic.",
                    )
                )
                continue
            deleted.append(record.name)
            records.append(TopicTombstone(record.name))
            response.responses.append(
                DeletableTopicResult(
                    name=record.name, topic_id=record.topic_id, error_code=ErrorCode.NONE, error_message=None
                )
            )
        return self._persist(ctx, records, response), deleted

    def create_partitions(self, ctx: RequestContext, req: CreatePartitionsRequest) -> Result:
        counts: dict[str, int] = {}
        for topic in req.topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        response = CreatePartitionsResponse()
        records: list[Record] = []
        for topic in req.topics:
            code, message = ErrorCode.NONE, None
            current = self.topics.get(topic.name)
            if counts[topic.name] > 1:
                code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
            elif current is None:
                code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic does not exist."
            elif topic.count < current.num_partitions:
                code, message = (
                    ErrorCode.INVALID_PARTITIONS,
                    (
                        f"Topic currently has {current.num_partitions} partitions, which is higher than the requested {topic.count}."
                    ),
                )
            elif topic.count == current.num_partitions:
                code, message = (
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic already has {current.num_partitions} partitions.",
                )
            elif topic.assignments is not None and (
                len(topic.assignments) != topic.count - current.num_partitions
                or any(a.broker_ids != [self.node.node_id] for a in topic.assignments)
            ):
                code, message = (
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    (
                        f"Increasing the number of partitions by {topic.count - current.num_partitions} needs as many "
                        f"assignments, each [{self.node.node_id}] on this one-node cluster."
                    ),
                )
            elif not req.validate_only:
                records.append(TopicRecord(current.name, current.topic_id, topic.count, 1, current.configs))
            response.results.append(CreatePartitionsTopicResult(topic.name, code, message))
        return self._persist(ctx, records, response)

    # ---- the empty logs ------------------------------------------------------------------
    def list_offsets(self, ctx: RequestContext, req: ListOffsetsRequest) -> Result:
        version = ctx.api_version
        response = ListOffsetsResponse()
        for topic in req.topics:
            out = ListOffsetsTopicResponse(name=topic.name)
            for part in topic.partitions:
                answer = ListOffsetsPartitionResponse(partition_index=part.partition_index)
                if not self.has_partition(topic.name, part.partition_index):
                    answer.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif version == 0:
                    # v0 lists up to max_num_offsets offsets; an empty log has only offset 0.
                    answer.old_style_offsets = [0] if part.max_num_offsets > 0 else []
                elif part.timestamp in (LATEST, EARLIEST) or part.timestamp <= -4:
                    answer.offset, answer.timestamp = 0, -1
                    if version >= 4:  # LeaderEpoch exists from v4
                        answer.leader_epoch = 0
                else:
                    # Timestamp lookup and MAX_TIMESTAMP on an empty log find no record (Kafka: -1/-1).
                    answer.offset, answer.timestamp = -1, -1
                out.partitions.append(answer)
            response.topics.append(out)
        return Result(replies=[(ctx.reply_to, response)])

    def fetch_response(self, version: int, req: FetchRequest) -> FetchResponse:
        """The answer after max_wait_ms: every known partition empty, high watermark 0."""
        response = FetchResponse(session_id=0)
        if req.session_id != 0 or req.session_epoch not in (-1, 0):
            # We never create fetch sessions, so an incremental fetch names one we do not know.
            response.error_code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            return response
        for topic in req.topics:
            record = self._by_id.get(topic.topic_id) if version >= 13 else self.topics.get(topic.topic)
            out = FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
            for part in topic.partitions:
                data = PartitionData(partition_index=part.partition, records=b"", aborted_transactions=None)
                if record is None or not 0 <= part.partition < record.num_partitions:
                    data.error_code = (
                        ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    )
                    data.high_watermark = data.last_stable_offset = data.log_start_offset = -1
                elif part.fetch_offset != 0:
                    data.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                    data.high_watermark = data.last_stable_offset = data.log_start_offset = 0
                else:
                    data.high_watermark = data.last_stable_offset = data.log_start_offset = 0
                out.partitions.append(data)
            response.responses.append(out)
        return response

    def produce(self, ctx: RequestContext, req: ProduceRequest) -> Result:
        if req.acks == 0:
            return Result()
        response = ProduceResponse()
        for topic in req.topic_data:
            out = TopicProduceResponse(name=topic.name, topic_id=topic.topic_id)
            for part in topic.partition_data:
                out.partition_responses.append(
                    PartitionProduceResponse(
                        index=part.index,
                        error_code=ErrorCode.INVALID_REQUEST,
                        base_offset=-1,
                        error_message=NO_RECORDS_MESSAGE,
                    )
                )
            response.responses.append(out)
        return Result(replies=[(ctx.reply_to, response)])


def _fail_all(response: Any, error_code: int) -> Any:
    """The same response with every per-topic entry failed (the catalog write did not land)."""
    if isinstance(response, CreateTopicsResponse):
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE:
                topic.error_code, topic.error_message = error_code, "the topic catalog could not be written"
                topic.num_partitions, topic.replication_factor, topic.configs = -1, -1, None
    elif isinstance(response, DeleteTopicsResponse):
        for result in response.responses:
            if result.error_code == ErrorCode.NONE:
                result.error_code, result.error_message = error_code, "the topic catalog could not be written"
    elif isinstance(response, CreatePartitionsResponse):
        for partitions in response.results:
            if partitions.error_code == ErrorCode.NONE:
                partitions.error_code = error_code
                partitions.error_message = "the topic catalog could not be written"
    return response
