"""The timers of share groups: one session timer per member, keyed (kind, group id, member id),
and one per group whose target assignment waits for its assignment interval (kind, group id)."""

from __future__ import annotations

from typing import Final

SHARE_SESSION_TIMER: Final = "sg-session"


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (SHARE_SESSION_TIMER, group_id, member_id)


SHARE_ASSIGNMENT_TIMER: Final = "sg-assignment"


def assignment_key(group_id: str) -> tuple[str, str]:
    return (SHARE_ASSIGNMENT_TIMER, group_id)
