"""Settings of the classic group coordinator core, named and defaulted like Kafka's broker configs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class GroupConfig:
    """Kafka broker settings that govern classic groups and offsets (behaviour.md §2).

    Field ``x_y_z`` is Kafka's ``x.y.z``; the defaults are Kafka's.
    """

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    # Kafka's internal `group.coordinator.new.member.join.timeout.ms` (K-J) / NewMemberJoinTimeoutMs (K-S).
    group_new_member_join_timeout_ms: int = 300000
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    # Not a Kafka setting for classic groups; named after group.share.max.groups.
    group_max_groups: int = 2**31 - 1
    # KIP-848 consumer groups (Kafka's group.consumer.* settings).
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # Not a Kafka setting: how HeartbeatIntervalMs varies (heartbeat_interval.py, "handover",
    # "unreleased" or "kafka" for the configured interval every time).
    group_consumer_heartbeat_policy: str = "handover"

    def __post_init__(self) -> None:
        if self.group_min_session_timeout_ms > self.group_max_session_timeout_ms:
            raise ValueError("group_min_session_timeout_ms must be <= group_max_session_timeout_ms")
        if self.group_max_size < 1:
            raise ValueError("group_max_size must be >= 1")
        if self.group_initial_rebalance_delay_ms < 0 or self.group_new_member_join_timeout_ms <= 0:
            raise ValueError("rebalance delays and join timeouts must be non-negative")
        if self.offsets_retention_minutes <= 0 or self.offsets_retention_check_interval_ms <= 0:
            raise ValueError("offset retention settings must be positive")
        if self.group_max_groups < 1:
            raise ValueError("group_max_groups must be >= 1")
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset_metadata_max_bytes must be >= 0")
        if self.group_consumer_session_timeout_ms <= 0 or self.group_consumer_heartbeat_interval_ms <= 0:
            raise ValueError("consumer group session timeout and heartbeat interval must be positive")
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be lower than the session timeout")
        if self.group_consumer_max_size < 1:
            raise ValueError("group_consumer_max_size must be >= 1")
        from coordinator.core.heartbeat_interval import HEARTBEAT_POLICIES

        if self.group_consumer_heartbeat_policy not in HEARTBEAT_POLICIES:
            raise ValueError(
                f"group_consumer_heartbeat_policy must be one of {', '.join(HEARTBEAT_POLICIES)}"
            )
        from coordinator.core.assignors import ASSIGNORS

        unknown = [name for name in self.group_consumer_assignors if name not in ASSIGNORS]
        if not self.group_consumer_assignors or unknown:
            raise ValueError(
                f"group.consumer.assignors must name one or more of {', '.join(ASSIGNORS)}"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
