"""Authorization at the API layer (Kafka's KafkaApis checks, before the group coordinator) and
the ACL APIs (DescribeAcls / CreateAcls / DeleteAcls, persisted through the storage).

Installed only when ``authorizer.enabled`` is true: it wraps the group handlers, so the
plaintext hot path without an authorizer is unchanged.

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else GROUP_AUTHORIZATION_FAILED.
* OffsetCommit: READ on the group (else every partition 30), READ on each topic (else 29 per partition).
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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import DescribedGroup as ConsumerGroupDescribedGroup
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from protocol.messages.create_acls import AclCreationResult, CreateAclsRequest, CreateAclsResponse
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.messages.delete_groups import DeletableGroupResult, DeleteGroupsResponse
from protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from protocol.messages.describe_groups import DescribedGroup
from protocol.messages.find_coordinator import Coordinator
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.join_group import JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupResponse
from protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from protocol.messages.sync_group import SyncGroupResponse
from storage.records import AclRecord, AclTombstone

Handler = Callable[[RequestContext, Any], Result]

GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
SECURITY_DISABLED = int(ErrorCode.SECURITY_DISABLED)


def _reply(ctx: RequestContext, response: Any) -> Result:
    return Result(replies=[(ctx.reply_to, response)])


class _Rewriting:
    """A ReplyTo that edits the core's response before it is sent."""

    __slots__ = ("edit", "inner")

    def __init__(self, inner: Any, edit: Callable[[Any], None]) -> None:
        self.inner = inner
        self.edit = edit

    def send(self, response: Any) -> None:
        self.edit(response)
        self.inner.send(response)


