"""What the HTTP API and the console show of groups: JSON-ready views of the shard's groups,
their committed offsets and lag, and their event history.

Everything is read on the event loop that runs the shard, between two core calls, so the views
are consistent snapshots; nothing here changes the shard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Protocol

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.events import GroupEvent, consumer_assignment
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.lag_status import GroupLag, LagTracker
from coordinator.core.liveness import MemberLiveness
from coordinator.core.share.group import ShareGroup
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.streams.group import StreamsGroup
from coordinator.core.streams.manager import StreamsGroupManager

# Said wherever lag cannot be known: the coordinator only sees the log through a gateway sampler.
LAG_UNAVAILABLE: Final = (
    "no log-end offsets sampled for this group: the coordinator runs standalone (records do not "
    "flow through it), so only committed offsets are known; lag needs gateway mode"
)
# In gateway mode lag is sampled, but not yet for this group (no committed offsets, or the first
# sample is still to come).
LAG_NOT_SAMPLED: Final = (
    "no log-end offsets sampled for this group yet: the gateway samples the log ends of committed "
    "partitions on an interval"
)
TOPIC_NOT_SAMPLED: Final = "no log-end offsets sampled yet for the groups consuming this topic"
# The overview's hint, standalone only (docs/observability.md#the-console).
STANDALONE_HINT: Final = "lag needs gateway mode (standalone: committed offsets only)"

GATEWAY: Final = "gateway"
STANDALONE: Final = "standalone"


class Now(Protocol):
    """The runtime's clock: the monotonic time of the shard's deadlines and the wall time."""

    def now_ms(self) -> int: ...

    def wall_ms(self) -> int: ...


class GroupViews:
    def __init__(
        self,
        shard: GroupCoordinator,
        lag: LagTracker,
        clock: Now,
        gateway_mode: bool = False,
        history_persisted: bool = False,
    ) -> None:
        self.shard = shard
        self.lag = lag
        self.clock = clock
        self.mode = GATEWAY if gateway_mode else STANDALONE
        self.history_persisted = history_persisted  # group.events.persist: history survives a restart

    def overview(self) -> dict[str, object]:
        """The group list with the mode the server runs in, and the hint the overview shows."""
        groups = self.list_groups()
        hint = None if self.mode == GATEWAY else STANDALONE_HINT
        return {"mode": self.mode, "lag_hint": hint, "groups": groups}

    def topic_lag_note(self, sampled: bool) -> str | None:
        """Why a topic's lag is unknown: the standalone hint, or not sampled yet (gateway)."""
        if sampled:
            return None
        return STANDALONE_HINT if self.mode == STANDALONE else TOPIC_NOT_SAMPLED

    def lag_unavailable_reason(self, lag: GroupLag | None) -> str | None:
        if lag is not None:
            return None
        return LAG_NOT_SAMPLED if self.mode == GATEWAY else LAG_UNAVAILABLE

    def list_groups(self) -> list[dict[str, object]]:
        shard = self.shard
        rows = [
            self._summary(group.group_id, "classic", group.state.value, len(group.members))
            | {"protocol_type": group.protocol_type, "protocol_name": group.protocol_name}
            | {"assignor": group.protocol_name, "generation": group.generation_id}
            for group in list(shard.kind(ClassicGroupManager).groups.values())
        ]
        consumer = shard.kind(ConsumerGroupManager)
        for group_id, cgroup in list(consumer.groups.items()):
            rows.append(
                self._summary(group_id, "consumer", cgroup.state, len(cgroup.members))
                | {"protocol_type": "consumer", "protocol_name": None, "generation": cgroup.group_epoch}
                | {"assignor": consumer.preferred_assignor(cgroup)}
            )
        for group_id, sgroup in list(shard.kind(ShareGroupManager).groups.items()):
            rows.append(
                self._summary(group_id, "share", sgroup.state_name, len(sgroup.members))
                | {"protocol_type": "share", "protocol_name": None, "generation": sgroup.group_epoch}
            )
        for group_id, stgroup in list(shard.kind(StreamsGroupManager).groups.items()):
            rows.append(
                self._summary(group_id, "streams", stgroup.state_name, len(stgroup.members))
                | {"protocol_type": "streams", "protocol_name": None, "generation": stgroup.group_epoch}
            )
        rows.sort(key=lambda row: str(row["group_id"]))
        return rows

    def _summary(self, group_id: str, kind: str, state: str, members: int) -> dict[str, object]:
        lag = self.lag.status(group_id)
        last = self.shard.events.last_event(group_id)
        return {
            "group_id": group_id,
            "type": kind,
            "state": state,
            "members": members,
            "lag": None if lag is None else lag.total_lag,
            "lag_seconds": None if lag is None else lag.max_lag_seconds,
            "status": None if lag is None else lag.status,
            "last_event": None if last is None else last.to_json(),
        }

    def describe(self, group_id: str) -> dict[str, object] | None:
        """The group page: members and assignments, offsets and lag; None if unknown."""
        classic = self.shard.kind(ClassicGroupManager).groups.get(group_id)
        cgroup = self.shard.kind(ConsumerGroupManager).groups.get(group_id)
        shgroup = self.shard.kind(ShareGroupManager).groups.get(group_id)
        stgroup = self.shard.kind(StreamsGroupManager).groups.get(group_id)
        known = (
            self.shard.committed_offsets(group_id)
            or self.shard.pending_txn_offsets(group_id)
            or self.shard.events.last_event(group_id) is not None
        )
        if classic is None and cgroup is None and shgroup is None and stgroup is None and not known:
            return None
        view: dict[str, object] = {"group_id": group_id}
        if classic is not None:
            view |= _classic_view(classic)
        elif cgroup is not None:
            assignor = self.shard.kind(ConsumerGroupManager).preferred_assignor(cgroup)
            view |= _consumer_view(cgroup) | {"assignor": assignor}
        elif shgroup is not None:
            view |= _share_view(shgroup)
        elif stgroup is not None:
            view |= _streams_view(stgroup)
        else:
            view |= {"type": None, "state": "Dead", "members": []}
        members = view["members"]
        assert isinstance(members, list)
        now_ms, wall_ms = self.clock.now_ms(), self.clock.wall_ms()
        for member in members:
            seen = self.shard.member_liveness(group_id, str(member["member_id"]), now_ms)
            member.update(_liveness_view(seen, now_ms, wall_ms))
        view["mode"] = self.mode
        view["now_ms"] = wall_ms
        lag = self.lag.status(group_id)
        view["lag"] = None if lag is None else {k: v for k, v in lag.to_json().items() if k != "partitions"}
        view["lag_unavailable_reason"] = self.lag_unavailable_reason(lag)
        view["offsets"] = self._offsets(group_id, lag)
        view["pending_transactional_offsets"] = self._pending_offsets(group_id)
        view["history_persisted"] = self.history_persisted
        return view

    def _offsets(self, group_id: str, lag: GroupLag | None) -> list[dict[str, object]]:
        by_tp = {(p.topic, p.partition): p for p in lag.partitions} if lag is not None else {}
        rows: list[dict[str, object]] = []
        for record in self.shard.committed_offsets(group_id):
            sampled = by_tp.get((record.topic, record.partition))
            rows.append(
                {
                    "topic": record.topic,
                    "partition": record.partition,
                    "committed": record.offset,
                    "commit_ms": record.commit_ms,
                    "metadata": record.metadata,
                    "log_end": None if sampled is None else sampled.log_end,
                    "lag": None if sampled is None else sampled.lag,
                    "lag_seconds": None if sampled is None else sampled.lag_seconds,
                    "status": None if sampled is None else sampled.status,
                }
            )
        return rows

    def _pending_offsets(self, group_id: str) -> list[dict[str, object]]:
        """Offsets committed in transactions whose outcome is not known yet (docs/transactions.md)."""
        return [
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "producer_id": record.producer_id,
                "producer_epoch": record.producer_epoch,
                "transactional_id": record.transactional_id,
                "transaction_version": record.transaction_version,
                "commit_ms": record.commit_ms,
            }
            for record in self.shard.pending_txn_offsets(group_id)
        ]

    def history(self, group_id: str, since_seq: int = 0, since_ms: int = 0) -> list[GroupEvent]:
        return self.shard.events.history(group_id, since_seq, since_ms)


