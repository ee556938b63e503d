"""Settings of the group coordinator core, named and defaulted like Kafka's broker configs.

This class body is the table of the group settings (see ``coordinator/core/settings.py``); the
server's ``Config`` extends it with the settings of the shell, so each is declared once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.core.settings import (
    at_least,
    check_settings,
    names_among,
    non_negative,
    one_of,
    positive,
    require,
    setting,
)


def _assignor_names() -> Sequence[str]:
    from coordinator.core.consumer.assignors import ASSIGNORS

    return tuple(ASSIGNORS)


@dataclass(slots=True, frozen=True)
class BrokerGroupSettings:
    """Kafka broker settings that govern groups and offsets; field ``x_y_z`` is Kafka's ``x.y.z``.

    Broker-wide: what Kafka calls ``GroupConfig`` is the per-group overrides of some of these
    (``coordinator/core/dynamic_configs.py``)."""

    group_min_session_timeout_ms: int = setting(
        6000, "smallest session timeout a member may ask for", positive, kafka=True
    )
    group_max_session_timeout_ms: int = setting(
        1800000, "largest session timeout a member may ask for", positive, kafka=True
    )
    group_initial_rebalance_delay_ms: int = setting(
        3000,
        "wait for more members before the first rebalance of an empty group (0 for development)",
        non_negative,
        kafka=True,
    )
    # Kafka has no limit; ours also bounds KIP-394 pending members (docs/hardening.md).
    group_max_size: int = setting(
        10_000,
        "members per group, pending ones included (GROUP_MAX_SIZE_REACHED beyond)",
        at_least(1),
        kafka=True,
    )
    # Kafka's internal group.coordinator.new.member.join.timeout.ms.
    group_new_member_join_timeout_ms: int = setting(
        300000, "how long a brand-new member's JoinGroup may stay parked", positive, kafka=True
    )
    offsets_retention_minutes: int = setting(
        10080,
        "offset retention (KIP-211: counted from when the group became empty)",
        at_least(1),
        kafka=True,
    )
    offsets_retention_check_interval_ms: int = setting(
        600000, "how often expired offsets are removed", positive, kafka=True
    )
    offsets_retain_on_topic_deletion: bool = setting(
        False,
        "keep a deleted topic's committed offsets until retention expires them (ours; Kafka deletes them at once)",
        kafka=True,
    )
    offset_metadata_max_bytes: int = setting(4096, "largest commit metadata string", non_negative, kafka=True)
    # Not a Kafka setting for classic groups; named after group.share.max.groups.
    group_max_groups: int = setting(
        100_000, "groups on this coordinator (ours; Kafka has no limit)", at_least(1), kafka=True
    )
    # KIP-848 consumer groups (Kafka's group.consumer.* settings).
    group_consumer_session_timeout_ms: int = setting(
        45000, "session timeout of KIP-848 consumer group members", positive, kafka=True
    )
    group_consumer_heartbeat_interval_ms: int = setting(
        5000, "heartbeat interval told to KIP-848 members (below their session timeout)", kafka=True
    )
    # Bounds of the per-group configs consumer.session.timeout.ms and
    # consumer.heartbeat.interval.ms (IncrementalAlterConfigs on GROUP resources,
    # docs/group-configs.md); Kafka's names and defaults.
    group_consumer_min_session_timeout_ms: int = setting(
        45000, "smallest consumer.session.timeout.ms a group may be configured with", positive, kafka=True
    )
    group_consumer_max_session_timeout_ms: int = setting(
        60000, "largest consumer.session.timeout.ms a group may be configured with", positive, kafka=True
    )
    group_consumer_min_heartbeat_interval_ms: int = setting(
        5000, "smallest consumer.heartbeat.interval.ms a group may be configured with", positive, kafka=True
    )
    group_consumer_max_heartbeat_interval_ms: int = setting(
        15000, "largest consumer.heartbeat.interval.ms a group may be configured with", positive, kafka=True
    )
    group_consumer_max_size: int = setting(
        2**31 - 1, "members per KIP-848 consumer group", at_least(1), kafka=True
    )
    group_consumer_assignors: tuple[str, ...] = setting(
        ("uniform", "range"),
        "server-side assignors of KIP-848 groups, comma-separated; the first is the default",
        names_among(_assignor_names, "assignors"),
        kafka=True,
    )
    group_consumer_migration_policy: str = setting(
        "bidirectional",
        "online conversion of groups with members: bidirectional, upgrade (classic to consumer when a "
        "consumer-protocol member joins), downgrade (back when the last one leaves) or disabled",
        one_of("bidirectional", "upgrade", "downgrade", "disabled"),
        kafka=True,
    )
    # Ours: how the heartbeat interval told to KIP-848 members varies (docs/kip848-handover.md).
    group_consumer_heartbeat_policy: str = setting(
        "handover",
        "KIP-848 heartbeat intervals: handover (shorter during hand-overs, jittered), unreleased "
        "(shorter only for members waiting for partitions) or kafka (always the configured one) (ours)",
        one_of("handover", "unreleased", "kafka"),
        kafka=True,
    )

    # KIP-932 share groups (Kafka's group.share.* settings; docs/share-groups.md).
    group_share_session_timeout_ms: int = setting(
        45000, "session timeout of share group members", positive, kafka=True
    )
    group_share_heartbeat_interval_ms: int = setting(
        5000, "heartbeat interval told to share group members (below their session timeout)", kafka=True
    )
    group_share_max_size: int = setting(200, "members per share group", at_least(1), kafka=True)
    group_share_record_lock_duration_ms: int = setting(
        30000,
        "how long a share consumer holds an acquired record before it is delivered again",
        at_least(1000),
        kafka=True,
    )
    group_share_delivery_count_limit: int = setting(
        5, "deliveries of a record to share consumers before it is archived", at_least(2), kafka=True
    )
    group_share_partition_max_record_locks: int = setting(
        2000,
        "records in flight per share-partition (acquired or awaiting redelivery)",
        at_least(100),
        kafka=True,
    )
    group_share_max_share_sessions: int = setting(
        2000, "share sessions (one per share consumer and node) this node keeps", at_least(1), kafka=True
    )
    # The bounds of the share.* group configs (docs/group-configs.md#share-groups).
    group_share_min_session_timeout_ms: int = setting(
        45000, "smallest share.session.timeout.ms a group may be configured with", positive, kafka=True
    )
    group_share_max_session_timeout_ms: int = setting(
        60000, "largest share.session.timeout.ms a group may be configured with", positive, kafka=True
    )
    group_share_min_heartbeat_interval_ms: int = setting(
        5000, "smallest share.heartbeat.interval.ms a group may be configured with", positive, kafka=True
    )
    group_share_max_heartbeat_interval_ms: int = setting(
        15000, "largest share.heartbeat.interval.ms a group may be configured with", positive, kafka=True
    )
    group_share_min_record_lock_duration_ms: int = setting(
        15000, "smallest share.record.lock.duration.ms a group may be configured with", positive, kafka=True
    )
    group_share_max_record_lock_duration_ms: int = setting(
        60000, "largest share.record.lock.duration.ms a group may be configured with", positive, kafka=True
    )
    group_share_min_delivery_count_limit: int = setting(
        2, "smallest share.delivery.count.limit a group may be configured with", at_least(2), kafka=True
    )
    group_share_max_delivery_count_limit: int = setting(
        10, "largest share.delivery.count.limit a group may be configured with", at_least(2), kafka=True
    )
    group_share_min_partition_max_record_locks: int = setting(
        100,
        "smallest share.partition.max.record.locks a group may be configured with",
        at_least(100),
        kafka=True,
    )
    group_share_max_partition_max_record_locks: int = setting(
        4000,
        "largest share.partition.max.record.locks a group may be configured with",
        at_least(100),
        kafka=True,
    )
    group_share_assignment_interval_ms: int = setting(
        1000, "a share group's target assignment is recomputed at most this often", non_negative, kafka=True
    )
    group_share_min_assignment_interval_ms: int = setting(
        0, "smallest share.assignment.interval.ms a group may be configured with", non_negative, kafka=True
    )
    group_share_max_assignment_interval_ms: int = setting(
        15000, "largest share.assignment.interval.ms a group may be configured with", non_negative, kafka=True
    )
    errors_deadletterqueue_topic_name_prefix: str = setting(
        "dlq.",
        "the prefix a share group's dead-letter topic (errors.deadletterqueue.topic.name) must have "
        "for its records to be written there; empty: any name (KIP-1191, docs/share-groups.md)",
        kafka=True,
    )
    errors_deadletterqueue_auto_create_topics_enable: bool = setting(
        False,
        "create a share group's dead-letter topic upstream when it does not exist (KIP-1191; gateway mode)",
        kafka=True,
    )
    # KIP-1071 streams groups (Kafka's group.streams.* settings, docs/streams-groups.md).
    group_streams_session_timeout_ms: int = setting(
        45000, "session timeout of streams group members", positive, kafka=True
    )
    group_streams_heartbeat_interval_ms: int = setting(
        5000, "heartbeat interval told to streams group members", positive, kafka=True
    )
    # The bounds of the streams.* group configs (Kafka's GroupConfig validation).
    group_streams_min_session_timeout_ms: int = setting(
        45000, "smallest streams.session.timeout.ms a streams group may be given", positive, kafka=True
    )
    group_streams_max_session_timeout_ms: int = setting(
        60000, "largest streams.session.timeout.ms a streams group may be given", positive, kafka=True
    )
    group_streams_min_heartbeat_interval_ms: int = setting(
        5000, "smallest streams.heartbeat.interval.ms a streams group may be given", positive, kafka=True
    )
    group_streams_max_heartbeat_interval_ms: int = setting(
        15000, "largest streams.heartbeat.interval.ms a streams group may be given", positive, kafka=True
    )
    group_streams_max_standby_replicas: int = setting(
        2, "largest streams.num.standby.replicas a streams group may be given", non_negative, kafka=True
    )
    group_streams_max_size: int = setting(2**31 - 1, "members per streams group", at_least(1), kafka=True)
    group_streams_assignment_interval_ms: int = setting(
        1000, "a streams group's target assignment is recomputed at most this often", non_negative, kafka=True
    )
    group_streams_min_assignment_interval_ms: int = setting(
        0, "smallest streams.assignment.interval.ms a streams group may be given", non_negative, kafka=True
    )
    group_streams_max_assignment_interval_ms: int = setting(
        15000, "largest streams.assignment.interval.ms a streams group may be given", non_negative, kafka=True
    )
    group_streams_num_standby_replicas: int = setting(
        0, "standby replicas of each stateful task in streams groups", non_negative, kafka=True
    )
    # Kafka 4.4 only checks these against the members' client tags (status MISSING_CLIENT_TAGS);
    # its assignor does not place standbys by them either (docs/streams-groups.md#task-assignment).
    group_streams_rack_aware_assignment_tags: tuple[str, ...] = setting(
        (),
        "client tag keys streams group members must send (rack-aware standby placement), comma-separated",
        kafka=True,
    )
    group_streams_initial_rebalance_delay_ms: int = setting(
        3000,
        "wait for more members before the first assignment of a new streams group (0 for development)",
        non_negative,
        kafka=True,
    )

    def __post_init__(self) -> None:
        check_settings(self)
        require(
            self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms,
            "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms",
        )
        require(
            1 <= self.group_consumer_heartbeat_interval_ms < self.group_consumer_session_timeout_ms,
            "group.consumer.heartbeat.interval.ms must be positive and lower than "
            "group.consumer.session.timeout.ms",
        )
        require(
            1 <= self.group_share_heartbeat_interval_ms < self.group_share_session_timeout_ms,
            "group.share.heartbeat.interval.ms must be positive and lower than group.share.session.timeout.ms",
        )
        require(
            self.group_consumer_min_session_timeout_ms <= self.group_consumer_max_session_timeout_ms,
            "group.consumer.min.session.timeout.ms must not exceed group.consumer.max.session.timeout.ms",
        )
        require(
            self.group_consumer_min_heartbeat_interval_ms <= self.group_consumer_max_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms must not exceed group.consumer.max.heartbeat.interval.ms",
        )

    @property
    def online_upgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def online_downgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("bidirectional", "downgrade")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
