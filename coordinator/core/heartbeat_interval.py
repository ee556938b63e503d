"""The heartbeat interval a KIP-848 member is told to use, response by response.

Every ConsumerGroupHeartbeat response carries HeartbeatIntervalMs and the clients (librdkafka,
the Java consumer) schedule their next heartbeat from the latest one, so the coordinator may
change it at any time. The ``handover`` policy (the default) uses that to shorten hand-overs and
spreads the regular intervals; the rules and their reasons are in docs/kip848-handover.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from coordinator.core.consumer_group import MemberState

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


@dataclass(slots=True, frozen=True)
class HeartbeatIntervals:
    interval_ms: int  # group.consumer.heartbeat.interval.ms
    policy: str = POLICY_HANDOVER
    # Uniform in [0, 1); injected so the core stays deterministic under test.
    random_unit: Callable[[], float] = no_jitter

    def __post_init__(self) -> None:
        if self.interval_ms < 1:
            raise ValueError("the heartbeat interval must be positive")
        if self.policy not in HEARTBEAT_POLICIES:
            raise ValueError(f"heartbeat policy must be one of {', '.join(HEARTBEAT_POLICIES)}")

    @property
    def short_ms(self) -> int:
        return min(self.interval_ms, max(MIN_SHORT_INTERVAL_MS, self.interval_ms // SHORT_INTERVAL_DIVISOR))

    @property
    def settle_window_ms(self) -> int:
        """How long after a group epoch bump every member is asked to come back soon."""
        if self.policy != POLICY_HANDOVER:
            return 0
        return max(1, self.interval_ms // SETTLE_WINDOW_DIVISOR)

    def for_member(self, state: MemberState, settling: bool) -> int:
        """The interval for a member in ``state`` (after this heartbeat's reconciliation);
        ``settling``: the group's epoch was bumped within the settle window."""
        if self.policy == POLICY_KAFKA:
            return self.interval_ms
        if self.policy == POLICY_UNRELEASED:
            return self.short_ms if state is MemberState.UNRELEASED_PARTITIONS else self.interval_ms
        base = self.short_ms if settling or state is not MemberState.STABLE else self.interval_ms
        return self.jittered(base)

    def jittered(self, base_ms: int) -> int:
        """``base_ms`` shortened by up to JITTER_FRACTION, never lengthened, never below 1 ms."""
        unit = min(max(self.random_unit(), 0.0), 1.0)
        return max(1, base_ms - int(base_ms * JITTER_FRACTION * unit))
