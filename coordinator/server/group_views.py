"""What the HTTP API and the console show of groups: JSON-ready views of the shard's groups,
their committed offsets and lag, and their event history.

Everything is read on the event loop that runs the shard, between two core calls, so the views
are consistent snapshots; nothing here changes the shard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Protocol

from coordinator.core.events import GroupEvent
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.lag_status import GroupLag, LagTracker
from coordinator.core.liveness import MemberLiveness

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
        rows = []
        for group_id, group in self.shard.group_views().items():
            row = group.row()
            head = {key: row.pop(key) for key in ("type", "state", "members")}
            rows.append(self._summary(group_id, head) | row)
        rows.sort(key=lambda row: str(row["group_id"]))
        return rows

    def _summary(self, group_id: str, head: Mapping[str, object]) -> dict[str, object]:
        """The list row's common fields; ``head``: the group's type, state and member count."""
        lag = self.lag.status(group_id)
        last = self.shard.events.last_event(group_id)
        return {
            "group_id": group_id,
            "type": head["type"],
            "state": head["state"],
            "members": head["members"],
            "lag": None if lag is None else lag.total_lag,
            "lag_seconds": None if lag is None else lag.max_lag_seconds,
            "status": None if lag is None else lag.status,
            "last_event": None if last is None else last.to_json(),
        }

    def describe(self, group_id: str) -> dict[str, object] | None:
        """The group page: members and assignments, offsets and lag; None if unknown."""
        group = self.shard.group_view(group_id)
        known = (
            self.shard.committed_offsets(group_id)
            or self.shard.pending_txn_offsets(group_id)
            or self.shard.events.last_event(group_id) is not None
        )
        if group is None and not known:
            return None
        view: dict[str, object] = {"group_id": group_id}
        view |= {"type": None, "state": "Dead", "members": []} if group is None else group.page()
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
