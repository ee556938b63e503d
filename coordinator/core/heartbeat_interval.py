"""The heartbeat interval a KIP-848 member is told to use, response by response.

Every ConsumerGroupHeartbeat response carries HeartbeatIntervalMs and the clients (librdkafka,
the Java consumer) schedule their next heartbeat from the latest one, so the coordinator may
change it at any time. The ``handover`` policy (the default) uses that to shorten hand-overs and
spreads the regular intervals; the rules and their reasons are in docs/kip848-handover.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

POLICY_KAFKA: Final = "kafka"  # always the configured interval, as Apache Kafka
POLICY_UNRELEASED: Final = "unreleased"  # shorter only while waiting for partitions (kept to compare)
POLICY_HANDOVER: Final = "handover"  # shorter during hand-overs, regular intervals jittered
HEARTBEAT_POLICIES: Final = (POLICY_HANDOVER, POLICY_UNRELEASED, POLICY_KAFKA)

SHORT_INTERVAL_DIVISOR: Final = 20
# librdkafka gives each ConsumerGroupHeartbeat a request timeout equal to the last interval it
# was told, so a short interval must stay well above a loaded server's response time.
MIN_SHORT_INTERVAL_MS: Final = 250
SETTLE_WINDOW_DIVISOR: Final = 10
JITTER_FRACTION: Final = 0.2


def no_jitter() -> float:
    """A random source that always draws 0: every interval is its full length."""
    return 0.0


class HeartbeatIntervals:
    """Computed once per manager: the steady-heartbeat fast path calls :meth:`for_member`."""

    __slots__ = ("interval_ms", "policy", "random_unit", "settle_window_ms", "short_ms")

    def __init__(
        self,
        interval_ms: int,  # group.consumer.heartbeat.interval.ms
        policy: str = POLICY_HANDOVER,
        random_unit: Callable[[], float] = no_jitter,  # uniform in [0, 1); injected for tests
    ) -> None:
        if interval_ms < 1:
            raise ValueError("the heartbeat interval must be positive")
        if policy not in HEARTBEAT_POLICIES:
            raise ValueError(f"heartbeat policy must be one of {', '.join(HEARTBEAT_POLICIES)}")
        self.interval_ms = interval_ms
        self.policy = policy
        self.random_unit = random_unit
        self.short_ms = min(interval_ms, max(MIN_SHORT_INTERVAL_MS, interval_ms // SHORT_INTERVAL_DIVISOR))
        # How long after a group epoch bump every member is asked to come back soon.
        self.settle_window_ms = (
            max(1, interval_ms // SETTLE_WINDOW_DIVISOR) if policy == POLICY_HANDOVER else 0
        )

    def for_member(self, stable: bool, unreleased: bool, settling: bool) -> int:
        """The interval for a member after this heartbeat's reconciliation: ``stable`` it has
        its target assignment, ``unreleased`` it waits for partitions others still own;
        ``settling``: the group's epoch was bumped within the settle window."""
        policy = self.policy
        if policy == POLICY_HANDOVER:
            if settling or not stable:
                return self.jittered(self.short_ms)
            return self.jittered(self.interval_ms)
        if policy == POLICY_UNRELEASED and unreleased:
            return self.short_ms
        return self.interval_ms

    def jittered(self, base_ms: int) -> int:
        """``base_ms`` shortened by up to JITTER_FRACTION, never lengthened, never below 1 ms."""
        unit = self.random_unit()
        if not 0.0 <= unit <= 1.0:
            unit = 0.0 if unit < 0.0 else 1.0
        return base_ms - int(base_ms * JITTER_FRACTION * unit) or 1