class AclLayer:
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

    # ---- checks ----------------------------------------------------------------------------------
    def allowed(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
        return self.authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)

    def _group(self, ctx: RequestContext, operation: int, group_id: str) -> bool:
        return self.allowed(ctx, operation, ResourceType.GROUP, group_id)

    def _topic(self, ctx: RequestContext, operation: int, topic: str) -> bool:
        return self.allowed(ctx, operation, ResourceType.TOPIC, topic)

    # ---- wrapping ----------------------------------------------------------------------------------
    def wrap(self, handlers: dict[int, Handler]) -> None:
        h = dict(handlers)
        handlers[ApiKey.JOIN_GROUP] = self._simple(h[ApiKey.JOIN_GROUP], self._join_denied)
        handlers[ApiKey.SYNC_GROUP] = self._simple(
            h[ApiKey.SYNC_GROUP], lambda c, r: SyncGroupResponse(error_code=GROUP_DENIED)
        )
        handlers[ApiKey.HEARTBEAT] = self._simple(
            h[ApiKey.HEARTBEAT], lambda c, r: HeartbeatResponse(error_code=GROUP_DENIED)
        )
        handlers[ApiKey.LEAVE_GROUP] = self._simple(
            h[ApiKey.LEAVE_GROUP], lambda c, r: LeaveGroupResponse(error_code=GROUP_DENIED)
        )
        handlers[ApiKey.OFFSET_COMMIT] = self._commit(h[ApiKey.OFFSET_COMMIT])
        handlers[ApiKey.OFFSET_FETCH] = self._fetch(h[ApiKey.OFFSET_FETCH])
        handlers[ApiKey.DESCRIBE_GROUPS] = self._describe(h[ApiKey.DESCRIBE_GROUPS])
        handlers[ApiKey.LIST_GROUPS] = self._list(h[ApiKey.LIST_GROUPS])
        handlers[ApiKey.DELETE_GROUPS] = self._delete_groups(h[ApiKey.DELETE_GROUPS])
        handlers[ApiKey.OFFSET_DELETE] = self._delete_offsets(h[ApiKey.OFFSET_DELETE])
        handlers[ApiKey.FIND_COORDINATOR] = self._find_coordinator(h[ApiKey.FIND_COORDINATOR])
        handlers[ApiKey.CONSUMER_GROUP_HEARTBEAT] = self._consumer_heartbeat(
            h[ApiKey.CONSUMER_GROUP_HEARTBEAT]
        )
        handlers[ApiKey.CONSUMER_GROUP_DESCRIBE] = self._describe(
            h[ApiKey.CONSUMER_GROUP_DESCRIBE],
            lambda group_id: ConsumerGroupDescribedGroup(error_code=GROUP_DENIED, group_id=group_id),
            operations_from_version=0,
            operations_of_errors=False,
        )
        handlers[ApiKey.DESCRIBE_ACLS] = self.describe_acls
        handlers[ApiKey.CREATE_ACLS] = self.create_acls
        handlers[ApiKey.DELETE_ACLS] = self.delete_acls

    @staticmethod
    def _join_denied(ctx: RequestContext, req: Any) -> JoinGroupResponse:
        return JoinGroupResponse(
            error_code=GROUP_DENIED,
            generation_id=-1,
            protocol_name=None if ctx.api_version >= 7 else "",
            member_id="",
        )

    def _simple(self, inner: Handler, denied: Callable[[RequestContext, Any], Any]) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            if not self._group(ctx, Operation.READ, req.group_id):
                return _reply(ctx, denied(ctx, req))
            return inner(ctx, req)

        return handle

    def _commit(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            group_ok = self._group(ctx, Operation.READ, req.group_id)
            denied = [t for t in req.topics if not group_ok or not self._topic(ctx, Operation.READ, t.name)]
            if not denied:
                return inner(ctx, req)
            code = TOPIC_DENIED if group_ok else GROUP_DENIED
            failed = [
                OffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
                )
                for t in denied
            ]
            allowed = [t for t in req.topics if t not in denied]
            if not allowed:
                return _reply(ctx, OffsetCommitResponse(topics=failed))
            req.topics = allowed
            ctx.reply_to = _Rewriting(ctx.reply_to, lambda response: response.topics.extend(failed))
            return inner(ctx, req)

        return handle

    def _fetch(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            ctx.reply_to = _Rewriting(ctx.reply_to, lambda response: self._filter_fetch(ctx, req, response))
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

    def _filter_fetch(self, ctx: RequestContext, req: Any, response: Any) -> None:
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

    def _describe(
        self,
        inner: Handler,
        denied_entry: Callable[[str], Any] = lambda group_id: DescribedGroup(
            error_code=GROUP_DENIED, group_id=group_id
        ),
        operations_from_version: int = 3,
        operations_of_errors: bool = True,
    ) -> Handler:
        """DescribeGroups and ConsumerGroupDescribe: DESCRIBE per group, and the authorized
        operations computed from the ACLs when asked for (ConsumerGroupDescribe: only for groups
        it found)."""

        def handle(ctx: RequestContext, req: Any) -> Result:
            def edit(response: Any) -> None:
                wanted = ctx.api_version >= operations_from_version and req.include_authorized_operations
                for i, group in enumerate(response.groups):
                    if not self._group(ctx, Operation.DESCRIBE, group.group_id):
                        response.groups[i] = denied_entry(group.group_id)
                    elif wanted and (operations_of_errors or group.error_code == 0):
                        group.authorized_operations = self.authorizer.authorized_operations(
                            ctx.principal, ctx.client_host, ResourceType.GROUP, group.group_id
                        )

            ctx.reply_to = _Rewriting(ctx.reply_to, edit)
            return inner(ctx, req)

        return handle

    def _consumer_heartbeat(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            if not self._group(ctx, Operation.READ, req.group_id):
                return _reply(ctx, ConsumerGroupHeartbeatResponse(error_code=GROUP_DENIED))
            denied = [
                t for t in req.subscribed_topic_names or () if not self._topic(ctx, Operation.DESCRIBE, t)
            ]
            if denied:
                return _reply(
                    ctx,
                    ConsumerGroupHeartbeatResponse(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        error_message=f"Not authorized to describe topics: {', '.join(sorted(denied))}.",
                    ),
                )
            return inner(ctx, req)

        return handle

    def _list(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            if not self.allowed(ctx, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
                ctx.reply_to = _Rewriting(
                    ctx.reply_to,
                    lambda response: setattr(
                        response,
                        "groups",
                        [g for g in response.groups if self._group(ctx, Operation.DESCRIBE, g.group_id)],
                    ),
                )
            return inner(ctx, req)

        return handle

    def _delete_groups(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            denied = [g for g in req.groups_names if not self._group(ctx, Operation.DELETE, g)]
            if not denied:
                return inner(ctx, req)
            failed = [DeletableGroupResult(g, GROUP_DENIED) for g in denied]
            allowed = [g for g in req.groups_names if g not in denied]
            if not allowed:
                return _reply(ctx, DeleteGroupsResponse(results=failed))
            req.groups_names = allowed
            ctx.reply_to = _Rewriting(ctx.reply_to, lambda response: response.results.extend(failed))
            return inner(ctx, req)

        return handle

    def _delete_offsets(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            if not self._group(ctx, Operation.DELETE, req.group_id):
                return _reply(ctx, OffsetDeleteResponse(error_code=GROUP_DENIED))
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

            def edit(response: Any) -> None:
                if not response.error_code:
                    response.topics.extend(failed)

            ctx.reply_to = _Rewriting(ctx.reply_to, edit)
            return inner(ctx, req)

        return handle

    def _find_coordinator(self, inner: Handler) -> Handler:
        def handle(ctx: RequestContext, req: Any) -> Result:
            if req.key_type != 0:
                return inner(ctx, req)

            def edit(response: Any) -> None:
                if ctx.api_version >= 4:
                    for i, c in enumerate(response.coordinators):
                        if not self._group(ctx, Operation.DESCRIBE, c.key):
                            response.coordinators[i] = Coordinator(
                                c.key, -1, "", -1, GROUP_DENIED, "Not authorized"
                            )
                elif not self._group(ctx, Operation.DESCRIBE, req.key):
                    response.error_code, response.error_message = GROUP_DENIED, "Not authorized"
                    response.node_id, response.host, response.port = -1, "", -1

            ctx.reply_to = _Rewriting(ctx.reply_to, edit)
            return inner(ctx, req)

        return handle

    # ---- ACL APIs ----------------------------------------------------------------------------------
    def _cluster(self, ctx: RequestContext, operation: int) -> bool:
        return self.allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def describe_acls(self, ctx: RequestContext, req: DescribeAclsRequest) -> Result:
        if not self._cluster(ctx, Operation.DESCRIBE):
            return _reply(
                ctx,
                DescribeAclsResponse(
                    error_code=CLUSTER_DENIED, error_message="Cluster authorization failed."
                ),
            )
        acl_filter = AclFilter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                               req.principal_filter, req.host_filter, req.operation, req.permission_type)  # fmt: skip
        resources: dict[tuple[int, str, int], DescribeAclsResource] = {}
        for acl in self.authorizer.matching(acl_filter):
            key = (acl.resource_type, acl.resource_name, acl.pattern_type)
            resource = resources.setdefault(key, DescribeAclsResource(*key, acls=[]))
            resource.acls.append(AclDescription(acl.principal, acl.host, acl.operation, acl.permission))
        return _reply(ctx, DescribeAclsResponse(error_message=None, resources=list(resources.values())))

    def create_acls(self, ctx: RequestContext, req: CreateAclsRequest) -> Result:
        allowed = self._cluster(ctx, Operation.ALTER)
        results: list[AclCreationResult] = []
        records: list[AclRecord] = []
        for c in req.creations:
            acl = AclRecord(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                            c.operation, c.permission_type)  # fmt: skip
            error = None if allowed else "Cluster authorization failed."
            error = error or validation_error(acl)
            if error is not None:
                code = CLUSTER_DENIED if not allowed else int(ErrorCode.INVALID_REQUEST)
                results.append(AclCreationResult(code, error))
            else:
                results.append(AclCreationResult(0, None))
                records.append(acl)
        response = CreateAclsResponse(results=results)
        if not records:
            return _reply(ctx, response)

        def durable(_now_ms: int) -> Result:
            for record in records:
                self.authorizer.add(record)
            return _reply(ctx, response)

        def failed(_now_ms: int, error_code: int) -> Result:
            for result in results:
                if not result.error_code:
                    result.error_code, result.error_message = error_code, "could not store the ACL"
            return _reply(ctx, response)

        return Result(records=list(records), on_durable=durable, on_failed=failed)

    def delete_acls(self, ctx: RequestContext, req: DeleteAclsRequest) -> Result:
        if not self._cluster(ctx, Operation.ALTER):
            return _reply(
                ctx,
                DeleteAclsResponse(
                    filter_results=[
                        DeleteAclsFilterResult(CLUSTER_DENIED, "Cluster authorization failed.")
                        for _ in req.filters
                    ]
                ),
            )
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
            return _reply(ctx, response)

        def durable(_now_ms: int) -> Result:
            for acl in gone:
                self.authorizer.remove(acl)
            return _reply(ctx, response)

        def failed(_now_ms: int, error_code: int) -> Result:
            for result in results:
                result.error_code, result.error_message, result.matching_acls = (
                    error_code,
                    "could not delete",
                    [],
                )
            return _reply(ctx, response)

        return Result(records=[AclTombstone(acl) for acl in gone], on_durable=durable, on_failed=failed)


def security_disabled(api_key: int) -> Handler:
    """The ACL APIs on a server without an authorizer (Kafka: SECURITY_DISABLED)."""
    message = "No Authorizer is configured on the broker"

    def handle(ctx: RequestContext, req: Any) -> Result:
        if api_key == ApiKey.DESCRIBE_ACLS:
            return _reply(ctx, DescribeAclsResponse(error_code=SECURITY_DISABLED, error_message=message))
        if api_key == ApiKey.CREATE_ACLS:
            return _reply(
                ctx,
                CreateAclsResponse(
                    results=[AclCreationResult(SECURITY_DISABLED, message) for _ in req.creations]
                ),
            )
        return _reply(
            ctx,
            DeleteAclsResponse(
                filter_results=[DeleteAclsFilterResult(SECURITY_DISABLED, message) for _ in req.filters]
            ),
        )

    return handle
