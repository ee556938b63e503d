"""KIP-848 consumer group and member state, and member reconciliation (docs/groups.md#reconciliation).

Partitions are keyed by topic *name* inside the core; topic ids appear only at the wire boundary
(the catalog translates). A member's ``assigned`` partitions are the ones it may use now,
``pending_revocation`` the ones it still has to give up; together they are what it owns. A
partition is given to a new owner only once no other member owns it (the revocation handshake).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from coordinator.core.members import Protocols
from coordinator.core.shared_values import shared_partition, shared_set
from protocol.messages.list_groups import ListedGroup

Assignment = dict[str, frozenset[int]]  # topic name -> partitions (never an empty set)
EMPTY_ASSIGNMENT: Final[Mapping[str, frozenset[int]]] = {}

CONSUMER_GROUP_TYPE: Final = "consumer"

JOIN_EPOCH: Final = 0
LEAVE_EPOCH: Final = -1
LEAVE_STATIC_EPOCH: Final = -2


class MemberState(IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


# Group states as Kafka names them (ListGroups, ConsumerGroupDescribe).
CG_EMPTY: Final = "Empty"
CG_ASSIGNING: Final = "Assigning"
CG_RECONCILING: Final = "Reconciling"
CG_STABLE: Final = "Stable"
CG_DEAD: Final = "Dead"
CONSUMER_GROUP_STATES: Final = (CG_EMPTY, CG_ASSIGNING, CG_RECONCILING, CG_STABLE, CG_DEAD)


@dataclass(slots=True, frozen=True)
class ClassicMemberMetadata:
    """What a member that joined with the classic protocol (JoinGroup) keeps: its session
    timeout and its (protocol name, metadata) pairs, most preferred first."""

    session_timeout_ms: int
    protocols: Protocols

    @property
    def protocol_name(self) -> str:
        """The protocol the member is told it uses (its most preferred one, as Kafka does)."""
        return self.protocols[0][0]

    def supports(self, name: str) -> bool:
        return any(n == name for n, _ in self.protocols)


@dataclass(slots=True, eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    server_assignor: str | None
    rebalance_timeout_ms: int
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # Epoch the rebalance timer was armed for (UNREVOKED_PARTITIONS), else None.
    rebalance_timer_epoch: int | None = None
    # Subscribed topics that exist, as of catalog version ``resolved_version`` (a cache).
    resolved_topics: frozenset[str] = frozenset()
    resolved_version: int = -1
    # Set for a member of the classic protocol inside this consumer group (online migration).
    classic: ClassicMemberMetadata | None = None
    # Monotonic ms of the last request that renewed its session (-1: none yet); for the console.
    last_heartbeat_ms: int = -1

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def owned_partitions(self) -> Iterable[tuple[str, int]]:
        for source in (self.assigned, self.pending_revocation):
            for topic, partitions in source.items():
                for p in partitions:
                    yield shared_partition(topic, p)  # kept as keys of the group's owners


@dataclass(slots=True, eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    state_ms: int = -1  # wall ms of the last membership change
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    # (topic, partition) -> member id owning it (assigned or pending revocation).
    owners: dict[tuple[str, int], str] = field(default_factory=dict)
    # Subscribed topic metadata the target assignment was computed from: name -> (id, partitions).
    subscription_metadata: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    catalog_version: int = -1
    # Persistence repair after a failed write: rewrite these at the next write of the group.
    unwritten_members: set[str] = field(default_factory=set)
    unwritten_group: bool = False
    dead: bool = False
    # Monotonic ms until which members are asked to heartbeat soon after a group epoch bump
    # (not persisted: after a restart every member's next heartbeat is a full interval away).
    settling_until_ms: int = -1

    @property
    def state(self) -> str:
        if self.dead:
            return CG_DEAD
        if not self.members:
            return CG_EMPTY
        if self.group_epoch > self.assignment_epoch:
            return CG_ASSIGNING
        epoch = self.assignment_epoch
        for member in self.members.values():
            if member.member_epoch != epoch or member.state is not MemberState.STABLE:
                return CG_RECONCILING
        return CG_STABLE

    # -- the Group protocol (coordinator/core/group.py) ----------------------------------------

    @property
    def group_type(self) -> str:
        return CONSUMER_GROUP_TYPE

    @property
    def state_name(self) -> str:
        return self.state

    @property
    def member_count(self) -> int:
        return len(self.members)

    # -- what the group events ask of a reconciling group (events.ReconcilingGroup) -------------

    def is_stable(self) -> bool:
        return self.state == CG_STABLE

    def member_caught_up(self, member_id: str) -> bool:
        """The member reached the target of the current assignment epoch."""
        member = self.members.get(member_id)
        return member is not None and _caught_up(self, member)

    def members_behind(self) -> set[str]:
        return {m.member_id for m in self.members.values() if not _caught_up(self, m)}

    def listed(self) -> ListedGroup:
        return ListedGroup(
            group_id=self.group_id,
            protocol_type=CONSUMER_GROUP_TYPE,
            group_state=self.state,
            group_type=CONSUMER_GROUP_TYPE,
        )

    def add_ownership(self, member: ConsumerMember) -> None:
        owners = self.owners
        member_id = member.member_id
        for tp in member.owned_partitions():
            owners[tp] = member_id

    def remove_ownership(self, member: ConsumerMember) -> None:
        owners = self.owners
        member_id = member.member_id
        for tp in member.owned_partitions():
            if owners.get(tp) == member_id:
                del owners[tp]


def partition_count(assignment: Mapping[str, frozenset[int]]) -> int:
    return sum(len(p) for p in assignment.values())


def normalize(assignment: Mapping[str, Iterable[int]]) -> Assignment:
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}


def owns_any(owned: Mapping[str, frozenset[int]] | None, partitions: Mapping[str, frozenset[int]]) -> bool:
    """Whether the client still reports any of ``partitions`` (None: it did not say, assume yes)."""
    if owned is None:
        return True
    for topic, parts in partitions.items():
        reported = owned.get(topic)
        if reported is not None and not reported.isdisjoint(parts):
            return True
    return False


def is_subset(owned: Mapping[str, frozenset[int]] | None, assigned: Mapping[str, frozenset[int]]) -> bool:
    if owned is None:
        return False
    for topic, parts in owned.items():
        if parts and not parts <= assigned.get(topic, frozenset()):
            return False
    return True


@dataclass(slots=True, frozen=True)
class Reconciled:
    member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def reconcile(
    group: ConsumerGroup,
    member: ConsumerMember,
    owned: Mapping[str, frozenset[int]] | None,
) -> Reconciled | None:
    """Kafka's CurrentAssignmentBuilder: the member's next state towards the group's target
    assignment, or None when nothing changes. ``owned`` is what the request reports (None when
    the request did not carry TopicPartitions)."""
    target_epoch = group.assignment_epoch
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return None
        return _next_assignment(group, member, member.member_epoch, member.assigned, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return None  # still waiting for the client to give them up
        # Revoked: move to the next epoch and reconcile further towards the target.
        return _next_assignment(group, member, member.member_epoch + 1, member.assigned, owned)
    # UNRELEASED_PARTITIONS: partitions may have been freed by others, or the target changed.
    return _next_assignment(group, member, member.member_epoch, member.assigned, owned)


def _next_assignment(
    group: ConsumerGroup,
    member: ConsumerMember,
    epoch: int,
    assigned: Assignment,
    owned: Mapping[str, frozenset[int]] | None,
) -> Reconciled | None:
    target = group.target.get(member.member_id, EMPTY_ASSIGNMENT)
    owners = group.owners
    member_id = member.member_id
    keep: Assignment = {}
    revoke: Assignment = {}
    grant: Assignment = {}
    unreleased = False
    for topic in sorted(target.keys() | assigned.keys()):
        wanted = target.get(topic, frozenset())
        current = assigned.get(topic, frozenset())
        kept = current & wanted
        if kept:
            keep[topic] = kept
        gone = current - kept
        if gone:
            revoke[topic] = gone
        new: list[int] = []
        for p in wanted - kept:
            owner = owners.get((topic, p))
            if owner is None or owner == member_id:
                new.append(p)
            else:
                unreleased = True
        if new:
            grant[topic] = frozenset(new)
    if revoke and owns_any(owned, revoke):
        # Give up partitions first, at the current epoch.
        result = Reconciled(epoch, MemberState.UNREVOKED_PARTITIONS, keep, revoke)
    else:
        for topic, parts in grant.items():
            keep[topic] = keep.get(topic, frozenset()) | parts
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        result = Reconciled(group.assignment_epoch, state, keep, {})
    if (
        result.member_epoch == member.member_epoch
        and result.state is member.state
        and result.assigned == member.assigned
        and result.pending_revocation == member.pending_revocation
    ):
        return None
    return result


def apply_reconciled(group: ConsumerGroup, member: ConsumerMember, result: Reconciled) -> bool:
    """Install the member's new state and ownership; returns whether its assigned set changed."""
    changed = result.assigned != member.assigned
    group.remove_ownership(member)
    if result.member_epoch != member.member_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = result.member_epoch
    member.state = result.state
    member.assigned = {topic: shared_set(parts) for topic, parts in result.assigned.items()}
    member.pending_revocation = result.pending_revocation
    group.add_ownership(member)
    return changed


def _caught_up(group: ConsumerGroup, member: ConsumerMember) -> bool:
    return member.member_epoch == group.assignment_epoch and member.state is MemberState.STABLE
