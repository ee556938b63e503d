"""ConsumerGroupHeartbeat (v0-1): validation in Kafka's order, the steady fast path, and the full
handling of a heartbeat (docs/groups.md#validation, docs/groups.md#reconciliation)."""

from __future__ import annotations

import logging

from coordinator.core.consumer.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    MemberState,
)
from coordinator.core.consumer.membership import ConsumerMembership
from coordinator.core.consumer.records import GroupWrites
from coordinator.core.consumer.responses import Rejected, error_response, heartbeat_response
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.epoch_groups import invalid_ids
from coordinator.core.errors import (
    GROUP_ID_NOT_FOUND,
    INVALID_REQUEST,
    UNSUPPORTED_ASSIGNOR,
)
from coordinator.core.events import (
    SUBSCRIPTION_CHANGED,
)
from coordinator.core.members import kafka_client_host
from protocol.messages import consumer_group_heartbeat as cgh

log = logging.getLogger(__name__)


class ConsumerHeartbeat(ConsumerMembership):
    """ConsumerGroupHeartbeat."""

    def heartbeat(self, ctx: RequestContext, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects) -> None:
        if self._steady_heartbeat(ctx, req, fx):
            return
        converted = len(self.groups)
        try:
            self._heartbeat(ctx, req, fx)
        except Rejected as rejected:
            fx.reply(ctx.reply_to, error_response(rejected.code, rejected.message))
            group = self.groups.get(req.group_id)
            if group is not None and len(self.groups) != converted:
                # The group was created or upgraded before the member was refused: store it.
                self.finish(None, group, GroupWrites(), None, fx)

    def _steady_heartbeat(
        self, ctx: RequestContext, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects
    ) -> bool:
        """The common case on its own path: a reconciled member of a settled group heartbeats and
        changes nothing. Returns False whenever the full handling might do anything else."""
        group = self.groups.get(req.group_id)
        if (
            group is None
            or req.member_epoch <= 0
            or group.group_epoch != req.member_epoch
            or group.assignment_epoch != req.member_epoch
            or group.catalog_version != self.catalog.version
            or group.unwritten_group
            or group.unwritten_members
            or req.topic_partitions is not None
            or req.subscribed_topic_names is not None
            or req.subscribed_topic_regex is not None
            or req.server_assignor is not None
            or req.instance_id is not None
            or req.rack_id is not None
            or req.rebalance_timeout_ms != -1
        ):
            return False
        member = group.members.get(req.member_id)
        if (
            member is None
            or member.member_epoch != req.member_epoch
            or member.state is not MemberState.STABLE
            or member.client_id != ctx.client_id
            or member.client_host != kafka_client_host(ctx.client_host)
        ):
            return False
        self.reschedule_session(group, member)
        interval = self._heartbeat_interval(group, member)
        fx.reply(ctx.reply_to, heartbeat_response(member.member_id, member.member_epoch, interval, None))
        return True

    def _validate(self, version: int, req: cgh.ConsumerGroupHeartbeatRequest) -> None:
        """docs/groups.md#validation, in Kafka's order: INVALID_REQUEST with a message, then UNSUPPORTED_ASSIGNOR."""
        epoch = req.member_epoch
        member_id = req.member_id if version >= 1 else None
        invalid = invalid_ids(member_id, req.group_id, req.instance_id, req.rack_id)
        if invalid is not None:
            raise Rejected(INVALID_REQUEST, invalid)
        regex = req.subscribed_topic_regex if version >= 1 else None
        if epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise Rejected(INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise Rejected(INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if version == 0 and not req.subscribed_topic_names:
                raise Rejected(INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if req.subscribed_topic_names is None and regex is None:
                raise Rejected(
                    INVALID_REQUEST,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                )
        elif epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise Rejected(INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_STATIC_EPOCH:
            raise Rejected(INVALID_REQUEST, "MemberEpoch is invalid.")
        if epoch != JOIN_EPOCH and not req.member_id.strip():
            raise Rejected(INVALID_REQUEST, "MemberId can't be empty.")
        if req.rebalance_timeout_ms < -1:
            raise Rejected(INVALID_REQUEST, "RebalanceTimeoutMs must be -1 or a non-negative duration.")
        assignor = req.server_assignor
        if assignor is not None and assignor not in self.config.group_consumer_assignors:
            raise Rejected(
                UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.group_consumer_assignors)}.",
            )
        if regex:
            self._regex(regex)

    def _heartbeat(self, ctx: RequestContext, req: cgh.ConsumerGroupHeartbeatRequest, fx: Effects) -> None:
        version = ctx.api_version
        self._validate(version, req)
        epoch = req.member_epoch
        group_id = req.group_id
        group = self.groups.get(group_id)
        if group is None:
            if epoch != JOIN_EPOCH:
                raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            group = self._create_group(group_id, fx)
        if epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            self._leave(ctx, group, req, fx)
            return

        records = GroupWrites()
        member, is_new = self._member_for(ctx, group, req, records)
        owned = self._owned(req.topic_partitions)
        full = epoch == JOIN_EPOCH or (
            req.rebalance_timeout_ms != -1
            and (
                req.subscribed_topic_names is not None
                or (version >= 1 and req.subscribed_topic_regex is not None)
            )
            and req.topic_partitions is not None
        )

        # Apply the fields the request changes (null / -1 = unchanged).
        subscription_changed = is_new
        if req.subscribed_topic_names is not None:
            names = tuple(req.subscribed_topic_names)
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                member.resolved_version = -1
                subscription_changed = True
        if version >= 1 and req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                member.resolved_version = -1
                subscription_changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            subscription_changed = True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            subscription_changed = True
        if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            records.member(member.member_id)
        client_host = kafka_client_host(ctx.client_host)
        if member.client_id != ctx.client_id or member.client_host != client_host:
            member.client_id, member.client_host = ctx.client_id, client_host
            records.member(member.member_id)
        if subscription_changed:
            records.member(member.member_id)
            if not is_new:
                self.event(
                    group,
                    SUBSCRIPTION_CHANGED,
                    f"member {member.member_id} changed its subscription",
                    member.member_id,
                )

        self.update_epochs(group, subscription_changed, records)

        assigned_changed = self.reconcile_member(group, member, owned, records)
        self.events.member_reconciled(group, member.member_id)
        self.reschedule_session(group, member)
        response = heartbeat_response(
            member.member_id,
            member.member_epoch,
            self._heartbeat_interval(group, member),
            # Also when the member is behind (an older epoch, or it reports partitions other than
            # its assignment): a response that carried its assignment was lost, or replaced by an
            # error after a failed write whose state memory kept.
            self._wire_assignment(member.assigned)
            if full
            or assigned_changed
            or epoch != member.member_epoch
            or (owned is not None and owned != member.assigned)
            else None,
        )
        self.finish(ctx, group, records, response, fx)
