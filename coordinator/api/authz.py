"""Authorization at the API layer (Kafka's KafkaApis checks, before the group coordinator) and
the ACL APIs (DescribeAcls / CreateAcls / DeleteAcls, persisted through the storage).

Installed only when ``authorizer.enabled`` is true: it wraps the group handlers, so the
plaintext hot path without an authorizer is unchanged.

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else GROUP_AUTHORIZATION_FAILED.
* OffsetCommit: READ on the group (else every partition 30), READ on each topic (else 29 per partition).
* TxnOffsetCommit: WRITE on the transactional id (else every partition 53), READ on the group
  (else 30), READ on each topic (else 29 per partition), in that order (docs/transactions.md).
* OffsetFetch: DESCRIBE on the group (else 30 where the version puts group errors); explicitly
  requested topics without DESCRIBE answer 29 per partition (offset -1); "all partitions"
  requests silently omit them.
* DescribeGroups: DESCRIBE per group (else an entry with 30); authorized operations are computed.
* ListGroups: only groups with DESCRIBE, unless DESCRIBE on the cluster.
* DeleteGroups: DELETE per group. OffsetDelete: DELETE on the group (top-level 30), READ per topic (29).
* FindCoordinator: DESCRIBE on the group key.
* ConsumerGroupHeartbeat: READ on the group (else 30), DESCRIBE on every subscribed topic name (else
  TOPIC_AUTHORIZATION_FAILED). Topics matched by a regex subscription are not filtered by ACLs.
* ConsumerGroupDescribe: DESCRIBE per group (else an entry with 30); authorized operations are computed.
* DescribeAcls needs DESCRIBE on the cluster, CreateAcls/DeleteAcls ALTER (super users have both).
* ListConfigResources needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
* DescribeUserScramCredentials needs DESCRIBE on the cluster, AlterUserScramCredentials ALTER
  (else CLUSTER_AUTHORIZATION_FAILED for the whole request, as Kafka answers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from coordinator.api import config_resources
from coordinator.api.acl_replies import GROUP_DENIED, TOPIC_DENIED, heartbeat_refusal
from coordinator.api.acl_replies import denied as _denied
from coordinator.api.amend import amend, reply
from coordinator.api.config_resources import Refusal, screen_alter, screen_describe
from coordinator.api.routes import Handler, Routes
from coordinator.api.share_authz import ShareAcls
from coordinator.core.admin_write import admin_write
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.security.acl import (
    CLUSTER_NAME,
    AclFilter,
    Authorizer,
    Operation,
    ResourceType,
    validation_error,
)
from protocol.apis import ApiKey
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_describe import DescribedGroup as ConsumerGroupDescribedGroup
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.describe_groups import DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_config_resources import ListConfigResourcesRequest
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.streams_group_describe import DescribedGroup as StreamsGroupDescribedGroup
from protocol.messages.streams_group_describe import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
)
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from storage.records import AclRecord, AclTombstone

CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TRANSACTIONAL_ID_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
SECURITY_DISABLED = int(ErrorCode.SECURITY_DISABLED)
CLUSTER_DENIED_MESSAGE = "Cluster authorization failed."


class _GroupRequest(Protocol):
    @property
    def group_id(self) -> str: ...


_GroupRequestT = TypeVar("_GroupRequestT", bound=_GroupRequest)
_DescribeRequestT = TypeVar(
    "_DescribeRequestT", DescribeGroupsRequest, ConsumerGroupDescribeRequest, StreamsGroupDescribeRequest
)


class AclLayer:
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    # ---- checks ----------------------------------------------------------------------------------
    def allowed(
        self, ctx: RequestContext, operation: int, resource_type: int, name: str, *, log_denied: bool = True
    ) -> bool:
        return self.authorizer.authorize(
            ctx.principal, ctx.client_host, operation, resource_type, name, log_denied=log_denied
        )

    def _group(self, ctx: RequestContext, operation: int, group_id: str, *, log_denied: bool = True) -> bool:
        return self.allowed(ctx, operation, ResourceType.GROUP, group_id, log_denied=log_denied)

    def _topic(self, ctx: RequestContext, operation: int, topic: str) -> bool:
        return self.allowed(ctx, operation, ResourceType.TOPIC, topic)

    # ---- installing --------------------------------------------------------------------------------
    def install(self, routes: Routes) -> None:
        """Put the checks in front of the group handlers and serve the ACL APIs."""
        routes.wrap(ApiKey.JOIN_GROUP, JoinGroupRequest, self._group_read(ApiKey.JOIN_GROUP))
        routes.wrap(ApiKey.SYNC_GROUP, SyncGroupRequest, self._group_read(ApiKey.SYNC_GROUP))
        routes.wrap(ApiKey.HEARTBEAT, HeartbeatRequest, self._group_read(ApiKey.HEARTBEAT))
        routes.wrap(ApiKey.LEAVE_GROUP, LeaveGroupRequest, self._group_read(ApiKey.LEAVE_GROUP))
        routes.wrap(ApiKey.OFFSET_COMMIT, OffsetCommitRequest, self._commit)
        routes.wrap(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest, self._txn_commit)
        routes.wrap(ApiKey.OFFSET_FETCH, OffsetFetchRequest, self._fetch)
        routes.wrap(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest, self._describe_groups)
        routes.wrap(ApiKey.LIST_GROUPS, ListGroupsRequest, self._list)
        routes.wrap(ApiKey.DELETE_GROUPS, DeleteGroupsRequest, self._delete_groups)
        routes.wrap(ApiKey.OFFSET_DELETE, OffsetDeleteRequest, self._delete_offsets)
        routes.wrap(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest, self._find_coordinator)
        routes.wrap(ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest, self._consumer_heartbeat)
        routes.wrap(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest, self._consumer_describe)
        routes.wrap(ApiKey.STREAMS_GROUP_HEARTBEAT, StreamsGroupHeartbeatRequest, self._streams_heartbeat)
        routes.wrap(ApiKey.STREAMS_GROUP_DESCRIBE, StreamsGroupDescribeRequest, self._streams_describe)
        ShareAcls(self).install(routes)
        routes.wrap(
            ApiKey.DESCRIBE_CONFIGS,
            DescribeConfigsRequest,
            screen_describe(self._configs_denied(Operation.DESCRIBE_CONFIGS)),
        )
        routes.wrap(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            IncrementalAlterConfigsRequest,
            screen_alter(self._configs_denied(Operation.ALTER_CONFIGS)),
        )
        routes.wrap(
            ApiKey.LIST_CONFIG_RESOURCES,
            ListConfigResourcesRequest,
            self._cluster_only(ApiKey.LIST_CONFIG_RESOURCES, Operation.DESCRIBE_CONFIGS),
        )
        routes.replace(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, self.describe_acls)
        routes.replace(ApiKey.CREATE_ACLS, CreateAclsRequest, self.create_acls)
        routes.replace(ApiKey.DELETE_ACLS, DeleteAclsRequest, self.delete_acls)
        if ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS in routes:  # served by the server shell
            routes.wrap(
                ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                DescribeUserScramCredentialsRequest,
                self._cluster_only(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, Operation.DESCRIBE),
            )
            routes.wrap(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                AlterUserScramCredentialsRequest,
                self._cluster_only(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, Operation.ALTER),
            )

    def _cluster_only(self, api_key: ApiKey, operation: int) -> Callable[[Handler[Any]], Handler[Any]]:
        """The whole request needs ``operation`` on the cluster (the SCRAM credential APIs)."""

        def wrap(inner: Handler[Any]) -> Handler[Any]:
            def handle(ctx: RequestContext, req: Any) -> Result:
                if not self._cluster(ctx, operation):
                    return _denied(ctx, api_key, req, CLUSTER_DENIED, CLUSTER_DENIED_MESSAGE)
                return inner(ctx, req)

            return handle

        return wrap

    def _group_read(self, api_key: ApiKey) -> Callable[[Handler[_GroupRequestT]], Handler[_GroupRequestT]]:
        """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group or nothing."""

        def wrap(inner: Handler[_GroupRequestT]) -> Handler[_GroupRequestT]:
            def handle(ctx: RequestContext, req: _GroupRequestT) -> Result:
                if not self._group(ctx, Operation.READ, req.group_id):
                    return _denied(ctx, api_key, req, GROUP_DENIED)
                return inner(ctx, req)

            return handle

        return wrap

    def _commit(self, inner: Handler[OffsetCommitRequest]) -> Handler[OffsetCommitRequest]:
        def handle(ctx: RequestContext, req: OffsetCommitRequest) -> Result:
            if not self._group(ctx, Operation.READ, req.group_id):
                return _denied(ctx, ApiKey.OFFSET_COMMIT, req, GROUP_DENIED)
            denied = [t for t in req.topics if not self._topic(ctx, Operation.READ, t.name)]
            if not denied:
                return inner(ctx, req)
            failed = error_response(
                ApiKey.OFFSET_COMMIT, ctx.api_version, OffsetCommitRequest(topics=denied), TOPIC_DENIED
            ).topics
            allowed = [t for t in req.topics if t not in denied]
            if not allowed:
                return reply(ctx, OffsetCommitResponse(topics=failed))
            req.topics = allowed

            def add_denied(response: OffsetCommitResponse) -> None:
                response.topics.extend(failed)

            amend(ctx, add_denied)
            return inner(ctx, req)

        return handle

    def _txn_commit(self, inner: Handler[TxnOffsetCommitRequest]) -> Handler[TxnOffsetCommitRequest]:
        def handle(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Result:
            if not self.allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
                return _denied(ctx, ApiKey.TXN_OFFSET_COMMIT, req, TRANSACTIONAL_ID_DENIED)
            if not self._group(ctx, Operation.READ, req.group_id):
                return _denied(ctx, ApiKey.TXN_OFFSET_COMMIT, req, GROUP_DENIED)
            denied = [t for t in req.topics if not self._topic(ctx, Operation.READ, t.name)]
            if not denied:
                return inner(ctx, req)
            failed = error_response(
                ApiKey.TXN_OFFSET_COMMIT, ctx.api_version, TxnOffsetCommitRequest(topics=denied), TOPIC_DENIED
            ).topics
            allowed = [t for t in req.topics if t not in denied]
            if not allowed:
                return reply(ctx, TxnOffsetCommitResponse(topics=failed))
            req.topics = allowed

            def add_denied(response: TxnOffsetCommitResponse) -> None:
                response.topics.extend(failed)

            amend(ctx, add_denied)
            return inner(ctx, req)

        return handle

    def _fetch(self, inner: Handler[OffsetFetchRequest]) -> Handler[OffsetFetchRequest]:
        def handle(ctx: RequestContext, req: OffsetFetchRequest) -> Result:
            amend(ctx, lambda response: self._filter_fetch(ctx, req, response))
            return inner(ctx, req)

        return handle

    def _filter_topics(self, ctx: RequestContext, topics: list[Any], explicit: bool) -> list[Any]:
        kept = []
        for topic in topics:
            if self._topic(ctx, Operation.DESCRIBE, topic.name):
                kept.append(topic)
            elif explicit:
                for p in topic.partitions:
                    p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code = (
                        -1,
                        -1,
                        "",
                        TOPIC_DENIED,
                    )
                kept.append(topic)
        return kept

    def _filter_fetch(
        self, ctx: RequestContext, req: OffsetFetchRequest, response: OffsetFetchResponse
    ) -> None:
        if ctx.api_version >= 8:
            requested = {g.group_id: g.topics is not None for g in req.groups}
            for group in response.groups:
                if not self._group(ctx, Operation.DESCRIBE, group.group_id):
                    group.error_code, group.topics = GROUP_DENIED, []
                else:
                    group.topics = self._filter_topics(ctx, group.topics, requested.get(group.group_id, True))
            return
        if not self._group(ctx, Operation.DESCRIBE, req.group_id):
            if ctx.api_version >= 2:
                response.error_code, response.topics = GROUP_DENIED, []
            else:
                for topic in response.topics:
                    for p in topic.partitions:
                        p.committed_offset, p.metadata, p.error_code = -1, "", GROUP_DENIED
            return
        response.topics = self._filter_topics(ctx, response.topics, req.topics is not None)

    def _describe_groups(self, inner: Handler[DescribeGroupsRequest]) -> Handler[DescribeGroupsRequest]:
        return self._describe(
            inner,
            lambda group_id: DescribedGroup(error_code=GROUP_DENIED, group_id=group_id),
            operations_from_version=3,
            operations_of_errors=True,
        )

    def _consumer_describe(
        self, inner: Handler[ConsumerGroupDescribeRequest]
    ) -> Handler[ConsumerGroupDescribeRequest]:
        return self._describe(
            inner,
            lambda group_id: ConsumerGroupDescribedGroup(error_code=GROUP_DENIED, group_id=group_id),
            operations_from_version=0,
            operations_of_errors=False,
        )

    def _describe(
        self,
        inner: Handler[_DescribeRequestT],
        denied_entry: Callable[[str], Any],
        operations_from_version: int,
        operations_of_errors: bool,
    ) -> Handler[_DescribeRequestT]:
        """DescribeGroups and ConsumerGroupDescribe: DESCRIBE per group, and the authorized
        operations computed from the ACLs when asked for (ConsumerGroupDescribe: only for groups
        it found)."""

        def handle(ctx: RequestContext, req: _DescribeRequestT) -> Result:
            def edit(
                response: DescribeGroupsResponse
                | ConsumerGroupDescribeResponse
                | StreamsGroupDescribeResponse,
            ) -> None:
                wanted = ctx.api_version >= operations_from_version and req.include_authorized_operations
                groups: list[Any] = response.groups
                for i, group in enumerate(groups):
                    if not self._group(ctx, Operation.DESCRIBE, group.group_id):
                        groups[i] = denied_entry(group.group_id)
                    elif wanted and (operations_of_errors or group.error_code == 0):
                        group.authorized_operations = self.authorizer.authorized_operations(
                            ctx.principal, ctx.client_host, ResourceType.GROUP, group.group_id
                        )

            amend(ctx, edit)
            return inner(ctx, req)

        return handle

    def _consumer_heartbeat(
        self, inner: Handler[ConsumerGroupHeartbeatRequest]
    ) -> Handler[ConsumerGroupHeartbeatRequest]:
        def handle(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Result:
            api_key, topics = ApiKey.CONSUMER_GROUP_HEARTBEAT, req.subscribed_topic_names or ()
            refusal = heartbeat_refusal(self, ctx, api_key, req, req.group_id, topics)
            return refusal if refusal is not None else inner(ctx, req)

        return handle

    def _streams_heartbeat(
        self, inner: Handler[StreamsGroupHeartbeatRequest]
    ) -> Handler[StreamsGroupHeartbeatRequest]:
        """READ on the group, DESCRIBE on the topology's source topics (Kafka's KafkaApis)."""

        def handle(ctx: RequestContext, req: StreamsGroupHeartbeatRequest) -> Result:
            api_key = ApiKey.STREAMS_GROUP_HEARTBEAT
            if not self._group(ctx, Operation.READ, req.group_id):
                return _denied(ctx, api_key, req, GROUP_DENIED)
            sources = {
                t for s in (req.topology.subtopologies if req.topology else ()) for t in s.source_topics
            }
            denied = [t for t in sources if not self._topic(ctx, Operation.DESCRIBE, t)]
            if denied:
                message = f"Not authorized to describe topics: {', '.join(sorted(denied))}."
                return _denied(ctx, api_key, req, TOPIC_DENIED, message)
            return inner(ctx, req)

        return handle

    def _streams_describe(
        self, inner: Handler[StreamsGroupDescribeRequest]
    ) -> Handler[StreamsGroupDescribeRequest]:
        return self._describe(
            inner,
            lambda group_id: StreamsGroupDescribedGroup(error_code=GROUP_DENIED, group_id=group_id),
            operations_from_version=0,
            operations_of_errors=False,
        )

    def _list(self, inner: Handler[ListGroupsRequest]) -> Handler[ListGroupsRequest]:
        def handle(ctx: RequestContext, req: ListGroupsRequest) -> Result:
            # Both checks only filter the listing: a denial is not logged (Kafka: logIfDenied=false).
            if not self.allowed(
                ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
            ):

                def only_described(response: ListGroupsResponse) -> None:
                    response.groups = [
                        g
                        for g in response.groups
                        if self._group(ctx, Operation.DESCRIBE, g.group_id, log_denied=False)
                    ]

                amend(ctx, only_described)
            return inner(ctx, req)

        return handle

    def _delete_groups(self, inner: Handler[DeleteGroupsRequest]) -> Handler[DeleteGroupsRequest]:
        def handle(ctx: RequestContext, req: DeleteGroupsRequest) -> Result:
            denied = [g for g in req.groups_names if not self._group(ctx, Operation.DELETE, g)]
            if not denied:
                return inner(ctx, req)
            failed = error_response(
                ApiKey.DELETE_GROUPS, ctx.api_version, DeleteGroupsRequest(denied), GROUP_DENIED
            ).results
            allowed = [g for g in req.groups_names if g not in denied]
            if not allowed:
                return reply(ctx, DeleteGroupsResponse(results=failed))
            req.groups_names = allowed

            def add_denied(response: DeleteGroupsResponse) -> None:
                response.results.extend(failed)

            amend(ctx, add_denied)
            return inner(ctx, req)

        return handle

    def _delete_offsets(self, inner: Handler[OffsetDeleteRequest]) -> Handler[OffsetDeleteRequest]:
        def handle(ctx: RequestContext, req: OffsetDeleteRequest) -> Result:
            if not self._group(ctx, Operation.DELETE, req.group_id):
                return _denied(ctx, ApiKey.OFFSET_DELETE, req, GROUP_DENIED)
            denied = [t for t in req.topics if not self._topic(ctx, Operation.READ, t.name)]
            if not denied:
                return inner(ctx, req)
            failed = [
                OffsetDeleteResponseTopic(
                    name=t.name,
                    partitions=[
                        OffsetDeleteResponsePartition(p.partition_index, TOPIC_DENIED) for p in t.partitions
                    ],
                )
                for t in denied
            ]
            req.topics = [t for t in req.topics if t not in denied]

            def add_denied(response: OffsetDeleteResponse) -> None:
                if not response.error_code:
                    response.topics.extend(failed)

            amend(ctx, add_denied)
            return inner(ctx, req)

        return handle

    def _find_coordinator(self, inner: Handler[FindCoordinatorRequest]) -> Handler[FindCoordinatorRequest]:
        def handle(ctx: RequestContext, req: FindCoordinatorRequest) -> Result:
            if req.key_type != 0:
                return inner(ctx, req)

            def edit(response: FindCoordinatorResponse) -> None:
                if ctx.api_version >= 4:
                    for i, c in enumerate(response.coordinators):
                        if not self._group(ctx, Operation.DESCRIBE, c.key):
                            response.coordinators[i] = Coordinator(
                                c.key, -1, "", -1, GROUP_DENIED, "Not authorized"
                            )
                elif not self._group(ctx, Operation.DESCRIBE, req.key):
                    response.error_code, response.error_message = GROUP_DENIED, "Not authorized"
                    response.node_id, response.host, response.port = -1, "", -1

            amend(ctx, edit)
            return inner(ctx, req)

        return handle

    # ---- ACL APIs ----------------------------------------------------------------------------------
    def _configs_denied(self, operation: int) -> Refusal:
        """``operation`` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config resource: on its group, its
        topic, or the cluster for a broker, as Kafka checks them."""

        def denied(ctx: RequestContext, resource_type: int, name: str) -> tuple[int, str | None] | None:
            if resource_type == config_resources.GROUP:
                return None if self._group(ctx, operation, name) else (GROUP_DENIED, None)
            if resource_type == config_resources.TOPIC:
                return None if self._topic(ctx, operation, name) else (TOPIC_DENIED, None)
            if resource_type == config_resources.BROKER:
                return None if self._cluster(ctx, operation) else (CLUSTER_DENIED, CLUSTER_DENIED_MESSAGE)
            return None  # the handler refuses it (INVALID_REQUEST)

        return denied

    def _cluster(self, ctx: RequestContext, operation: int) -> bool:
        return self.allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def describe_acls(self, ctx: RequestContext, req: DescribeAclsRequest) -> Result:
        if not self._cluster(ctx, Operation.DESCRIBE):
            return _denied(ctx, ApiKey.DESCRIBE_ACLS, req, CLUSTER_DENIED, CLUSTER_DENIED_MESSAGE)
        acl_filter = AclFilter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                               req.principal_filter, req.host_filter, req.operation, req.permission_type)  # fmt: skip
        resources: dict[tuple[int, str, int], DescribeAclsResource] = {}
        for acl in self.authorizer.matching(acl_filter):
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            resource = resources.setdefault(key, DescribeAclsResource(*key, acls=[]))
            resource.acls.append(AclDescription(acl.principal, acl.host, acl.operation, acl.permission))
        return reply(ctx, DescribeAclsResponse(error_message=None, resources=list(resources.values())))

    def create_acls(self, ctx: RequestContext, req: CreateAclsRequest) -> Result:
        allowed = self._cluster(ctx, Operation.ALTER)
        results: list[AclCreationResult] = []
        records: list[AclRecord] = []
        for c in req.creations:
            acl = AclRecord(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                            c.operation, c.permission_type)  # fmt: skip
            error = None if allowed else CLUSTER_DENIED_MESSAGE
            error = error or validation_error(acl)
            if error is not None:
                code = CLUSTER_DENIED if not allowed else int(ErrorCode.INVALID_REQUEST)
                results.append(AclCreationResult(code, error))
            else:
                results.append(AclCreationResult(0, None))
                records.append(acl)
        response = CreateAclsResponse(results=results)
        if not records:
            return reply(ctx, response)

        def apply() -> None:
            for record in records:
                self.authorizer.add(record)

        def fail_entries(code: int) -> None:
            for result in results:
                if not result.error_code:
                    result.error_code, result.error_message = code, "could not store the ACL"

        return admin_write(ctx.reply_to, records, response, apply=apply, fail_entries=fail_entries)

    def delete_acls(self, ctx: RequestContext, req: DeleteAclsRequest) -> Result:
        if not self._cluster(ctx, Operation.ALTER):
            return _denied(ctx, ApiKey.DELETE_ACLS, req, CLUSTER_DENIED, CLUSTER_DENIED_MESSAGE)
        results: list[DeleteAclsFilterResult] = []
        gone: dict[AclRecord, None] = {}
        for f in req.filters:
            acl_filter = AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                   f.principal_filter, f.host_filter, f.operation, f.permission_type)  # fmt: skip
            matched = self.authorizer.matching(acl_filter)
            gone.update(dict.fromkeys(matched))
            results.append(
                DeleteAclsFilterResult(
                    0,
                    None,
                    [
                        DeleteAclsMatchingAcl(
                            0,
                            None,
                            a.resource_type,
                            a.resource_name,
                            a.pattern_type,
                            a.principal,
                            a.host,
                            a.operation,
                            a.permission,
                        )
                        for a in matched
                    ],
                )
            )
        response = DeleteAclsResponse(filter_results=results)
        if not gone:
            return reply(ctx, response)

        def apply() -> None:
            for acl in gone:
                self.authorizer.remove(acl)

        def fail_entries(code: int) -> None:
            for result in results:
                result.error_code, result.error_message, result.matching_acls = code, "could not delete", []

        tombstones = [AclTombstone(acl) for acl in gone]
        return admin_write(ctx.reply_to, tombstones, response, apply=apply, fail_entries=fail_entries)


_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def install_security_disabled(routes: Routes) -> None:
    """The ACL APIs on a server without an authorizer (Kafka: SECURITY_DISABLED)."""

    def describe(ctx: RequestContext, req: DescribeAclsRequest) -> Result:
        return _denied(ctx, ApiKey.DESCRIBE_ACLS, req, SECURITY_DISABLED, _NO_AUTHORIZER)

    def create(ctx: RequestContext, req: CreateAclsRequest) -> Result:
        return _denied(ctx, ApiKey.CREATE_ACLS, req, SECURITY_DISABLED, _NO_AUTHORIZER)

    def delete(ctx: RequestContext, req: DeleteAclsRequest) -> Result:
        return _denied(ctx, ApiKey.DELETE_ACLS, req, SECURITY_DISABLED, _NO_AUTHORIZER)

    routes.add(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest, describe)
    routes.add(ApiKey.CREATE_ACLS, CreateAclsRequest, create)
    routes.add(ApiKey.DELETE_ACLS, DeleteAclsRequest, delete)
