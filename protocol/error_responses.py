"""Whole-request error responses: for each request type, the response that fails all of it.

This is Kafka's ``AbstractRequest.getErrorResponse``: one function per request type that knows
where that API carries errors in each version (a top-level code, one code per topic, partition
or group, or both), so that every caller -- authorization, loading, an unexpected failure --
answers the same way. Entries are echoed from the request where the response lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from protocol.apis import ApiKey
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_describe import DescribedGroup as ConsumerDescribedGroup
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from protocol.messages.create_topics import CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.delete_acls import DeleteAclsFilterResult, DeleteAclsRequest, DeleteAclsResponse
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from protocol.messages.delete_topics import DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse
from protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from protocol.messages.describe_groups import DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
)
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.fetch import FetchableTopicResponse, FetchRequest, FetchResponse, PartitionData
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataResponseTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from protocol.messages.share_group_describe import DescribedGroup as ShareDescribedGroup
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from protocol.messages.streams_group_describe import DescribedGroup as StreamsDescribedGroup
from protocol.messages.streams_group_describe import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
)
from protocol.messages.streams_group_heartbeat import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)

# (version, request, error code, message) -> the response; the message is dropped by versions
# that have no field for it.
ErrorResponseBuilder = Callable[[int, Any, int, str | None], Any]


# ---- group APIs -------------------------------------------------------------------------------


def join_group_error(version: int, code: int, member_id: str = "") -> JoinGroupResponse:
    """v7+ made ProtocolName nullable and errors carry null there; older versions need ""."""
    return JoinGroupResponse(
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if version >= 7 else "",
        leader="",
        member_id=member_id,
    )


def join_group(version: int, req: JoinGroupRequest, code: int, message: str | None) -> JoinGroupResponse:
    return join_group_error(version, code)


def sync_group(version: int, req: SyncGroupRequest, code: int, message: str | None) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=code)


def heartbeat(version: int, req: HeartbeatRequest, code: int, message: str | None) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)


def leave_group(version: int, req: LeaveGroupRequest, code: int, message: str | None) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=code)


def offset_commit(
    version: int, req: OffsetCommitRequest, code: int, message: str | None
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
            )
            for t in req.topics
        ]
    )


def offset_fetch(
    version: int, req: OffsetFetchRequest, code: int, message: str | None
) -> OffsetFetchResponse:
    if version >= 8:
        return OffsetFetchResponse(
            groups=[OffsetFetchResponseGroup(group_id=g.group_id, error_code=code) for g in req.groups]
        )
    if version >= 2:
        return OffsetFetchResponse(error_code=code)
    # v0-1 have no top-level error: the error goes into every requested partition.
    return OffsetFetchResponse(
        topics=[
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=[OffsetFetchResponsePartition(p, -1, -1, "", code) for p in t.partition_indexes],
            )
            for t in req.topics or []
        ]
    )


def list_groups(version: int, req: ListGroupsRequest, code: int, message: str | None) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code)


def describe_groups(
    version: int, req: DescribeGroupsRequest, code: int, message: str | None
) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[DescribedGroup(error_code=code, group_id=g) for g in req.groups])


def delete_groups(
    version: int, req: DeleteGroupsRequest, code: int, message: str | None
) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[DeletableGroupResult(g, code) for g in req.groups_names])


def offset_delete(
    version: int, req: OffsetDeleteRequest, code: int, message: str | None
) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code)


def consumer_group_heartbeat(
    version: int, req: ConsumerGroupHeartbeatRequest, code: int, message: str | None
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)


def consumer_group_describe(
    version: int, req: ConsumerGroupDescribeRequest, code: int, message: str | None
) -> ConsumerGroupDescribeResponse:
    return ConsumerGroupDescribeResponse(
        groups=[
            ConsumerDescribedGroup(error_code=code, error_message=message, group_id=g) for g in req.group_ids
        ]
    )


def streams_group_heartbeat(
    version: int, req: StreamsGroupHeartbeatRequest, code: int, message: str | None
) -> StreamsGroupHeartbeatResponse:
    return StreamsGroupHeartbeatResponse(error_code=code, error_message=message, status=None)


def streams_group_describe(
    version: int, req: StreamsGroupDescribeRequest, code: int, message: str | None
) -> StreamsGroupDescribeResponse:
    return StreamsGroupDescribeResponse(
        groups=[
            StreamsDescribedGroup(error_code=code, error_message=message, group_id=g) for g in req.group_ids
        ]
    )


def share_group_heartbeat(
    version: int, req: ShareGroupHeartbeatRequest, code: int, message: str | None
) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, error_message=message)


def share_group_describe(
    version: int, req: ShareGroupDescribeRequest, code: int, message: str | None
) -> ShareGroupDescribeResponse:
    groups = [ShareDescribedGroup(error_code=code, error_message=message, group_id=g) for g in req.group_ids]
    return ShareGroupDescribeResponse(groups=groups)


def describe_share_group_offsets(
    version: int, req: DescribeShareGroupOffsetsRequest, code: int, message: str | None
) -> DescribeShareGroupOffsetsResponse:
    groups = [
        DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, error_code=code, error_message=message)
        for g in req.groups
    ]
    return DescribeShareGroupOffsetsResponse(groups=groups)


def alter_share_group_offsets(
    version: int, req: AlterShareGroupOffsetsRequest, code: int, message: str | None
) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error_code=code, error_message=message)


def delete_share_group_offsets(
    version: int, req: DeleteShareGroupOffsetsRequest, code: int, message: str | None
) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(error_code=code, error_message=message)


def share_fetch(version: int, req: ShareFetchRequest, code: int, message: str | None) -> ShareFetchResponse:
    """Kafka's ShareFetchRequest.getErrorResponse: the top-level code, no partitions."""
    return ShareFetchResponse(error_code=code, error_message=message)


