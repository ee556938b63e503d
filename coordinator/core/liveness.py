"""Whether a member is still heard from: its last heartbeat, its session deadline, and a state
the console shows (docs/observability.md#member-liveness).

Pure: the caller passes the monotonic time the state is judged at. A member that stops
heartbeating (a SIGKILLed process) keeps its partitions until its session times out; ``late``
says so as soon as a heartbeat is overdue, long before the deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ALIVE: Final = "alive"
LATE: Final = "late"  # a heartbeat is overdue; the session has not timed out yet
EXPIRED: Final = "expired"  # past the session deadline: removed at the next timer poll
WAITING: Final = "waiting"  # a classic member parked in JoinGroup/SyncGroup (alive while parked)
UNKNOWN: Final = "unknown"  # never heard from in this process (no session armed)

# A classic client picks its own heartbeat interval; Kafka documents it "typically no higher than
# 1/3 of" the session timeout, so a classic member silent for longer than that is late.
CLASSIC_INTERVAL_DIVISOR: Final = 3
# A KIP-848 member is told its interval: late once it missed one whole interval after the next.
CONSUMER_LATE_INTERVALS: Final = 2


@dataclass(frozen=True, slots=True)
class MemberLiveness:
    last_heartbeat_ms: int | None  # monotonic ms of the last request that renewed its session
    session_deadline_ms: int | None  # monotonic ms its session times out at
    late_after_ms: int  # silence after which a heartbeat is overdue
    state: str


def judge(
    last_heartbeat_ms: int,
    session_deadline_ms: int | None,
    late_after_ms: int,
    now_ms: int,
    waiting: bool = False,
) -> MemberLiveness:
    """The liveness of a member at monotonic ``now_ms`` (``last_heartbeat_ms`` < 0: never heard)."""
    last = last_heartbeat_ms if last_heartbeat_ms >= 0 else None
    if session_deadline_ms is not None and now_ms >= session_deadline_ms:
        state = EXPIRED
    elif waiting:
        state = WAITING
    elif last is None:
        state = UNKNOWN
    elif now_ms - last > late_after_ms:
        state = LATE
    else:
        state = ALIVE
    return MemberLiveness(last, session_deadline_ms, late_after_ms, state)
