"""The kinds of group this coordinator serves, registered once (docs/group-model.md#adding-a-kind).

Each kind is a folder of its own; this is the one module that names them all, builds them for a
shard and plugs in the conversion between classic and consumer groups. A new kind is built and
registered here.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.clock import ShardClock
from coordinator.core.consumer.classic_members import ClassicMembers
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.conversion import ClassicConsumerConversion
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.events import GroupEvents
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.registry import GroupRegistry
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.stats import CoreStats
from coordinator.core.streams.manager import StreamsGroupManager
from coordinator.core.timers import TimerKey, Timers


def register_kinds(
    registry: GroupRegistry,
    config: BrokerGroupSettings,
    timers: Timers[TimerKey],
    clock: ShardClock,
    stats: CoreStats,
    events: GroupEvents,
    group_configs: DynamicGroupConfigs,
    enter: Callable[[int, int], None],
    member_id_factory: Callable[[str], str],
) -> None:
    """Build every kind of group for one shard and register it (ListGroups lists them in this order)."""
    classic = ClassicGroupManager(config, timers, clock, stats, member_id_factory, events, registry)
    consumer = ConsumerGroupManager(config, timers, clock, stats, events, registry, group_configs, enter)
    consumer.classic_members = ClassicMembers(consumer)
    conversion = ClassicConsumerConversion(classic, consumer)
    consumer.conversion = conversion
    registry.register_default(classic)
    registry.register(consumer)
    share = ShareGroupManager(config, timers, clock, stats, events, registry)
    share.settings_for = group_configs.share_settings
    registry.register(share)
    registry.conversion = conversion
    registry.register(StreamsGroupManager(config, timers, clock, registry, group_configs, events))