def share_acknowledge(
    version: int, req: ShareAcknowledgeRequest, code: int, message: str | None
) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(error_code=code, error_message=message)


# ---- cluster APIs -----------------------------------------------------------------------------


def api_versions(
    version: int, req: ApiVersionsRequest, code: int, message: str | None
) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code)


def metadata(version: int, req: MetadataRequest, code: int, message: str | None) -> MetadataResponse:
    # Metadata has no top-level error before v13: every requested topic carries it. A topic asked
    # by id has no name, which only v12+ responses may leave null.
    return MetadataResponse(
        topics=[
            MetadataResponseTopic(
                error_code=code, name=t.name if version >= 12 else t.name or "", topic_id=t.topic_id
            )
            for t in req.topics or []
        ]
    )


def describe_cluster(
    version: int, req: DescribeClusterRequest, code: int, message: str | None
) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=code, error_message=message)


def find_coordinator(
    version: int, req: FindCoordinatorRequest, code: int, message: str | None
) -> FindCoordinatorResponse:
    text = message if version >= 1 else ""
    if version >= 4:
        return FindCoordinatorResponse(
            coordinators=[Coordinator(key, -1, "", -1, code, text) for key in req.coordinator_keys]
        )
    return FindCoordinatorResponse(error_code=code, error_message=text, node_id=-1, host="", port=-1)


def create_topics(
    version: int, req: CreateTopicsRequest, code: int, message: str | None
) -> CreateTopicsResponse:
    text = message if version >= 1 else ""
    return CreateTopicsResponse(
        topics=[CreatableTopicResult(name=t.name, error_code=code, error_message=text) for t in req.topics]
    )


def delete_topics(
    version: int, req: DeleteTopicsRequest, code: int, message: str | None
) -> DeleteTopicsResponse:
    text = message if version >= 5 else None
    if version >= 6:
        results = [
            DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code, error_message=text)
            for t in req.topics
        ]
    else:
        results = [
            DeletableTopicResult(name=name, error_code=code, error_message=text) for name in req.topic_names
        ]
    return DeleteTopicsResponse(responses=results)


def create_partitions(
    version: int, req: CreatePartitionsRequest, code: int, message: str | None
) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[CreatePartitionsTopicResult(t.name, code, message) for t in req.topics]
    )


def list_offsets(
    version: int, req: ListOffsetsRequest, code: int, message: str | None
) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsTopicResponse(
                t.name, [ListOffsetsPartitionResponse(p.partition_index, code) for p in t.partitions]
            )
            for t in req.topics
        ]
    )


