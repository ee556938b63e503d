"""The ACL checks of the share group APIs, as Kafka 4.4's KafkaApis applies them:

* ShareGroupHeartbeat: READ on the group, DESCRIBE on the subscribed topics;
* ShareGroupDescribe: DESCRIBE on each group, and on the topics its members are assigned;
* DescribeShareGroupOffsets: DESCRIBE on each group, DESCRIBE on each topic;
* AlterShareGroupOffsets: READ on the group, READ on each topic;
* DeleteShareGroupOffsets: DELETE on the group, READ on each topic.

(ShareFetch and ShareAcknowledge take READ on the group and on each topic: their checks belong
with their handlers.) docs/share-groups.md, "ACLs".
"""

from __future__ import annotations

from typing import Any, Final

from coordinator.api.acl_replies import GROUP_DENIED, TOPIC_DENIED, AclChecks, heartbeat_refusal
from coordinator.api.acl_replies import denied as _denied
from coordinator.api.amend import amend
from coordinator.api.routes import Handler, Routes
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.security.acl import Operation, ResourceType
from protocol.apis import ApiKey
from protocol.messages import alter_share_group_offsets as asgo
from protocol.messages import delete_share_group_offsets as dsgo
from protocol.messages import describe_share_group_offsets as offsets
from protocol.messages import share_group_describe as sgd
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

# Kafka's Errors messages.
GROUP_DENIED_MESSAGE: Final = "Group authorization failed."
TOPIC_DENIED_MESSAGE: Final = "Topic authorization failed."
DESCRIBED_TOPICS_DENIED: Final = (
    "The group has described topic(s) that the client is not authorized to describe."
)


