"""Kafka 4.4's assignment interval (KIP-1263, ``group.{share,streams}.assignment.interval.ms``):
a group's target assignment is recomputed at most once per interval. A change arriving sooner
leaves the target behind and arms the group's timer for the end of the interval, whose handler
computes the target then (docs/streams-groups.md#the-assignment-interval). Pure: the runtime
supplies the time."""

from __future__ import annotations

from coordinator.core.timers import TimerKey, Timers


def assignment_due(
    timers: Timers[TimerKey], key: TimerKey, now_ms: int, last_ms: int | None, interval_ms: int
) -> bool:
    """Whether the target may be recomputed at ``now_ms``, the last one computed at ``last_ms``
    (None: none yet in this process). If not, the timer ``key`` fires when the interval is over."""
    if last_ms is None or now_ms - last_ms >= interval_ms:
        timers.cancel(key)
        return True
    if key not in timers:
        timers.schedule(key, last_ms + interval_ms)
    return False