def _classic_view(group: ClassicGroup) -> dict[str, object]:
    members = []
    for member in group.members.values():
        partitions = consumer_assignment(member.assignment) if group.uses_consumer_protocol() else None
        members.append(
            {
                "member_id": member.member_id,
                "instance_id": member.group_instance_id,
                "client_id": member.client_id,
                "client_host": member.client_host,
                "session_timeout_ms": member.session_timeout_ms,
                "rebalance_timeout_ms": member.rebalance_timeout_ms,
                "assignment": None if partitions is None else [[t, p] for t, p in sorted(partitions)],
                "leader": member.member_id == group.leader_id,
            }
        )
    return {
        "type": "classic",
        "state": group.state.value,
        "protocol_type": group.protocol_type,
        "protocol_name": group.protocol_name,
        "assignor": group.protocol_name,
        "generation": group.generation_id,
        "leader_id": group.leader_id,
        "state_ms": group.state_ms,
        "members": members,
    }


def _consumer_view(group: ConsumerGroup) -> dict[str, object]:
    members = [
        {
            "member_id": member.member_id,
            "instance_id": member.instance_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "member_epoch": member.member_epoch,
            "subscribed_topics": list(member.subscribed_topic_names),
            "subscribed_regex": member.subscribed_topic_regex,
            "assignment": sorted([t, p] for t, ps in member.assigned.items() for p in ps),
            "pending_revocation": sorted([t, p] for t, ps in member.pending_revocation.items() for p in ps),
        }
        for member in group.members.values()
    ]
    return {
        "type": "consumer",
        "state": group.state,
        "protocol_type": "consumer",
        "protocol_name": None,
        "generation": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "state_ms": group.state_ms,
        "members": members,
    }


