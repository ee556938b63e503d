"""Per-group configs (KIP-848's dynamic group configs): what a GROUP config resource holds.

Kafka 4.x lets an operator override two settings of one consumer group through
IncrementalAlterConfigs on a GROUP resource: ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``. A group without an override uses the broker-level
``group.consumer.session.timeout.ms`` / ``group.consumer.heartbeat.interval.ms``. New values
are validated as Kafka's GroupConfig does, against the broker-level bounds
``group.consumer.{min,max}.{session.timeout,heartbeat.interval}.ms``, and apply to each member
at its next heartbeat (its session is re-armed with the group's timeout, and the response
carries the group's interval). The ``share.*`` and ``errors.deadletterqueue.*`` configs of share
groups are validated as Kafka 4.4's GroupConfig does (share_configs.py) and read through
``share_settings``. Rules and choices: docs/group-configs.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.heartbeat_interval import HeartbeatIntervals, no_jitter
from coordinator.core.share_configs import (
    SHARE_CONFIGS,
    InvalidShareConfig,
    ShareGroupSettings,
    check_share_configs,
    share_settings,
)
from storage.records import GroupConfigRecord, GroupConfigTombstone

CONSUMER_SESSION_TIMEOUT_MS: Final = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS: Final = "consumer.heartbeat.interval.ms"
STREAMS_SESSION_TIMEOUT_MS: Final = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS: Final = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS: Final = "streams.num.standby.replicas"
STREAMS_INITIAL_REBALANCE_DELAY_MS: Final = "streams.initial.rebalance.delay.ms"
STREAMS_ASSIGNMENT_INTERVAL_MS: Final = "streams.assignment.interval.ms"

# Kafka's GroupConfig validates an override map with its own static defaults filling the names
# it does not set (GroupCoordinatorConfig's CONSUMER_GROUP_*_DEFAULT), not the broker's values.
_KAFKA_DEFAULTS: Final[Mapping[str, int]] = {
    CONSUMER_SESSION_TIMEOUT_MS: 45000,
    CONSUMER_HEARTBEAT_INTERVAL_MS: 5000,
}


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str  # the group config, e.g. consumer.session.timeout.ms
    broker_setting: str | None  # the BrokerGroupSettings field of its broker-level default, if any
    doc: str
    minimum: int = 1  # Kafka's ConfigDef atLeast bound
    config_type: str = "int"  # Kafka's ConfigDef type: int, boolean or string
    default: str = ""  # Kafka's own default, for a config without a broker-level one

    @property
    def broker_name(self) -> str:
        return "" if self.broker_setting is None else self.broker_setting.replace("_", ".")


# The consumer and streams group configs (the share ones: share_configs.py).
CONSUMER_CONFIGS: Final[tuple[GroupConfigDef, ...]] = (
    GroupConfigDef(
        CONSUMER_SESSION_TIMEOUT_MS,
        "group_consumer_session_timeout_ms",
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    GroupConfigDef(
        CONSUMER_HEARTBEAT_INTERVAL_MS,
        "group_consumer_heartbeat_interval_ms",
        "The heartbeat interval given to the members of a consumer group.",
    ),
    # Streams groups (docs/streams-groups.md#group-configs); Kafka 4.4's names and docs.
    GroupConfigDef(
        STREAMS_SESSION_TIMEOUT_MS,
        "group_streams_session_timeout_ms",
        "The timeout to detect client failures when using the streams group protocol.",
        minimum=1,
    ),
    GroupConfigDef(
        STREAMS_HEARTBEAT_INTERVAL_MS,
        "group_streams_heartbeat_interval_ms",
        "The heartbeat interval given to the members.",
        minimum=1,
    ),
    GroupConfigDef(
        STREAMS_NUM_STANDBY_REPLICAS,
        "group_streams_num_standby_replicas",
        "The number of standby replicas for each task.",
        minimum=0,
    ),
    GroupConfigDef(
        STREAMS_INITIAL_REBALANCE_DELAY_MS,
        "group_streams_initial_rebalance_delay_ms",
        "The amount of time the group coordinator will wait for more streams clients to join a new "
        "group before performing the first rebalance. A longer delay means potentially fewer rebalances.",
        minimum=0,
    ),
    GroupConfigDef(
        STREAMS_ASSIGNMENT_INTERVAL_MS,
        "group_streams_assignment_interval_ms",
        "The interval between assignment updates for a streams group.",
        minimum=0,
    ),
)
GROUP_CONFIGS: Final[tuple[GroupConfigDef, ...]] = CONSUMER_CONFIGS + tuple(
    GroupConfigDef(c.name, c.broker_setting, c.doc, c.at_least, c.config_type, c.default)
    for c in SHARE_CONFIGS
)
BY_NAME: Final[Mapping[str, GroupConfigDef]] = {d.name: d for d in GROUP_CONFIGS}
_CONSUMER_NAMES: Final = frozenset(d.name for d in CONSUMER_CONFIGS)  # consumer and streams
_STREAMS_NAMES: Final = tuple(d.name for d in GROUP_CONFIGS if d.name.startswith("streams."))
_INT: Final = re.compile(r"\s*[+-]?[0-9]+\s*")
_NO_OVERRIDES: Final[Mapping[str, str]] = {}
SHARE_SETTINGS_CACHED: Final = 10_000


class InvalidGroupConfig(ValueError):
    """A requested group config change Kafka refuses with INVALID_CONFIG; the message says why."""


class DynamicGroupConfigs:
    """The overrides of every group (applied once durable) and the effective values read from them."""

    def __init__(self, config: BrokerGroupSettings, random_unit: Callable[[], float] = no_jitter) -> None:
        self.config = config
        self.random_unit = random_unit
        self.overrides: dict[str, dict[str, str]] = {}
        # A group's overrides once its accepted changes still being written are durable: later
        # changes are validated against these, so that two concurrent changes cannot together
        # reach a combination neither was checked against.
        self._pending: dict[str, dict[str, str]] = {}
        self._intervals: dict[int, HeartbeatIntervals] = {}
        # Per share group, its settings and what they were computed from (the broker settings
        # and a copy of its overrides): read on every share fetch and acknowledgement, rebuilt
        # only when either changed, however they were changed.
        self._share_settings: dict[str, tuple[BrokerGroupSettings, dict[str, str], ShareGroupSettings]] = {}
        self.applied = 0  # counts applied changes: a reload read before one must be read again

    # -- state -----------------------------------------------------------------------------------

    def load(self, records: Iterable[GroupConfigRecord]) -> None:
        for record in records:
            self.apply(record)

    def apply(self, record: GroupConfigRecord | GroupConfigTombstone) -> None:
        self.applied += 1
        if isinstance(record, GroupConfigRecord):
            self.overrides.setdefault(record.group_id, {})[record.name] = record.value
            return
        group = self.overrides.get(record.group_id)
        if group is not None:
            group.pop(record.name, None)
            if not group:
                del self.overrides[record.group_id]

    def reload(self, stored: Iterable[GroupConfigRecord], held: Callable[[str], bool]) -> bool:
        """Replace the overrides of every ``held`` group by the ``stored`` ones (changed through
        another node). A group with a change of its own still being written keeps its overrides
        (its write lands after the read); False when one did, to reload it again later."""
        fresh: dict[str, dict[str, str]] = {}
        for record in stored:
            fresh.setdefault(record.group_id, {})[record.name] = record.value
        complete = True
        for group_id in fresh.keys() | self.overrides.keys():
            if not held(group_id):
                continue
            if group_id in self._pending:
                complete = False
                continue
            overrides = fresh.get(group_id)
            if overrides:
                self.overrides[group_id] = overrides
            else:
                self.overrides.pop(group_id, None)
        return complete

    # -- effective values ------------------------------------------------------------------------

    def value(self, group_id: str, name: str) -> int:
        """The value in force for the group of an int config with a broker-level default: its
        override, else the broker-level default."""
        overrides = self.overrides.get(group_id)
        override = None if overrides is None else overrides.get(name)
        if override is not None:
            return int(override)
        broker_setting = BY_NAME[name].broker_setting
        if broker_setting is None:
            raise ValueError(f"{name} has no broker-level default")
        broker_value: int = getattr(self.config, broker_setting)
        return broker_value

    def share_settings(self, group_id: str) -> ShareGroupSettings:
        """The settings share group ``group_id`` runs under: its share.* configs, else the
        broker's, bounded by the broker's bounds (docs/group-configs.md#share-groups)."""
        overrides = self.overrides.get(group_id, _NO_OVERRIDES)
        cached = self._share_settings.get(group_id)
        if cached is not None and cached[0] is self.config and cached[1] == overrides:
            return cached[2]
        settings = share_settings(self.config, overrides)
        if len(self._share_settings) >= SHARE_SETTINGS_CACHED:
            self._share_settings.clear()  # bounded: groups deleted long ago go too
        self._share_settings[group_id] = (self.config, dict(overrides), settings)
        return settings

    def session_timeout_ms(self, group_id: str) -> int:
        return self.value(group_id, CONSUMER_SESSION_TIMEOUT_MS)

    def intervals(self, group_id: str) -> HeartbeatIntervals:
        """The heartbeat interval rules of the group (one shared object per distinct interval)."""
        interval_ms = self.value(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)
        intervals = self._intervals.get(interval_ms)
        if intervals is None:
            intervals = HeartbeatIntervals(
                interval_ms, self.config.group_consumer_heartbeat_policy, self.random_unit
            )
            self._intervals[interval_ms] = intervals
        return intervals

    # -- changes ---------------------------------------------------------------------------------

    def changed(self, group_id: str, changes: Mapping[str, str | None]) -> dict[str, str]:
        """The group's overrides after ``changes`` (name -> new value, None to delete), validated
        as Kafka validates them; raises InvalidGroupConfig with Kafka's message."""
        for name in changes:
            if name not in BY_NAME:
                raise InvalidGroupConfig(f"Unknown group config name: {name}")
        after = self._latest(group_id)
        for name, value in changes.items():
            if value is None:
                after.pop(name, None)
            else:
                after[name] = value
        values = {name: _parse_int(name, after[name]) if name in after else default
                  for name, default in _KAFKA_DEFAULTS.items()}  # fmt: skip
        streams = {
            name: _parse_int(name, after[name], BY_NAME[name].minimum)
            for name in _STREAMS_NAMES
            if name in after
        }
        shares = check_share_configs(
            self.config, {n: v for n, v in after.items() if n not in _CONSUMER_NAMES}
        )
        self._check_bounds(values[CONSUMER_SESSION_TIMEOUT_MS], values[CONSUMER_HEARTBEAT_INTERVAL_MS])
        self._check_streams(streams)
        try:
            shares.raise_first()
        except InvalidShareConfig as invalid:
            raise InvalidGroupConfig(str(invalid)) from None
        return {
            name: str(int(value)) if name in _CONSUMER_NAMES else shares.normalized[name]
            for name, value in after.items()
        }

    def _check_streams(self, values: Mapping[str, int]) -> None:
        """Kafka 4.4's GroupConfig.validateValues for the streams configs, in its order: each
        given value within the broker's bounds, then the session above the heartbeat interval
        (the broker's values standing in for those not given)."""
        c = self.config
        ranges = (
            (STREAMS_HEARTBEAT_INTERVAL_MS, c.group_streams_min_heartbeat_interval_ms,
             c.group_streams_max_heartbeat_interval_ms),
            (STREAMS_SESSION_TIMEOUT_MS, c.group_streams_min_session_timeout_ms,
             c.group_streams_max_session_timeout_ms),
        )  # fmt: skip
        for name, low, high in ranges:
            value = values.get(name)
            if value is not None and not low <= value <= high:
                raise InvalidGroupConfig(f"{name} must be in the range {low} to {high} inclusive.")
        standby = values.get(STREAMS_NUM_STANDBY_REPLICAS)
        if standby is not None and standby > c.group_streams_max_standby_replicas:
            raise InvalidGroupConfig(
                f"{STREAMS_NUM_STANDBY_REPLICAS} must be less than or equal to {c.group_streams_max_standby_replicas}"
            )
        interval = values.get(STREAMS_ASSIGNMENT_INTERVAL_MS)
        low, high = c.group_streams_min_assignment_interval_ms, c.group_streams_max_assignment_interval_ms
        if interval is not None and not low <= interval <= high:
            raise InvalidGroupConfig(
                f"{STREAMS_ASSIGNMENT_INTERVAL_MS} must be in the range {low} to {high} inclusive."
            )
        if STREAMS_SESSION_TIMEOUT_MS in values or STREAMS_HEARTBEAT_INTERVAL_MS in values:
            session = values.get(STREAMS_SESSION_TIMEOUT_MS, c.group_streams_session_timeout_ms)
            heartbeat = values.get(STREAMS_HEARTBEAT_INTERVAL_MS, c.group_streams_heartbeat_interval_ms)
            if session <= heartbeat:
                raise InvalidGroupConfig(
                    f"{STREAMS_SESSION_TIMEOUT_MS} must be greater than {STREAMS_HEARTBEAT_INTERVAL_MS}"
                )

    def _check_bounds(self, session_ms: int, heartbeat_ms: int) -> None:
        c = self.config
        checks = (
            (heartbeat_ms >= c.group_consumer_min_heartbeat_interval_ms,
             f"{CONSUMER_HEARTBEAT_INTERVAL_MS} must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
            (heartbeat_ms <= c.group_consumer_max_heartbeat_interval_ms,
             f"{CONSUMER_HEARTBEAT_INTERVAL_MS} must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
            (session_ms >= c.group_consumer_min_session_timeout_ms,
             f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than or equal to group.consumer.min.session.timeout.ms"),
            (session_ms <= c.group_consumer_max_session_timeout_ms,
             f"{CONSUMER_SESSION_TIMEOUT_MS} must be less than or equal to group.consumer.max.session.timeout.ms"),
            (session_ms > heartbeat_ms,
             f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}"),
        )  # fmt: skip
        for ok, message in checks:
            if not ok:
                raise InvalidGroupConfig(message)

    def _latest(self, group_id: str) -> dict[str, str]:
        pending = self._pending.get(group_id)
        return dict(pending if pending is not None else self.overrides.get(group_id, {}))

    def writing(self, group_id: str, after: dict[str, str]) -> None:
        """``after`` was accepted and is being written; ``written`` once it landed or failed."""
        self._pending[group_id] = after

    def written(self, group_id: str, after: dict[str, str]) -> None:
        if self._pending.get(group_id) is after:
            del self._pending[group_id]

    def records(
        self, group_id: str, after: Mapping[str, str]
    ) -> list[GroupConfigRecord | GroupConfigTombstone]:
        """The writes that turn the group's overrides (after the writes in flight) into ``after``."""
        before = self._latest(group_id)
        out: list[GroupConfigRecord | GroupConfigTombstone] = [
            GroupConfigTombstone(group_id, name) for name in sorted(before.keys() - after.keys())
        ]
        out += [
            GroupConfigRecord(group_id, name, value)
            for name, value in sorted(after.items())
            if before.get(name) != value
        ]
        return out


def _parse_int(name: str, text: str, minimum: int = 1) -> int:
    """Kafka's ConfigDef parsing of an INT config with ``atLeast(minimum)``, and its messages."""
    value = int(text) if _INT.fullmatch(text) else None
    if value is None or not -(2**31) <= value < 2**31:
        raise InvalidGroupConfig(f"Invalid value {text} for configuration {name}: Not a number of type INT")
    if value < minimum:
        raise InvalidGroupConfig(
            f"Invalid value {value} for configuration {name}: Value must be at least {minimum}"
        )
    return value