class ShareAcls:
    def __init__(self, layer: AclChecks) -> None:
        self.layer = layer

    def install(self, routes: Routes) -> None:
        routes.wrap(ApiKey.SHARE_GROUP_HEARTBEAT, ShareGroupHeartbeatRequest, self._heartbeat)
        routes.wrap(ApiKey.SHARE_GROUP_DESCRIBE, sgd.ShareGroupDescribeRequest, self._describe)
        routes.wrap(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            offsets.DescribeShareGroupOffsetsRequest,
            self._describe_offsets,
        )
        routes.wrap(ApiKey.ALTER_SHARE_GROUP_OFFSETS, asgo.AlterShareGroupOffsetsRequest, self._alter_offsets)
        routes.wrap(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, dsgo.DeleteShareGroupOffsetsRequest, self._delete_offsets
        )

    def _group(self, ctx: RequestContext, operation: int, group_id: str) -> bool:
        return self.layer.allowed(ctx, operation, ResourceType.GROUP, group_id)

    def _topic(self, ctx: RequestContext, operation: int, topic: str) -> bool:
        return self.layer.allowed(ctx, operation, ResourceType.TOPIC, topic)

    def _heartbeat(self, inner: Handler[ShareGroupHeartbeatRequest]) -> Handler[ShareGroupHeartbeatRequest]:
        def handle(ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> Result:
            api_key, topics = ApiKey.SHARE_GROUP_HEARTBEAT, req.subscribed_topic_names or ()
            refusal = heartbeat_refusal(self.layer, ctx, api_key, req, req.group_id, topics)
            return refusal if refusal is not None else inner(ctx, req)

        return handle

    def _describe(
        self, inner: Handler[sgd.ShareGroupDescribeRequest]
    ) -> Handler[sgd.ShareGroupDescribeRequest]:
        def handle(ctx: RequestContext, req: sgd.ShareGroupDescribeRequest) -> Result:
            def edit(response: sgd.ShareGroupDescribeResponse) -> None:
                for i, group in enumerate(response.groups):
                    if not self._group(ctx, Operation.DESCRIBE, group.group_id):
                        response.groups[i] = sgd.DescribedGroup(
                            error_code=GROUP_DENIED, group_id=group.group_id
                        )
                        continue
                    if group.error_code:
                        continue
                    topics = {
                        tp.topic_name
                        for member in group.members
                        if member.assignment is not None
                        for tp in member.assignment.topic_partitions
                    }
                    if any(not self._topic(ctx, Operation.DESCRIBE, t) for t in sorted(topics)):
                        response.groups[i] = sgd.DescribedGroup(
                            error_code=TOPIC_DENIED,
                            error_message=DESCRIBED_TOPICS_DENIED,
                            group_id=group.group_id,
                        )
                    elif req.include_authorized_operations:
                        group.authorized_operations = self.layer.authorizer.authorized_operations(
                            ctx.principal, ctx.client_host, ResourceType.GROUP, group.group_id
                        )

            amend(ctx, edit)
            return inner(ctx, req)

        return handle

    def _describe_offsets(
        self, inner: Handler[offsets.DescribeShareGroupOffsetsRequest]
    ) -> Handler[offsets.DescribeShareGroupOffsetsRequest]:
        def handle(ctx: RequestContext, req: offsets.DescribeShareGroupOffsetsRequest) -> Result:
            def edit(response: offsets.DescribeShareGroupOffsetsResponse) -> None:
                for i, group in enumerate(response.groups):
                    if not self._group(ctx, Operation.DESCRIBE, group.group_id):
                        response.groups[i] = offsets.DescribeShareGroupOffsetsResponseGroup(
                            group_id=group.group_id,
                            error_code=GROUP_DENIED,
                            error_message=GROUP_DENIED_MESSAGE,
                        )
                        continue
                    asked = next((g for g in req.groups if g.group_id == group.group_id), None)
                    every_topic = asked is not None and asked.topics is None
                    kept = []
                    for topic in group.topics:
                        if self._topic(ctx, Operation.DESCRIBE, topic.topic_name):
                            kept.append(topic)
                        elif not every_topic:  # a named topic answers the denial; the others are left out
                            kept.append(_denied_topic(topic))
                    group.topics = kept

            amend(ctx, edit)
            return inner(ctx, req)

        return handle

    def _alter_offsets(
        self, inner: Handler[asgo.AlterShareGroupOffsetsRequest]
    ) -> Handler[asgo.AlterShareGroupOffsetsRequest]:
        def handle(ctx: RequestContext, req: asgo.AlterShareGroupOffsetsRequest) -> Result:
            if not self._group(ctx, Operation.READ, req.group_id):
                return _denied(ctx, ApiKey.ALTER_SHARE_GROUP_OFFSETS, req, GROUP_DENIED, GROUP_DENIED_MESSAGE)
            denied = [t for t in req.topics if not self._topic(ctx, Operation.READ, t.topic_name)]
            if not denied:
                return inner(ctx, req)
            failed = [
                asgo.AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    partitions=[
                        asgo.AlterShareGroupOffsetsResponsePartition(
                            partition_index=p.partition_index,
                            error_code=TOPIC_DENIED,
                            error_message=TOPIC_DENIED_MESSAGE,
                        )
                        for p in t.partitions
                    ],
                )
                for t in denied
            ]
            req.topics = [t for t in req.topics if t not in denied]

            def add_denied(response: asgo.AlterShareGroupOffsetsResponse) -> None:
                if not response.error_code:
                    response.responses.extend(failed)

            amend(ctx, add_denied)
            return inner(ctx, req)

        return handle

    def _delete_offsets(
        self, inner: Handler[dsgo.DeleteShareGroupOffsetsRequest]
    ) -> Handler[dsgo.DeleteShareGroupOffsetsRequest]:
        def handle(ctx: RequestContext, req: dsgo.DeleteShareGroupOffsetsRequest) -> Result:
            if not self._group(ctx, Operation.DELETE, req.group_id):
                return _denied(
                    ctx, ApiKey.DELETE_SHARE_GROUP_OFFSETS, req, GROUP_DENIED, GROUP_DENIED_MESSAGE
                )
            denied = [t for t in req.topics if not self._topic(ctx, Operation.READ, t.topic_name)]
            if not denied:
                return inner(ctx, req)
            failed = [
                dsgo.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name, error_code=TOPIC_DENIED, error_message=TOPIC_DENIED_MESSAGE
                )
                for t in denied
            ]
            req.topics = [t for t in req.topics if t not in denied]

            def add_denied(response: dsgo.DeleteShareGroupOffsetsResponse) -> None:
                if not response.error_code:
                    response.responses.extend(failed)

            amend(ctx, add_denied)
            return inner(ctx, req)

        return handle


def _denied_topic(topic: Any) -> offsets.DescribeShareGroupOffsetsResponseTopic:
    return offsets.DescribeShareGroupOffsetsResponseTopic(
        topic_name=topic.topic_name,
        partitions=[
            offsets.DescribeShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index,
                start_offset=0,
                error_code=TOPIC_DENIED,
                error_message=TOPIC_DENIED_MESSAGE,
            )
            for p in topic.partitions
        ],
    )
