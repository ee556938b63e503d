"""The data plane reads a share group's settings through the one validated accessor,
``DynamicGroupConfigs.share_settings``: the group's ``share.*`` configs, clamped into the broker's
current bounds as Kafka 4.4 evaluates them (docs/share-groups.md, "Settings")."""

from __future__ import annotations

from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import ShareAcquireOp, ShareInitializeOp
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import ShareLimits
from coordinator.core.share_configs import DELIVERY_COUNT_LIMIT
from storage.records import GroupConfigRecord
from tests.coordinator.harness import Harness
from tests.coordinator.test_group_configs import SET, outcome
from tests.coordinator.test_share_delivery import run
from tests.coordinator.test_share_groups import beat


def limits_in_force(h: Harness) -> tuple[ShareLimits, int]:
    manager = h.coordinator.kind(ShareGroupManager)
    partition = manager.partition(("g", "t", 0))
    assert partition is not None
    [target] = manager.fetch_targets("g", "m", [("t", 0)]).values()
    return partition.limits, target.lock_duration_ms


def test_the_share_partitions_run_under_the_group_configs_clamped_into_the_broker_bounds() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    h.catalog.set_topic("t", 1)
    assert outcome(
        h,
        ("share.record.lock.duration.ms", SET, "50000"),
        ("share.delivery.count.limit", SET, "8"),
        ("share.partition.max.record.locks", SET, "300"),
    ) == (0, None)
    beat(h, "m")
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    run(h, ShareAcquireOp("g", "m", {("t", 0): [(0, 4)]}, 100))
    assert limits_in_force(h) == (ShareLimits(50_000, 8, 300), 50_000)

    # The broker's bounds lowered below the stored configs: the restored share-partition runs
    # within them, as membership does.
    lowered = h.restart(
        BrokerGroupSettings(
            group_initial_rebalance_delay_ms=0,
            group_share_max_record_lock_duration_ms=40_000,
            group_share_max_delivery_count_limit=4,
            group_share_min_partition_max_record_locks=500,
        )
    )
    beat(lowered, "m")
    assert limits_in_force(lowered) == (ShareLimits(40_000, 4, 500), 40_000)


def test_without_group_configs_the_broker_settings_are_in_force() -> None:
    h = Harness(
        BrokerGroupSettings(group_share_record_lock_duration_ms=5000, group_share_delivery_count_limit=3)
    )
    h.catalog.set_topic("t", 1)
    beat(h, "m")
    run(h, ShareInitializeOp("g", {("t", 0): 0}))
    assert limits_in_force(h) == (ShareLimits(5000, 3, 2000), 5000)


def test_a_groups_settings_are_made_once_and_again_only_when_its_configs_change() -> None:
    configs = DynamicGroupConfigs(BrokerGroupSettings())
    first = configs.share_settings("g")
    assert configs.share_settings("g") is first  # not rebuilt on every use
    configs.apply(GroupConfigRecord("g", DELIVERY_COUNT_LIMIT, "3"))
    changed = configs.share_settings("g")
    assert changed is not first and changed.delivery_count_limit == 3
    assert configs.share_settings("g") is changed and configs.share_settings("other") is not changed
    configs.overrides.pop("g")  # the group deleted: its overrides dropped directly
    assert configs.share_settings("g").delivery_count_limit == first.delivery_count_limit
    configs.config = BrokerGroupSettings(group_share_delivery_count_limit=4)  # new broker settings
    assert configs.share_settings("g").delivery_count_limit == 4
