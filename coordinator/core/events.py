"""Group events: every state change of every group, with the reason it happened.

The managers report what happened (a member joined, left, timed out, changed its subscription;
a rebalance started, a generation formed, an epoch was bumped, an assignment was reconciled) and
this module keeps it: a bounded ring per group, a few counters and phase durations for metrics,
and one structured log line per event. Time comes from the shard's clock, never from a clock read.

A rebalance is caused by the last *cause* event reported in the same core operation: the managers
report the member change first, then start the rebalance (or bump the epoch), which takes that
cause as its reason. The shard forgets the pending cause at the start of every operation.
"""

from __future__ import annotations

import logging
import struct
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

from coordinator.core.clock import ShardClock
from coordinator.core.histogram import MOVED_BOUNDS, PHASE_BOUNDS_MS, BucketCounts
from protocol.messages.consumer_protocol import (
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_assignment_v1,
    decode_consumer_protocol_assignment_v2,
    decode_consumer_protocol_assignment_v3,
)
from protocol.primitives import DecodeError

# Events are logged by the logger of the manager that reports them, as before events existed;
# the names are those of the managers' modules before each kind had its folder, which operators
# filter on (docs/observability.md).
_LOGGERS: Final = {
    "classic": logging.getLogger("coordinator.core.classic_group_manager"),
    "consumer": logging.getLogger("coordinator.core.consumer_group_manager"),
    "share": logging.getLogger("coordinator.core.share.manager"),
    "streams": logging.getLogger("coordinator.core.streams.manager"),
}

# Events kept per group, and groups whose events are kept (least recently active dropped first).
DEFAULT_RING_SIZE: Final = 100
DEFAULT_MAX_GROUPS: Final = 2_000
# Events waiting to be persisted (group.events.persist) while storage is slow or down: the oldest
# are dropped beyond this, and counted.
MAX_UNSAVED: Final = 10_000

# Causes of a rebalance (classic) or of an epoch bump (KIP-848): the bounded set of values of
# the ``reason`` label of coordinator_group_rebalances_total.
MEMBER_JOINED: Final = "member_joined"
MEMBER_LEFT: Final = "member_left"
SESSION_TIMEOUT: Final = "session_timeout"
REBALANCE_TIMEOUT: Final = "rebalance_timeout"
SYNC_TIMEOUT: Final = "sync_timeout"
SUBSCRIPTION_CHANGED: Final = "subscription_changed"
LEADER_REJOINED: Final = "leader_rejoined"
METADATA_CHANGED: Final = "metadata_changed"
STATIC_MEMBER_REPLACED: Final = "static_member_replaced"
ASSIGNMENT_WRITE_FAILED: Final = "assignment_write_failed"
LOADED: Final = "loaded"
UNKNOWN: Final = "unknown"
CAUSES: Final = (
    MEMBER_JOINED,
    MEMBER_LEFT,
    SESSION_TIMEOUT,
    REBALANCE_TIMEOUT,
    SYNC_TIMEOUT,
    SUBSCRIPTION_CHANGED,
    LEADER_REJOINED,
    METADATA_CHANGED,
    STATIC_MEMBER_REPLACED,
    ASSIGNMENT_WRITE_FAILED,
    LOADED,
    UNKNOWN,
)
# Causes that are a member (re)joining: it is the first member of the new generation.
_JOIN_CAUSES: Final = frozenset(
    (MEMBER_JOINED, SUBSCRIPTION_CHANGED, LEADER_REJOINED, STATIC_MEMBER_REPLACED)
)

# A KIP-848 epoch bump names its cause briefly (the member event just before it has the details).
_SHORT_CAUSES: Final = {
    MEMBER_JOINED: "member {member} joined",
    MEMBER_LEFT: "member {member} left",
    SESSION_TIMEOUT: "session timeout of member {member}",
    REBALANCE_TIMEOUT: "member {member} did not revoke within the rebalance timeout",
    SUBSCRIPTION_CHANGED: "member {member} changed its subscription",
    STATIC_MEMBER_REPLACED: "static member replaced by {member}",
}

# Members the coordinator removed because they stopped answering: a WARNING line, not INFO.
_FAILURES: Final = frozenset((SESSION_TIMEOUT, REBALANCE_TIMEOUT, SYNC_TIMEOUT))