def produce(version: int, req: ProduceRequest, code: int, message: str | None) -> ProduceResponse:
    text = message if version >= 8 else None
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=t.name,
                topic_id=t.topic_id,
                partition_responses=[
                    PartitionProduceResponse(p.index, code, -1, error_message=text) for p in t.partition_data
                ],
            )
            for t in req.topic_data
        ]
    )


def fetch(version: int, req: FetchRequest, code: int, message: str | None) -> FetchResponse:
    # v13+ carry the error at the top level only; older versions also in every partition.
    if version >= 13:
        return FetchResponse(error_code=code)
    return FetchResponse(
        error_code=code if version >= 7 else 0,
        responses=[
            FetchableTopicResponse(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[PartitionData(p.partition, code, high_watermark=-1) for p in t.partitions],
            )
            for t in req.topics
        ],
    )


# ---- security APIs ----------------------------------------------------------------------------


def describe_acls(
    version: int, req: DescribeAclsRequest, code: int, message: str | None
) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=code, error_message=message)


def create_acls(version: int, req: CreateAclsRequest, code: int, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(results=[AclCreationResult(code, message) for _ in req.creations])


def delete_acls(version: int, req: DeleteAclsRequest, code: int, message: str | None) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(code, message) for _ in req.filters])


def describe_user_scram_credentials(
    version: int, req: DescribeUserScramCredentialsRequest, code: int, message: str | None
) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(error_code=code, error_message=message, results=[])


def alter_user_scram_credentials(
    version: int, req: AlterUserScramCredentialsRequest, code: int, message: str | None
) -> AlterUserScramCredentialsResponse:
    """One result per user named (Kafka answers per user, not per deletion or upsertion)."""
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return AlterUserScramCredentialsResponse(
        results=[AlterUserScramCredentialsResult(user, code, message) for user in users]
    )


def describe_configs(
    version: int, req: DescribeConfigsRequest, code: int, message: str | None
) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        results=[
            DescribeConfigsResult(code, message, r.resource_type, r.resource_name) for r in req.resources
        ]
    )


def incremental_alter_configs(
    version: int, req: IncrementalAlterConfigsRequest, code: int, message: str | None
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        responses=[
            AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name)
            for r in req.resources
        ]
    )


def sasl_handshake(
    version: int, req: SaslHandshakeRequest, code: int, message: str | None
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=code, mechanisms=[])


def sasl_authenticate(
    version: int, req: SaslAuthenticateRequest, code: int, message: str | None
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=code, error_message=message)


def txn_offset_commit(
    version: int, req: TxnOffsetCommitRequest, code: int, message: str | None
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[TxnOffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
            )
            for t in req.topics
        ]
    )


def add_offsets_to_txn(
    version: int, req: AddOffsetsToTxnRequest, code: int, message: str | None
) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=code)


def end_txn(version: int, req: EndTxnRequest, code: int, message: str | None) -> EndTxnResponse:
    return EndTxnResponse(error_code=code)


def list_config_resources(
    version: int, req: ListConfigResourcesRequest, code: int, message: str | None
) -> ListConfigResourcesResponse:
    return ListConfigResourcesResponse(error_code=code)


ERROR_RESPONSES: Final[dict[ApiKey, ErrorResponseBuilder]] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.SASL_HANDSHAKE: sasl_handshake,
    ApiKey.API_VERSIONS: api_versions,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DELETE_ACLS: delete_acls,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
    ApiKey.SASL_AUTHENTICATE: sasl_authenticate,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster,
    ApiKey.LIST_CONFIG_RESOURCES: list_config_resources,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
    ApiKey.STREAMS_GROUP_HEARTBEAT: streams_group_heartbeat,
    ApiKey.STREAMS_GROUP_DESCRIBE: streams_group_describe,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.SHARE_GROUP_HEARTBEAT: share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: delete_share_group_offsets,
    ApiKey.SHARE_FETCH: share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_acknowledge,
}


def error_response(api_key: int, version: int, request: Any, code: int, message: str | None = None) -> Any:
    """The response failing the whole ``request`` with ``code`` (KeyError for an API not served)."""
    return ERROR_RESPONSES[ApiKey(api_key)](version, request, code, message)
