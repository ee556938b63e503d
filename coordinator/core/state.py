"""States of a classic group and the table of legal transitions (Kafka's ClassicGroupState).

Every state change goes through :func:`transition_to`, which refuses anything the table does not
allow, as Kafka's ``assertValidTransition`` does: an illegal transition is a coordinator bug.

What each request gets in each state (after group, member and generation validation):

Empty
    The group has no members, but may have committed offsets (including "simple" groups that only
    use Kafka for offset storage, which have no protocol type).
    JoinGroup from a new member: the member is added and the group prepares its first rebalance,
    with the initial delayed join. JoinGroup/SyncGroup/Heartbeat from a known member id:
    UNKNOWN_MEMBER_ID. OffsetCommit with generation -1: accepted (admin tools, manual assignment).
    DeleteGroups: accepted. Leads to PreparingRebalance (a member joins) or Dead (deleted, or the
    retention sweep found no offsets left).

PreparingRebalance
    The group is waiting for its members to (re)join. JoinGroup: parked until every member has
    joined or the rebalance timeout expires. SyncGroup: REBALANCE_IN_PROGRESS. Heartbeat:
    REBALANCE_IN_PROGRESS, which is how members learn that they must rejoin. LeaveGroup: the
    member is removed and the join phase may complete. OffsetCommit from a member of the previous
    generation: accepted (they are still allowed to commit what they consumed). Leads to
    CompletingRebalance (join phase complete, at least one member), Empty (join phase complete
    with no member) or Dead.

CompletingRebalance
    The new generation exists; the group waits for the leader's assignment. JoinGroup from a known
    member with unchanged metadata: the current generation at once (a lost JoinGroup response);
    with changed metadata, or from a new member: back to PreparingRebalance. SyncGroup: parked; the
    leader's SyncGroup persists the assignment and, once durable, answers every parked SyncGroup
    and makes the group Stable. Heartbeat: NONE. OffsetCommit: REBALANCE_IN_PROGRESS. LeaveGroup,
    session expiry, a failed assignment write or the pending-sync timeout: back to
    PreparingRebalance.

Stable
    Every member has its assignment. Heartbeat: NONE. SyncGroup: the member's assignment at once.
    JoinGroup from the leader, from a member with changed metadata, or from a new member:
    PreparingRebalance; from a follower with unchanged metadata: the current generation at once.
    OffsetCommit from a member: accepted. LeaveGroup or session expiry: PreparingRebalance.

Dead
    The group has no members and no metadata and is being removed (deleted, expired, or its shard
    unloaded). Every request gets COORDINATOR_NOT_AVAILABLE so the client looks the coordinator
    up again; DescribeGroups reports "Dead" with no members.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final


class GroupState(Enum):
    """Classic group states; the values are the strings Kafka returns in Describe/ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    # Members compare by identity: the identity hash in C, not Enum's hash of the name in Python
    # (every transition checks the table; docs/performance.md#calls-per-request-on-the-hot-paths).
    __hash__ = object.__hash__


class IllegalStateTransition(RuntimeError):
    """A transition the state table does not allow: always a coordinator bug."""


VALID_PREVIOUS: Final[Mapping[GroupState, frozenset[GroupState]]] = MappingProxyType(
    {
        GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
        GroupState.PREPARING_REBALANCE: frozenset(
            {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
        ),
        GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
        GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
        GroupState.DEAD: frozenset(GroupState),
    }
)


def transition_to(current: GroupState, target: GroupState) -> GroupState:
    """Return ``target`` if a group in ``current`` may move there, else raise."""
    if current not in VALID_PREVIOUS[target]:
        raise IllegalStateTransition(
            f"illegal transition {current.value} -> {target.value}; "
            f"{target.value} may only follow {sorted(s.value for s in VALID_PREVIOUS[target])}"
        )
    return target