# Events that are not causes.
MEMBER_REJOINED: Final = "member_rejoined"
REBALANCE_STARTED: Final = "rebalance_started"
GENERATION_FORMED: Final = "generation_formed"
GROUP_STABLE: Final = "group_stable"
GROUP_EMPTY: Final = "group_empty"
GROUP_REMOVED: Final = "group_removed"
EPOCH_BUMPED: Final = "epoch_bumped"
TARGET_COMPUTED: Final = "target_computed"
ASSIGNMENT_RECONCILED: Final = "assignment_reconciled"

Detail = str | int | list[str] | None


class ReconcilingGroup(Protocol):
    """What the events ask of a group whose members reconcile to a target assignment epoch
    (a KIP-848 consumer group): the kind's folder implements it, this module imports no kind."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_epoch(self) -> int: ...

    @property
    def member_count(self) -> int: ...

    def is_stable(self) -> bool: ...

    def member_caught_up(self, member_id: str) -> bool: ...

    def members_behind(self) -> set[str]: ...


@dataclass(frozen=True, slots=True)
class GroupEvent:
    seq: int  # increases by one per event of the shard: ``since`` cursors use it
    time_ms: int  # wall-clock milliseconds
    group_id: str
    kind: str
    protocol: str  # "classic" or "consumer"
    state: str  # group state after the event
    generation: int  # classic generation or KIP-848 group epoch
    member_id: str | None
    message: str
    details: Mapping[str, Detail] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "time_ms": self.time_ms,
            "group_id": self.group_id,
            "kind": self.kind,
            "protocol": self.protocol,
            "state": self.state,
            "generation": self.generation,
            "member_id": self.member_id,
            "message": self.message,
            "details": dict(self.details),
        }


@dataclass(slots=True)
class _Phase:
    """The rebalance in progress of one group."""

    started_ms: int  # monotonic
    reason: str
    phase_started_ms: int
    last_joined: str | None = None
    last_joined_ms: int = 0


@dataclass(slots=True)
class EventStats:
    """What metrics read from the events at scrape time."""

    rebalances_by_reason: dict[tuple[str, str], int] = field(default_factory=dict)  # (protocol, reason)
    preparing_ms: BucketCounts = field(default_factory=lambda: BucketCounts(PHASE_BOUNDS_MS))
    completing_ms: BucketCounts = field(default_factory=lambda: BucketCounts(PHASE_BOUNDS_MS))
    reconciling_ms: BucketCounts = field(default_factory=lambda: BucketCounts(PHASE_BOUNDS_MS))
    partitions_moved: BucketCounts = field(default_factory=lambda: BucketCounts(MOVED_BOUNDS))
    # (group, member) that made a join phase wait longest, and how long (ms), since start.
    slowest_rejoin: dict[str, tuple[str, int]] = field(default_factory=dict)


class GroupEvents:
    """The event rings of one shard."""

    def __init__(
        self, clock: ShardClock, ring_size: int = DEFAULT_RING_SIZE, max_groups: int = DEFAULT_MAX_GROUPS
    ) -> None:
        if ring_size < 1 or max_groups < 1:
            raise ValueError("ring_size and max_groups must be at least 1")
        self.clock = clock
        self.ring_size = ring_size
        self.max_groups = max_groups
        self.stats = EventStats()
        self._rings: OrderedDict[str, deque[GroupEvent]] = OrderedDict()
        self._seq = 0
        self._pending_cause: dict[str, tuple[str, str, str | None]] = {}  # group -> (cause, message, member)
        self._phases: dict[str, _Phase] = {}
        self._bumped_ms: dict[str, tuple[int, int]] = {}  # consumer group -> (epoch, monotonic ms)
        # Last stable classic assignment per group, as one flat tuple (member id, assignment bytes,
        # member id, ...): the ids and bytes the members hold anyway, decoded again only when the
        # next generation is stable (a decoded copy cost ~400 B per idle group, a tuple of pairs
        # ~104 B with one member, this one 56 B; docs/performance.md#group-events-cost).
        self._assignments: dict[str, tuple[str | bytes, ...]] = {}
        # Owners of a KIP-848 group's last target assignment, (topic, partition) -> member id.
        self._owners: dict[str, dict[tuple[str, int], str]] = {}
        self._rebalances: dict[str, int] = {}
        self._session_expiries: dict[str, int] = {}
        self._waiting: dict[str, tuple[int, set[str]]] = {}  # consumer group -> (epoch, members behind)
        # Events not yet handed to storage; None unless events are persisted.
        self._unsaved: deque[GroupEvent] | None = None
        self.unsaved_dropped = 0

    # -- reading --------------------------------------------------------------------------------

    def history(self, group_id: str, since_seq: int = 0, since_ms: int = 0) -> list[GroupEvent]:
        ring = self._rings.get(group_id, ())
        return [e for e in ring if e.seq > since_seq and e.time_ms >= since_ms]

    def groups(self) -> Iterator[str]:
        return iter(self._rings)

    def last_event(self, group_id: str) -> GroupEvent | None:
        ring = self._rings.get(group_id)
        return ring[-1] if ring else None

    # -- persistence (the server shell writes and loads; this stays pure) -------------------------

    def persist(self) -> None:
        """Keep every event recorded from now on until :meth:`take_unsaved` hands it over."""
        if self._unsaved is None:
            self._unsaved = deque()

    def take_unsaved(self) -> list[GroupEvent]:
        if not self._unsaved:
            return []
        taken = list(self._unsaved)
        self._unsaved.clear()
        return taken

    def give_back(self, events: list[GroupEvent]) -> None:
        """Events a failed write could not store: kept for the next one, oldest dropped first."""
        if self._unsaved is not None and events:
            self._unsaved.extendleft(reversed(events))
            self._trim_unsaved()

    def restore(self, events: list[GroupEvent]) -> None:
        """Events of an earlier run (oldest first), before any of this one: into the rings, and
        the sequence continues after them so that ``since`` cursors keep working."""
        for event in events:
            ring = self._rings.get(event.group_id)
            if ring is None:
                ring = self._rings[event.group_id] = deque(maxlen=self.ring_size)
                if len(self._rings) > self.max_groups:
                    self._rings.popitem(last=False)
            else:
                self._rings.move_to_end(event.group_id)
            ring.append(event)
            self._seq = max(self._seq, event.seq)

    def _trim_unsaved(self) -> None:
        assert self._unsaved is not None
        while len(self._unsaved) > MAX_UNSAVED:
            self._unsaved.popleft()
            self.unsaved_dropped += 1

    # -- recording ------------------------------------------------------------------------------

    def begin_operation(self) -> None:
        """A new core operation: causes reported by an earlier one explain nothing here."""
        self._pending_cause.clear()

    def record(
        self,
        group_id: str,
        kind: str,
        protocol: str,
        state: str,
        generation: int,
        message: str,
        member_id: str | None = None,
        /,
        **details: Detail,
    ) -> GroupEvent:
        self._seq += 1
        event = GroupEvent(
            self._seq,
            self.clock.wall_ms,
            group_id,
            kind,
            protocol,
            state,
            generation,
            member_id,
            message,
            details,
        )
        ring = self._rings.get(group_id)
        if ring is None:
            ring = self._rings[group_id] = deque(maxlen=self.ring_size)
            if len(self._rings) > self.max_groups:
                self._rings.popitem(last=False)
        else:
            self._rings.move_to_end(group_id)
        ring.append(event)
        if self._unsaved is not None:
            self._unsaved.append(event)
            self._trim_unsaved()
        if kind in CAUSES:
            self._pending_cause[group_id] = (kind, message, member_id)
        if kind == SESSION_TIMEOUT:
            self._session_expiries[group_id] = self._session_expiries.get(group_id, 0) + 1
        phase = self._phases.get(group_id)
        if phase is not None and kind in (MEMBER_JOINED, MEMBER_REJOINED) and member_id is not None:
            phase.last_joined, phase.last_joined_ms = member_id, self.clock.now_ms
        log = _LOGGERS[protocol]
        level = logging.WARNING if kind in _FAILURES else logging.INFO
        if log.isEnabledFor(level):
            client = details.get("client_id")
            # The event itself: the JSON log format turns it into fields, the text one never
            # reads it (docs/performance.md#group-events-cost).
            extra = {
                "group_event": event,
                "group": group_id,
                "member": member_id,
                "client": client if isinstance(client, str) else None,
            }
            log.log(level, "group %s: %s", group_id, message, extra=extra)
        return event

    def take_cause(self, group_id: str) -> tuple[str, str, str | None]:
        return self._pending_cause.pop(group_id, (UNKNOWN, "unknown reason", None))

    def _count_rebalance(self, group_id: str, protocol: str, reason: str) -> None:
        key = (protocol, reason)
        self.stats.rebalances_by_reason[key] = self.stats.rebalances_by_reason.get(key, 0) + 1
        self._rebalances[group_id] = self._rebalances.get(group_id, 0) + 1

    def rebalances_in_progress(self) -> dict[str, int]:
        """Groups rebalancing now (classic: not Stable yet; consumer: not reconciled yet) and the
        monotonic ms their rebalance started at."""
        started = {group_id: phase.started_ms for group_id, phase in self._phases.items()}
        started.update((group_id, since) for group_id, (_epoch, since) in self._bumped_ms.items())
        return started

    def rebalances_by_group(self) -> Mapping[str, int]:
        """Rebalances (classic) and epoch bumps (consumer) per live group."""
        return self._rebalances

    def session_expiries_by_group(self) -> Mapping[str, int]:
        """Members expired by their session timeout, per live group."""
        return self._session_expiries

    # -- classic groups: rebalance phases ------------------------------------------------------

    def rebalance_started(self, group_id: str, previous_state: str, generation: int) -> None:
        reason, why, member_id = self.take_cause(group_id)
        now = self.clock.now_ms
        phase = self._phases[group_id] = _Phase(started_ms=now, reason=reason, phase_started_ms=now)
        if reason in _JOIN_CAUSES:
            phase.last_joined, phase.last_joined_ms = member_id, now
        self._count_rebalance(group_id, "classic", reason)
        self.record(
            group_id,
            REBALANCE_STARTED,
            "classic",
            "PreparingRebalance",
            generation,
            f"preparing to rebalance in state {previous_state} with old generation {generation} "
            f"(reason: {why})",
            reason=reason,
        )

    def generation_formed(
        self, group_id: str, generation: int, members: int, protocol_name: str | None, leader: str | None
    ) -> None:
        now = self.clock.now_ms
        phase = self._phases.get(group_id)
        waited = 0
        details: dict[str, Detail] = {"members": members, "protocol_name": protocol_name, "leader": leader}
        if phase is not None:
            waited = now - phase.phase_started_ms
            self.stats.preparing_ms.observe(waited)
            details["join_phase_ms"] = waited
            details["reason"] = phase.reason
            if phase.last_joined is not None:
                details["last_member_to_join"] = phase.last_joined
                details["last_join_after_ms"] = phase.last_joined_ms - phase.phase_started_ms
                best = self.stats.slowest_rejoin.get(group_id)
                wait = phase.last_joined_ms - phase.phase_started_ms
                if best is None or wait >= best[1]:
                    self.stats.slowest_rejoin[group_id] = (phase.last_joined, wait)
            phase.phase_started_ms = now
        self.record(
            group_id,
            GENERATION_FORMED,
            "classic",
            "CompletingRebalance",
            generation,
            f"generation {generation} formed with {members} members after {waited} ms, "
            f"protocol {protocol_name}, leader {leader}",
            **details,
        )

    def group_stable(self, group_id: str, generation: int, assignments: Mapping[str, bytes] | None) -> None:
        """A classic generation is stable; ``assignments`` (member id -> bytes) is its
        assignment if the group uses the consumer protocol."""
        owners = None if assignments is None else classic_owners(assignments)
        now = self.clock.now_ms
        phase = self._phases.pop(group_id, None)
        details: dict[str, Detail] = {}
        if phase is not None:
            self.stats.completing_ms.observe(now - phase.phase_started_ms)
            details["sync_phase_ms"] = now - phase.phase_started_ms
            details["rebalance_ms"] = now - phase.started_ms
        moved_text = ""
        if owners is not None and assignments is not None:
            before = self._assignments.get(group_id)
            previous = (classic_owners(_pairs(before)) or {}) if before else {}
            moved, first = owner_changes(previous, owners)
            self._assignments[group_id] = tuple(value for pair in assignments.items() for value in pair)
            self.stats.partitions_moved.observe(moved + first)
            details["partitions_moved"] = moved
            details["partitions_assigned_first_time"] = first
            details["partitions"] = len(owners)
            moved_text = f", {_moves(moved, first)}"
        took = "" if phase is None else f" after {now - phase.started_ms} ms"
        self.record(
            group_id,
            GROUP_STABLE,
            "classic",
            "Stable",
            generation,
            f"generation {generation} is stable{took}{moved_text}",
            **details,
        )

    def group_empty(self, group_id: str, generation: int) -> None:
        self._phases.pop(group_id, None)
        self.record(
            group_id, GROUP_EMPTY, "classic", "Empty", generation, f"generation {generation} is empty"
        )

    def group_removed(self, group_id: str, protocol: str, generation: int, why: str) -> None:
        self._phases.pop(group_id, None)
        self._bumped_ms.pop(group_id, None)
        self._assignments.pop(group_id, None)
        self._owners.pop(group_id, None)
        self._waiting.pop(group_id, None)
        self._rebalances.pop(group_id, None)
        self._session_expiries.pop(group_id, None)
        self.stats.slowest_rejoin.pop(group_id, None)
        self.record(group_id, GROUP_REMOVED, protocol, "Dead", generation, f"group removed ({why})", why=why)

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    def epoch_bumped(self, group_id: str, state: str, epoch: int, protocol: str = "consumer") -> None:
        reason, why, member_id = self.take_cause(group_id)
        short = _SHORT_CAUSES.get(reason)
        if short is not None and member_id is not None:
            why = short.format(member=member_id)  # the member event before it has the details
        self._count_rebalance(group_id, protocol, reason)
        if protocol == "consumer":  # a share group has no reconciliation to wait for
            self._bumped_ms[group_id] = (epoch, self.clock.now_ms)
        self.record(
            group_id,
            EPOCH_BUMPED,
            protocol,
            state,
            epoch,
            f"group epoch bumped to {epoch} (reason: {why})",
            reason=reason,
        )

    def target_computed(
        self,
        group_id: str,
        state: str,
        epoch: int,
        assignor: str,
        before: Mapping[str, Mapping[str, frozenset[int]]],
        after: Mapping[str, Mapping[str, frozenset[int]]],
        protocol: str = "consumer",
    ) -> None:
        """A new target (member id -> topic -> partitions) replaced ``before``, the targets of
        the current members. Partitions of members removed since the previous target are still
        known here, so that what a timed-out member owned counts as moved, not as new."""
        previous = self._owners.get(group_id, {}) | target_owners(before)
        owners = target_owners(after)
        moved, first = owner_changes(previous, owners)
        self._owners[group_id] = owners
        self.stats.partitions_moved.observe(moved + first)
        self.record(
            group_id,
            TARGET_COMPUTED,
            protocol,
            state,
            epoch,
            f"target assignment of epoch {epoch} computed by {assignor}: {_moves(moved, first, 'move')}",
            assignor=assignor,
            partitions_moved=moved,
            partitions_assigned_first_time=first,
        )

    def member_reconciled(self, group: ReconcilingGroup, member_id: str) -> None:
        """After a member's heartbeat: once every member reached the target of the bumped epoch,
        report ``assignment_reconciled``. The members still behind are collected once per epoch,
        so a heartbeat costs O(1) (checking the group's state scans every member)."""
        group_id = group.group_id
        if group_id not in self._bumped_ms:
            return
        waiting = self._waiting.get(group_id)
        if waiting is None or waiting[0] != group.group_epoch:
            waiting = self._waiting[group_id] = (group.group_epoch, group.members_behind())
        if group.member_caught_up(member_id):
            waiting[1].discard(member_id)
        if waiting[1]:
            return
        del self._waiting[group_id]  # collected again next time if the group is not Stable yet
        if group.is_stable():
            self.reconciled(group_id, group.group_epoch, group.member_count)

    def reconciled(self, group_id: str, epoch: int, members: int) -> None:
        """All members reached the target of ``epoch``: reported once per epoch."""
        bumped = self._bumped_ms.pop(group_id, None)
        if bumped is None or bumped[0] > epoch:
            return
        took = self.clock.now_ms - bumped[1]
        self.stats.reconciling_ms.observe(took)
        self.record(
            group_id,
            ASSIGNMENT_RECONCILED,
            "consumer",
            "Stable",
            epoch,
            f"assignment of epoch {epoch} reconciled by {members} members in {took} ms",
            reconcile_ms=took,
            members=members,
        )


def owner_changes(
    before: Mapping[tuple[str, int], str], after: Mapping[tuple[str, int], str]
) -> tuple[int, int]:
    """(moved, first): partitions of ``after`` whose owner changed, and partitions nobody owned
    before (a first assignment, a new partition). Both changed owner for the histogram."""
    moved = first = 0
    for tp, owner in after.items():
        previous = before.get(tp)
        if previous is None:
            first += 1
        elif previous != owner:
            moved += 1
    return moved, first


def _moves(moved: int, first: int, verb: str = "moved") -> str:
    return f"{moved} partitions {verb}, {first} assigned for the first time"


def target_owners(targets: Mapping[str, Mapping[str, frozenset[int]]]) -> dict[tuple[str, int], str]:
    """(topic, partition) -> member id of KIP-848 target assignments (member id -> assignment)."""
    return {(topic, p): member_id for member_id, a in targets.items() for topic, ps in a.items() for p in ps}


_ASSIGNMENT_DECODERS = (
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_assignment_v1,
    decode_consumer_protocol_assignment_v2,
    decode_consumer_protocol_assignment_v3,
)


def consumer_assignment(data: bytes) -> list[tuple[str, int]] | None:
    """The partitions of a ConsumerProtocolAssignment (a newer version is read with the newest
    layout we know: new versions only append fields); None if the bytes do not parse."""
    if not data:
        return []
    try:
        (version,) = struct.unpack_from(">h", data, 0)
        if version < 0:
            return None
        assignment, _ = _ASSIGNMENT_DECODERS[min(version, len(_ASSIGNMENT_DECODERS) - 1)](data, 2)
    except (DecodeError, IndexError, struct.error, UnicodeDecodeError):
        return None
    return [(tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions]


def classic_owners(assignments: Mapping[str, bytes]) -> dict[tuple[str, int], str] | None:
    """(topic, partition) -> member id of classic consumer-protocol assignments (member id ->
    assignment bytes); None if one does not parse."""
    owners: dict[tuple[str, int], str] = {}
    for member_id, data in assignments.items():
        partitions = consumer_assignment(data)
        if partitions is None:
            return None
        owners.update((tp, member_id) for tp in partitions)
    return owners


def describe_metadata_change(
    before: Mapping[str, tuple[bytes, int]], after: Mapping[str, tuple[bytes, int]]
) -> str:
    """What changed in the subscribed topics' metadata (name -> (topic id, partitions))."""
    changes = [
        f"topic {name} appeared with {after[name][1]} partitions"
        for name in sorted(after.keys() - before.keys())
    ]
    changes.extend(f"topic {name} is gone" for name in sorted(before.keys() - after.keys()))
    for name in sorted(before.keys() & after.keys()):
        (old_id, old_n), (new_id, new_n) = before[name], after[name]
        if old_id != new_id:
            changes.append(f"topic {name} was recreated")
        elif new_n > old_n:
            changes.append(f"topic {name} grew from {old_n} to {new_n} partitions")
        elif new_n != old_n:
            changes.append(f"topic {name} went from {old_n} to {new_n} partitions")
    return "; ".join(changes) or "metadata changed"


def because(reason: str | None, opening: str = ",") -> str:
    """The client's reason string (JoinGroup v8+, LeaveGroup v5+) as a message suffix, if it sent one."""
    if not reason:
        return ""
    return f", reason: {reason}" if opening == "," else f" (reason: {reason})"


def _pairs(flat: tuple[str | bytes, ...]) -> dict[str, bytes]:
    """The member id -> assignment bytes of a flat (member id, bytes, member id, ...) tuple."""
    return dict(zip(flat[::2], flat[1::2], strict=True))  # type: ignore[arg-type]