def _liveness_view(seen: MemberLiveness | None, now_ms: int, wall_ms: int) -> dict[str, object]:
    """Last heartbeat and session deadline as wall-clock ms (the core keeps monotonic ones)."""
    if seen is None:
        return {"last_heartbeat_ms": None, "session_deadline_ms": None, "liveness": None}

    def wall(monotonic: int | None) -> int | None:
        return None if monotonic is None else wall_ms - (now_ms - monotonic)

    return {
        "last_heartbeat_ms": wall(seen.last_heartbeat_ms),
        "session_deadline_ms": wall(seen.session_deadline_ms),
        "late_after_ms": seen.late_after_ms,
        "liveness": seen.state,
    }


def _share_view(group: ShareGroup) -> dict[str, object]:
    members = [
        {
            "member_id": member.member_id,
            "instance_id": None,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "member_epoch": member.member_epoch,
            "subscribed_topics": list(member.subscribed_topic_names),
            "assignment": sorted([t, p] for t, p in member.assigned),
        }
        for member in group.members.values()
    ]
    return {
        "type": "share",
        "state": group.state_name,
        "protocol_type": "share",
        "protocol_name": None,
        "generation": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": members,
    }


def _streams_view(group: StreamsGroup) -> dict[str, object]:
    def tasks(tasks: Mapping[str, frozenset[int]]) -> list[list[object]]:
        return sorted([s, p] for s, ps in tasks.items() for p in ps)

    members = [
        {
            "member_id": member.member_id,
            "instance_id": member.instance_id,
            "process_id": member.process_id,
            "client_id": member.client_id,
            "client_host": member.client_host,
            "member_epoch": member.member_epoch,
            "active_tasks": tasks(member.assigned.active),
            "standby_tasks": tasks(member.assigned.standby),
            "warmup_tasks": tasks(member.assigned.warmup),
            "pending_revocation": tasks(member.pending_revocation.active),
        }
        for member in group.members.values()
    ]
    return {
        "type": "streams",
        "state": group.state_name,
        "protocol_type": "streams",
        "protocol_name": None,
        "generation": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "state_ms": group.state_ms,
        "members": members,
    }


def lag_feeder(
    lag: LagTracker, shard: GroupCoordinator
) -> Callable[[Mapping[str, Mapping[tuple[str, int], int]], Mapping[tuple[str, int], int], int], None]:
    """What the lag sampler calls after each sample: every partition with both a committed offset
    and a log end becomes a sample of the tracker (with the group's latest commit time, for STOP);
    groups that have no committed offsets any more are forgotten."""

    def feed(
        committed: Mapping[str, Mapping[tuple[str, int], int]],
        ends: Mapping[tuple[str, int], int],
        now_ms: int,
    ) -> None:
        for group_id in set(lag.groups()) - committed.keys():
            lag.forget_group(group_id)
        for group_id, offsets in committed.items():
            last_commit = max((r.commit_ms for r in shard.committed_offsets(group_id)), default=None)
            for (topic, partition), offset in offsets.items():
                end = ends.get((topic, partition))
                if end is not None:
                    lag.observe(group_id, topic, partition, now_ms, offset, end, last_commit)

    return feed
