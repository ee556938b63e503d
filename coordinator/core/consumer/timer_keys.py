"""The timers of consumer groups: one per member and kind, keyed (kind, group id, member id)."""

from __future__ import annotations

from typing import Final

MemberTimerKey = tuple[str, str, str]  # (kind, group id, member id)


# Timer kinds of consumer groups (the first element of their timer keys).
SESSION_TIMER: Final = "cg-session"
REBALANCE_TIMER: Final = "cg-rebalance"
# Classic members inside a consumer group: rejoin after REBALANCE_IN_PROGRESS, SyncGroup after JoinGroup.
JOIN_TIMER: Final = "cg-join"
SYNC_TIMER: Final = "cg-sync"


def session_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (SESSION_TIMER, group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (REBALANCE_TIMER, group_id, member_id)


def join_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (JOIN_TIMER, group_id, member_id)


def sync_key(group_id: str, member_id: str) -> MemberTimerKey:
    return (SYNC_TIMER, group_id, member_id)
