"""StreamsGroupHeartbeat (v0-1): validation in Kafka's order, members joining, leaving and
fenced, the topology, and the reply (docs/streams-groups.md#the-heartbeat)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from coordinator.core.assignment_interval import assignment_due
from coordinator.core.clock import ShardClock
from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import (
    STREAMS_ASSIGNMENT_INTERVAL_MS,
    STREAMS_HEARTBEAT_INTERVAL_MS,
    STREAMS_INITIAL_REBALANCE_DELAY_MS,
    STREAMS_NUM_STANDBY_REPLICAS,
    STREAMS_SESSION_TIMEOUT_MS,
    DynamicGroupConfigs,
)
from coordinator.core.effects import Effects
from coordinator.core.epoch_groups import invalid_ids
from coordinator.core.errors import (
    FENCED_MEMBER_EPOCH,
    GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED,
    INVALID_REQUEST,
    STREAMS_INVALID_TOPOLOGY,
    STREAMS_INVALID_TOPOLOGY_EPOCH,
    STREAMS_TOPOLOGY_FENCED,
    UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID,
    consumer_write_error,
)
from coordinator.core.events import MEMBER_LEFT, GroupEvents
from coordinator.core.group import EMPTY_CATALOG, TopicCatalog
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.members import kafka_client_host, static_member_check
from coordinator.core.registry import GroupRegistry
from coordinator.core.streams.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    MemberState,
    StreamsGroup,
    StreamsMember,
    TaskMap,
    TaskSets,
)
from coordinator.core.streams.history import StreamsHistory
from coordinator.core.streams.reconcile import compute_target, reconcile
from coordinator.core.streams.records import group_record, member_record
from coordinator.core.streams.topology import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    SHUTDOWN_APPLICATION,
    ConfiguredTopology,
    InvalidTopology,
    Topology,
    configure,
    from_request,
)
from coordinator.core.timers import TimerKey, Timers
from protocol.messages import streams_group_heartbeat as sgh
from storage.records import Record, StreamsGroupRecord, StreamsMemberRecord, StreamsMemberTombstone

log = logging.getLogger(__name__)

StreamsRow = StreamsGroupRecord | StreamsMemberRecord

SESSION_TIMER = "streams-session"
REBALANCE_TIMER = "streams-rebalance"
# Kafka's initial rebalance delay of a new streams group: no assignment until it fires.
INITIAL_DELAY_TIMER = "streams-initial-delay"
INITIAL_DELAY_DETAIL = "Assignment delayed due to the configured initial rebalance delay."
# A target wanted sooner than group.streams.assignment.interval.ms after the last one waits for
# this timer (docs/streams-groups.md#the-assignment-interval).
ASSIGNMENT_TIMER = "streams-assignment"
ASSIGNMENT_INTERVAL_DETAIL = "Assignment delayed due to the configured assignment interval."
# Kafka's defaults of group.streams.task.offset.interval.ms and acceptable.recovery.lag.
TASK_OFFSET_INTERVAL_MS = 60000
ACCEPTABLE_RECOVERY_LAG = 10000


class Rejected(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(code: int, message: str | None) -> sgh.StreamsGroupHeartbeatResponse:
    return sgh.StreamsGroupHeartbeatResponse(error_code=code, error_message=message, status=None)


def _wire_tasks(tasks: TaskMap) -> list[sgh.TaskIds]:
    return [sgh.TaskIds(s, sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def _owned(tasks: list[sgh.TaskIds] | None) -> TaskMap | None:
    if tasks is None:
        return None
    out: dict[str, set[int]] = {}
    for t in tasks:
        out.setdefault(t.subtopology_id, set()).update(t.partitions)
    return {s: frozenset(ps) for s, ps in out.items() if ps}


def _offsets(offsets: list[sgh.TaskOffset]) -> dict[tuple[str, int], int]:
    return {(o.subtopology_id, o.partition): o.offset for o in offsets}


class StreamsHeartbeat:
    """The streams groups of one shard: StreamsGroupHeartbeat."""

    def __init__(
        self,
        config: BrokerGroupSettings,
        timers: Timers[TimerKey],
        clock: ShardClock,
        registry: GroupRegistry,
        group_configs: DynamicGroupConfigs | None = None,
        events: GroupEvents | None = None,
    ) -> None:
        self.config = config
        self.history = StreamsHistory(events)
        # The streams.* group configs override the broker settings per group (docs/streams-groups.md#group-configs).
        self.group_configs = group_configs or DynamicGroupConfigs(config)
        self.timers = timers
        self.clock = clock
        self.registry = registry
        self.groups: dict[str, StreamsGroup] = {}
        self.catalog: TopicCatalog = EMPTY_CATALOG
        # The rows last written of each group (coordinator/core/streams/records.py): a write
        # carries only the rows that changed.
        self.written: dict[str, dict[object, StreamsRow]] = {}

    # -- validation ------------------------------------------------------------------------

    @staticmethod
    def validate(req: sgh.StreamsGroupHeartbeatRequest) -> None:
        """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid, in its order."""
        invalid = invalid_ids(req.member_id, req.group_id, req.instance_id, req.rack_id)
        if invalid is not None:
            raise Rejected(INVALID_REQUEST, invalid)
        epoch = req.member_epoch
        if epoch == JOIN_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise Rejected(INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.active_tasks is None or req.active_tasks:
                raise Rejected(INVALID_REQUEST, "ActiveTasks must be empty when (re-)joining.")
            if req.standby_tasks is None or req.standby_tasks:
                raise Rejected(INVALID_REQUEST, "StandbyTasks must be empty when (re-)joining.")
            if req.warmup_tasks is None or req.warmup_tasks:
                raise Rejected(INVALID_REQUEST, "WarmupTasks must be empty when (re-)joining.")
            if req.topology is None:
                raise Rejected(INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
            if req.process_id is None or not req.process_id.strip():
                raise Rejected(INVALID_REQUEST, "ProcessId can't be empty.")
        elif epoch == LEAVE_STATIC_EPOCH:
            if req.instance_id is None:
                raise Rejected(INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_STATIC_EPOCH:
            raise Rejected(INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.rebalance_timeout_ms < -1:
            raise Rejected(INVALID_REQUEST, "RebalanceTimeoutMs must be -1 or a non-negative duration.")
        reported = [req.active_tasks is None, req.standby_tasks is None, req.warmup_tasks is None]
        if epoch > 0 and any(reported) and not all(reported):
            raise Rejected(
                INVALID_REQUEST,
                "If one of ActiveTasks, StandbyTasks and WarmupTasks is set, all must be set.",
            )

    # -- the heartbeat -----------------------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, req: sgh.StreamsGroupHeartbeatRequest, fx: Effects) -> None:
        try:
            response, group = self._heartbeat(ctx, req)
        except Rejected as rejected:
            fx.reply(ctx.reply_to, error_response(rejected.code, rejected.message))
            return
        self.persist(group, fx)
        fx.reply(ctx.reply_to, response, lambda code: error_response(consumer_write_error(code), None))

    def persist(self, group: StreamsGroup, fx: Effects) -> None:
        """Write the group's rows that changed since the last write (a member gone: its
        tombstone). A failed write forgets what was written, so that the next one rewrites all."""
        previous = self.written.get(group.group_id, {})
        rows: dict[object, StreamsRow] = {group.group_id: group_record(group)}
        for member in group.members.values():
            row = member_record(group, member)
            rows[row.key] = row
        changed: list[Record] = [row for key, row in rows.items() if previous.get(key) != row]
        changed += [
            StreamsMemberTombstone(group.group_id, key[1])
            for key in previous
            if isinstance(key, tuple) and key not in rows
        ]
        if not changed:
            return
        self.written[group.group_id] = rows
        group_id = group.group_id

        def forget(out: Effects, code: int) -> None:
            self.written.pop(group_id, None)

        fx.write(changed, on_failed=forget)

    def _heartbeat(
        self, ctx: RequestContext, req: sgh.StreamsGroupHeartbeatRequest
    ) -> tuple[sgh.StreamsGroupHeartbeatResponse, StreamsGroup]:
        self.validate(req)
        group = self.groups.get(req.group_id)
        if group is None:
            if self.registry.holds(req.group_id):
                raise Rejected(GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group.")
            if req.member_epoch != JOIN_EPOCH:
                raise Rejected(GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
            if self.registry.at_group_limit():
                raise Rejected(GROUP_MAX_SIZE_REACHED, "The coordinator holds group.max.groups groups.")
            group = StreamsGroup(req.group_id, state_ms=self.clock.wall_ms)
            self.groups[req.group_id] = group
        if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(group, req), group

        member = self._member_for(ctx, group, req)
        was_empty = not group.members
        bump = member.member_epoch == JOIN_EPOCH and member.member_id not in group.members
        if req.member_epoch == JOIN_EPOCH:
            bump |= self._take_topology(group, member, req)
        bump |= self._update_member(ctx, member, req)
        joined = member.member_id not in group.members
        if joined:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            group.state_ms = self.clock.wall_ms
        bump |= self._configure(group)
        if bump:
            group.group_epoch += 1
            if was_empty:
                self._start_initial_delay(group)
        if joined:
            self.history.joined(group, member)
        owned = None
        if req.active_tasks is not None and req.standby_tasks is not None and req.warmup_tasks is not None:
            owned = TaskSets(
                _owned(req.active_tasks) or {},
                _owned(req.standby_tasks) or {},
                _owned(req.warmup_tasks) or {},
            )
        if self.delayed(group):
            changed = self._join_delayed(group, member)
        else:
            if group.group_epoch > group.assignment_epoch and self.assignment_due(group):
                self._compute_target(group)
            changed = reconcile(group, member, owned)
            self.history.maybe_reconciled(group)
        self._schedule_rebalance(group, member)
        self.reschedule_session(group, member)
        member.last_heartbeat_ms = self.clock.now_ms
        if req.shutdown_application:
            group.shutdown_requested = True
        full = (
            req.member_epoch == JOIN_EPOCH
            or changed
            or req.member_epoch != member.member_epoch
            or (owned is not None and owned != member.assigned)
        )
        return self._response(group, member, req, full, ctx.api_version), group

    # -- the initial rebalance delay ------------------------------------------------------------

    def initial_delay_ms(self, group: StreamsGroup) -> int:
        return self.group_configs.value(group.group_id, STREAMS_INITIAL_REBALANCE_DELAY_MS)

    def standby_replicas(self, group: StreamsGroup) -> int:
        return self.group_configs.value(group.group_id, STREAMS_NUM_STANDBY_REPLICAS)

    def _start_initial_delay(self, group: StreamsGroup) -> None:
        """A member joined an empty group: as Kafka, no assignment until the delay is over, so
        that the members starting together are assigned at once (docs/streams-groups.md#the-initial-rebalance-delay)."""
        delay = self.initial_delay_ms(group)
        key = (INITIAL_DELAY_TIMER, group.group_id)
        if delay > 0 and key not in self.timers:
            self.timers.schedule(key, self.clock.now_ms + delay)

    def delayed(self, group: StreamsGroup) -> bool:
        return (INITIAL_DELAY_TIMER, group.group_id) in self.timers

    @staticmethod
    def _join_delayed(group: StreamsGroup, member: StreamsMember) -> bool:
        """During the delay a joining member is told the group epoch and no tasks (Kafka
        answers so); members already in keep their epoch. True when the member just joined."""
        if member.member_epoch != JOIN_EPOCH:
            return False
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.group_epoch
        member.state = MemberState.STABLE
        return True

    def end_initial_delay(self, group: StreamsGroup) -> bool:
        """The delay is over: the first assignment, at a new group epoch (as Kafka). False when
        nobody is left to assign to."""
        if not group.members:
            return False
        group.group_epoch += 1
        if self.assignment_due(group):
            self._compute_target(group)
        return True

    # -- the assignment interval -----------------------------------------------------------------

    def assignment_due(self, group: StreamsGroup) -> bool:
        """Whether the target may be recomputed now: at most once per
        streams.assignment.interval.ms (Kafka 4.4); otherwise its timer recomputes it then."""
        interval = self.group_configs.value(group.group_id, STREAMS_ASSIGNMENT_INTERVAL_MS)
        key = (ASSIGNMENT_TIMER, group.group_id)
        return assignment_due(self.timers, key, self.clock.now_ms, group.last_assignment_ms, interval)

    def assignment_waiting(self, group: StreamsGroup) -> bool:
        """The target is behind and waits for the assignment interval."""
        return (ASSIGNMENT_TIMER, group.group_id) in self.timers

    def compute_waiting_target(self, group: StreamsGroup) -> bool:
        """The assignment interval is over (or the group was restored behind its target): the
        target at the group epoch. False when there is nothing to compute."""
        self.timers.cancel((ASSIGNMENT_TIMER, group.group_id))
        if not group.members or self.delayed(group):
            return False
        try:
            if self._configure(group):  # the catalog changed since the last heartbeat
                group.group_epoch += 1
        except Rejected:
            pass  # the topology stays as it was configured; the next heartbeat answers the error
        if group.group_epoch <= group.assignment_epoch:
            return False
        self._compute_target(group)
        return True

    def _member_for(
        self, ctx: RequestContext, group: StreamsGroup, req: sgh.StreamsGroupHeartbeatRequest
    ) -> StreamsMember:
        member = group.members.get(req.member_id)
        if req.member_epoch == JOIN_EPOCH:
            if req.instance_id is not None:
                held = group.static_members.get(req.instance_id)
                if held is not None and held != req.member_id:
                    previous = group.members[held]
                    if previous.member_epoch != LEAVE_STATIC_EPOCH:
                        raise Rejected(
                            UNRELEASED_INSTANCE_ID,
                            f"Static member {req.member_id} with instance id {req.instance_id} cannot join "
                            f"the group because the instance id is owned by {held} member.",
                        )
                    # The static member comes back under a new member id: it takes the old one's place.
                    self._remove(group, previous)
            if member is None:
                if len(group.members) >= self.config.group_streams_max_size:
                    raise Rejected(
                        GROUP_MAX_SIZE_REACHED,
                        f"The streams group has reached its maximum capacity of "
                        f"{self.config.group_streams_max_size} members.",
                    )
                return StreamsMember(req.member_id, instance_id=req.instance_id)
            return member
        if member is None:
            raise Rejected(
                UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
            )
        if req.member_epoch != member.member_epoch:
            # Kafka's throwIfStreamsGroupMemberEpochIsInvalid: a member one epoch behind whose
            # owned tasks are within its assignment missed a response; anything else is fenced.
            owned_active = _owned(req.active_tasks)
            behind_ok = (
                req.member_epoch == member.previous_member_epoch
                and owned_active is not None
                and all(ps <= member.assigned.active.get(s, frozenset()) for s, ps in owned_active.items())
            )
            if req.member_epoch > member.member_epoch or not behind_ok:
                raise Rejected(
                    FENCED_MEMBER_EPOCH,
                    f"The streams group member has a invalid epoch {req.member_epoch}; "
                    f"the current epoch is {member.member_epoch}.",
                )
        return member

    def _take_topology(
        self, group: StreamsGroup, member: StreamsMember, req: sgh.StreamsGroupHeartbeatRequest
    ) -> bool:
        """The topology a joining member brings: initializes the group's (or replaces it once the
        member is alone with a newer epoch); an older epoch is fenced."""
        assert req.topology is not None
        try:
            topology = from_request(req.topology)
        except InvalidTopology as invalid:
            raise Rejected(STREAMS_INVALID_TOPOLOGY, str(invalid)) from None
        member.topology_epoch = topology.epoch
        current = group.topology
        others = [m for m in group.members if m != member.member_id]
        if current is None or (not others and topology != current):
            group.topology = topology
            group.configured = None
            group.configured_version = -1
            return True
        if topology.epoch < current.epoch:
            raise Rejected(
                STREAMS_TOPOLOGY_FENCED,
                f"The topology epoch {topology.epoch} is older than the group's topology epoch {current.epoch}.",
            )
        if topology != current:
            raise Rejected(
                STREAMS_INVALID_TOPOLOGY_EPOCH,
                f"Topology epoch {topology.epoch} differs from the group's topology epoch {current.epoch} "
                "or its topology, while other members use it.",
            )
        return False

    def _update_member(
        self, ctx: RequestContext, member: StreamsMember, req: sgh.StreamsGroupHeartbeatRequest
    ) -> bool:
        """Apply what the request changes; True when the assignment depends on the change."""
        bump = False
        if req.process_id is not None and req.process_id != member.process_id:
            member.process_id = req.process_id
            bump = True
        if req.rack_id is not None and req.rack_id != member.rack_id:
            member.rack_id = req.rack_id
            bump = True
        if req.client_tags is not None:
            tags = tuple(sorted((kv.key, kv.value) for kv in req.client_tags))
            if tags != member.client_tags:
                member.client_tags = tags
                bump = True
        if req.user_endpoint is not None:
            member.user_endpoint = (req.user_endpoint.host, req.user_endpoint.port)
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        # Kafka's MemberTaskOffsets.update: a list replaces what was reported, null keeps it. The
        # offsets steer the next assignment (standby candidates) without bumping the epoch.
        if req.task_offsets is not None:
            member.task_offsets = _offsets(req.task_offsets)
        if req.task_end_offsets is not None:
            member.task_end_offsets = _offsets(req.task_end_offsets)
        member.client_id = ctx.client_id
        member.client_host = kafka_client_host(ctx.client_host)
        return bump

    def _configure(self, group: StreamsGroup) -> bool:
        """Configure the topology against the catalog when it changed; True when the tasks or
        the readiness changed (a new target is needed)."""
        if group.topology is None or group.configured_version == self.catalog.version:
            return False
        configured = self.configured_for(group.topology)
        previous = group.configured
        group.configured = configured
        group.configured_version = self.catalog.version
        return previous is None or previous.tasks != configured.tasks or previous.ready != configured.ready

    def configured_for(self, topology: Topology) -> ConfiguredTopology:
        topics = self.catalog.topics

        def partitions_of(name: str) -> int | None:
            record = topics.get(name)
            return None if record is None else record.num_partitions

        try:
            return configure(topology, partitions_of)
        except InvalidTopology as invalid:
            raise Rejected(STREAMS_INVALID_TOPOLOGY, str(invalid)) from None

    # -- leaving and fencing -------------------------------------------------------------------

    def _leave(
        self, group: StreamsGroup, req: sgh.StreamsGroupHeartbeatRequest
    ) -> sgh.StreamsGroupHeartbeatResponse:
        if req.instance_id is not None:
            code = static_member_check(group.static_members, req.member_id, req.instance_id)
            if code:
                raise Rejected(code, f"Instance id {req.instance_id} is not held by member {req.member_id}.")
        member = group.members.get(req.member_id)
        if member is None:
            raise Rejected(
                UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
            )
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            # The static member keeps its tasks for its session: it is expected back.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_STATIC_EPOCH
            self.reschedule_session(group, member)
        else:
            self.fence(group, member)
        return sgh.StreamsGroupHeartbeatResponse(
            member_id=req.member_id, member_epoch=req.member_epoch, status=None
        )

    def _remove(self, group: StreamsGroup, member: StreamsMember) -> None:
        group.remove_ownership(member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if (
            member.instance_id is not None
            and group.static_members.get(member.instance_id) == member.member_id
        ):
            del group.static_members[member.instance_id]
        self.timers.cancel((SESSION_TIMER, group.group_id, member.member_id))
        self.timers.cancel((REBALANCE_TIMER, group.group_id, member.member_id))
        group.state_ms = self.clock.wall_ms

    def fence(
        self, group: StreamsGroup, member: StreamsMember, kind: str = MEMBER_LEFT, why: str = "left"
    ) -> None:
        """The member is gone (left, session or rebalance timeout): its tasks go back to the
        others with a new group epoch."""
        before = dict(group.target)  # the member's tasks count as moved, not as new
        self._remove(group, member)
        group.group_epoch += 1
        self.history.left(group, member, kind, why)
        if group.members and not self.delayed(group) and self.assignment_due(group):
            self._compute_target(group, before)
        elif group.target_before is None:
            group.target_before = before

    def _compute_target(self, group: StreamsGroup, before: dict[str, TaskSets] | None = None) -> None:
        previous = before or group.target_before or group.target
        group.target_before = None
        compute_target(group, self.standby_replicas(group))
        group.last_assignment_ms = self.clock.now_ms
        self.history.target_computed(group, previous)

    # -- timers ------------------------------------------------------------------------------

    def reschedule_session(self, group: StreamsGroup, member: StreamsMember) -> None:
        self.timers.schedule(
            (SESSION_TIMER, group.group_id, member.member_id),
            self.clock.now_ms + self.group_configs.value(group.group_id, STREAMS_SESSION_TIMEOUT_MS),
        )

    def _schedule_rebalance(self, group: StreamsGroup, member: StreamsMember) -> None:
        key = (REBALANCE_TIMER, group.group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_TASKS:
            if key not in self.timers:
                self.timers.schedule(key, self.clock.now_ms + max(member.rebalance_timeout_ms, 0))
        else:
            self.timers.cancel(key)

    # -- the response --------------------------------------------------------------------------

    def _response(
        self,
        group: StreamsGroup,
        member: StreamsMember,
        req: sgh.StreamsGroupHeartbeatRequest,
        full: bool,
        version: int,
    ) -> sgh.StreamsGroupHeartbeatResponse:
        status: list[sgh.Status] = []
        if group.configured is not None and group.configured.status is not None:
            code, detail = group.configured.status
            status.append(sgh.Status(code, detail))
        if self.delayed(group):
            status.append(sgh.Status(ASSIGNMENT_DELAYED, INITIAL_DELAY_DETAIL))
        elif self.assignment_waiting(group):
            status.append(sgh.Status(ASSIGNMENT_DELAYED, ASSIGNMENT_INTERVAL_DETAIL))
        if group.shutdown_requested:
            status.append(
                sgh.Status(SHUTDOWN_APPLICATION, "A member requested the application to shut down.")
            )
        missing_tags = self._missing_client_tags(member)
        if version >= 1 and missing_tags:
            status.append(
                sgh.Status(
                    MISSING_CLIENT_TAGS,
                    f"Missing required client tags for rack-aware standby assignment: [{', '.join(missing_tags)}]. "
                    "Configure them via 'client.tag.<tagKey>' in your Streams config.",
                )
            )
        response = sgh.StreamsGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.interval(group, member),
            acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG if version == 0 else 0,
            acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG if version >= 1 else -1,
            task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
            status=status,
            endpoint_information_epoch=group.endpoint_epoch,
        )
        if full:
            response.active_tasks = _wire_tasks(member.assigned.active)
            response.standby_tasks = _wire_tasks(member.assigned.standby)
            response.warmup_tasks = _wire_tasks(member.assigned.warmup)
        if req.endpoint_information_epoch != group.endpoint_epoch:
            response.partitions_by_user_endpoint = self._endpoints(group)
        return response

    def _missing_client_tags(self, member: StreamsMember) -> list[str]:
        """The rack-aware assignment tags the member does not send, in the configured order."""
        sent = {key for key, _ in member.client_tags}
        return [tag for tag in self.config.group_streams_rack_aware_assignment_tags if tag not in sent]

    def interval(self, group: StreamsGroup, member: StreamsMember) -> int:
        """The heartbeat interval the member is told: the configured one, as Kafka does."""
        return self.group_configs.value(group.group_id, STREAMS_HEARTBEAT_INTERVAL_MS)

    def _endpoints(self, group: StreamsGroup) -> list[sgh.EndpointToPartitions]:
        """Interactive Queries: each member's endpoint and the source partitions of its tasks."""
        if group.topology is None:
            return []
        inputs = {
            s.subtopology_id: [*s.source_topics, *(r.name for r in s.repartition_source_topics)]
            for s in group.topology.subtopologies
        }

        def partitions(tasks: Mapping[str, frozenset[int]]) -> list[sgh.TopicPartition]:
            by_topic: dict[str, set[int]] = {}
            for sub, ps in tasks.items():
                for topic in inputs.get(sub, ()):
                    by_topic.setdefault(topic, set()).update(ps)
            return [sgh.TopicPartition(t, sorted(ps)) for t, ps in sorted(by_topic.items())]

        out = []
        for member in group.members.values():
            if member.user_endpoint is None:
                continue
            host, port = member.user_endpoint
            target = group.target.get(member.member_id, TaskSets())
            standby = {**target.standby}
            for s, ps in target.warmup.items():
                standby[s] = standby.get(s, frozenset()) | ps
            out.append(
                sgh.EndpointToPartitions(
                    sgh.Endpoint(host, port), partitions(target.active), partitions(standby)
                )
            )
        return out
