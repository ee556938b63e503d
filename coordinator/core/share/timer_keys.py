"""The timers of share groups: one session timer per member, keyed (kind, group id, member id)."""

from __future__ import annotations

from typing import Final

SHARE_SESSION_TIMER: Final = "sg-session"


def session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (SHARE_SESSION_TIMER, group_id, member_id)
