"""The group configs of share groups (Kafka 4.4's GroupConfig): their definitions, their validation
with Kafka's messages, and the settings a share group runs under (``share_settings``), which the
membership and the share-partition leader read (``share/limits.py`` turns them into a
share-partition's ShareLimits). Rules: docs/group-configs.md#share-groups."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from coordinator.core.group_settings import BrokerGroupSettings

SESSION_TIMEOUT_MS: Final = "share.session.timeout.ms"
HEARTBEAT_INTERVAL_MS: Final = "share.heartbeat.interval.ms"
RECORD_LOCK_DURATION_MS: Final = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT: Final = "share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS: Final = "share.partition.max.record.locks"
AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
ISOLATION_LEVEL: Final = "share.isolation.level"
RENEW_ACKNOWLEDGE_ENABLE: Final = "share.renew.acknowledge.enable"
ASSIGNMENT_INTERVAL_MS: Final = "share.assignment.interval.ms"
DLQ_TOPIC_NAME: Final = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE: Final = "errors.deadletterqueue.copy.record.enable"

ISOLATION_LEVELS: Final = ("read_committed", "read_uncommitted")


@dataclass(frozen=True, slots=True)
class ShareConfigDef:
    name: str
    broker_setting: str | None  # the BrokerGroupSettings field of its broker-level default
    doc: str
    config_type: str = "int"  # int, boolean or string
    default: str = ""  # Kafka's default where there is no broker-level one
    at_least: int = 1  # the ConfigDef's atLeast of an int
    bounds: tuple[str, str] | None = None  # the broker settings bounding it: min, max


# In Kafka's definition order: parse errors come in this order.
SHARE_CONFIGS: Final[tuple[ShareConfigDef, ...]] = (
    ShareConfigDef(
        SESSION_TIMEOUT_MS,
        "group_share_session_timeout_ms",
        "The timeout to detect client failures when using the share group protocol.",
        bounds=("group_share_min_session_timeout_ms", "group_share_max_session_timeout_ms"),
    ),
    ShareConfigDef(
        HEARTBEAT_INTERVAL_MS,
        "group_share_heartbeat_interval_ms",
        "The heartbeat interval given to the members of a share group.",
        bounds=("group_share_min_heartbeat_interval_ms", "group_share_max_heartbeat_interval_ms"),
    ),
    ShareConfigDef(
        RECORD_LOCK_DURATION_MS,
        "group_share_record_lock_duration_ms",
        "The record acquisition lock duration in milliseconds for share groups.",
        at_least=1000,
        bounds=("group_share_min_record_lock_duration_ms", "group_share_max_record_lock_duration_ms"),
    ),
    ShareConfigDef(
        DELIVERY_COUNT_LIMIT,
        "group_share_delivery_count_limit",
        "The maximum number of delivery attempts for a record delivered to a share group.",
        at_least=2,
        bounds=("group_share_min_delivery_count_limit", "group_share_max_delivery_count_limit"),
    ),
    ShareConfigDef(
        PARTITION_MAX_RECORD_LOCKS,
        "group_share_partition_max_record_locks",
        "Share-group record lock limit per share-partition.",
        at_least=100,
        bounds=("group_share_min_partition_max_record_locks", "group_share_max_partition_max_record_locks"),
    ),
    ShareConfigDef(
        AUTO_OFFSET_RESET,
        None,
        "The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically "
        "reset the offset to the earliest offset</li><li>latest: automatically reset the offset to the "
        "latest offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a "
        "configured duration from the current timestamp. &lt;duration&gt; must be specified in ISO8601 "
        "format (PnDTnHnMn.nS). Negative duration is not allowed.</li><li>anything else: throw "
        "exception to the share consumer.</li></ul>",
        config_type="string",
        default="latest",
    ),
    ShareConfigDef(
        ISOLATION_LEVEL,
        None,
        'Controls how to read records written transactionally. If set to "read_committed", the share '
        'group will only deliver transactional records which have been committed. If set to "read_'
        'uncommitted", the share group will return all messages, even transactional messages which have '
        "been aborted. Non-transactional records will be returned unconditionally in either mode.",
        config_type="string",
        default="read_uncommitted",
    ),
    ShareConfigDef(
        RENEW_ACKNOWLEDGE_ENABLE,
        None,
        "Whether the renew acknowledge type is enabled for the share group.",
        config_type="boolean",
        default="true",
    ),
    ShareConfigDef(
        ASSIGNMENT_INTERVAL_MS,
        "group_share_assignment_interval_ms",
        "The interval between assignment updates for a share group.",
        at_least=0,
        bounds=("group_share_min_assignment_interval_ms", "group_share_max_assignment_interval_ms"),
    ),
    ShareConfigDef(
        DLQ_TOPIC_NAME,
        None,
        "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. "
        "If blank (the default), the group does not have a DLQ topic.",
        config_type="string",
        default="",
    ),
    ShareConfigDef(
        DLQ_COPY_RECORD_ENABLE,
        None,
        "When writing onto the dead-letter queue topic, whether to copy the original record onto the "
        "DLQ topic, or just write a record containing the context information headers.",
        config_type="boolean",
        default="false",
    ),
)
SHARE_BY_NAME: Final[Mapping[str, ShareConfigDef]] = {d.name: d for d in SHARE_CONFIGS}
# Kafka's validateValues order of the range checks.
_RANGE_ORDER: Final = (
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    RECORD_LOCK_DURATION_MS,
    DELIVERY_COUNT_LIMIT,
    PARTITION_MAX_RECORD_LOCKS,
    ASSIGNMENT_INTERVAL_MS,
)
_INT: Final = re.compile(r"\s*[+-]?[0-9]+\s*")
# java.time.Duration.parse: PnDTnHnMn.nS, signs allowed on the whole and on each part.
_DURATION: Final = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_BY_DURATION: Final = "by_duration:"


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """What one share group runs under (its configs, else the broker's, within the broker's bounds)."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: str  # latest, earliest or by_duration:<ISO-8601 duration>
    isolation_level: str  # read_uncommitted or read_committed
    renew_acknowledge_enable: bool
    assignment_interval_ms: int
    dlq_topic_name: str  # empty: no dead-letter topic
    dlq_copy_record_enable: bool

    @property
    def auto_offset_reset_duration_ms(self) -> int | None:
        """The duration of ``by_duration:`` (ms back from now), None for latest and earliest."""
        if not self.auto_offset_reset.lower().startswith(_BY_DURATION):
            return None
        return parse_duration_ms(self.auto_offset_reset[len(_BY_DURATION) :])


class InvalidShareConfig(ValueError):
    """Kafka's INVALID_CONFIG for a share group config; the message is Kafka's."""


@dataclass(slots=True)
class ShareCheck:
    """The outcome of validating a group's share configs: their normalized values, or the first
    refusal (raised once the consumer configs had their turn, in Kafka's order)."""

    normalized: dict[str, str] = field(default_factory=dict)
    parse_error: str | None = None
    value_error: str | None = None

    def raise_first(self) -> None:
        message = self.parse_error or self.value_error
        if message is not None:
            raise InvalidShareConfig(message)


def check_share_configs(config: BrokerGroupSettings, values: Mapping[str, str]) -> ShareCheck:
    """Kafka's GroupConfig.validate on a group's share configs after a change (``values``: name ->
    text). Parse errors first (in definition order), then the broker bounds, then the session
    timeout against the heartbeat interval, then the dead-letter topic's name."""
    check = ShareCheck()
    parsed: dict[str, int | bool | str] = {}
    for definition in SHARE_CONFIGS:
        text = values.get(definition.name)
        if text is None:
            continue
        try:
            parsed[definition.name] = _parse(definition, text)
        except InvalidShareConfig as invalid:
            if check.parse_error is None:
                check.parse_error = str(invalid)
            continue
        check.normalized[definition.name] = _shown(parsed[definition.name])
    if check.parse_error is not None:
        return check
    check.value_error = _value_error(config, parsed)
    return check


def _value_error(config: BrokerGroupSettings, parsed: Mapping[str, int | bool | str]) -> str | None:
    for name in _RANGE_ORDER:
        if name not in parsed:
            continue
        bounds = SHARE_BY_NAME[name].bounds
        assert bounds is not None
        low, high = getattr(config, bounds[0]), getattr(config, bounds[1])
        if not low <= int(parsed[name]) <= high:
            return f"{name} must be in the range {low} to {high} inclusive."
    if SESSION_TIMEOUT_MS in parsed or HEARTBEAT_INTERVAL_MS in parsed:
        session = int(parsed.get(SESSION_TIMEOUT_MS, config.group_share_session_timeout_ms))
        heartbeat = int(parsed.get(HEARTBEAT_INTERVAL_MS, config.group_share_heartbeat_interval_ms))
        if session <= heartbeat:
            return f"{SESSION_TIMEOUT_MS} must be greater than {HEARTBEAT_INTERVAL_MS}"
    dlq = parsed.get(DLQ_TOPIC_NAME)
    if isinstance(dlq, str) and dlq.startswith("__"):
        return f"{DLQ_TOPIC_NAME}: DLQ topic name must not start with '__'"
    return None


def _parse(definition: ShareConfigDef, text: str) -> int | bool | str:
    """Kafka's ConfigDef parsing and validators, with their messages."""
    name = definition.name
    if definition.config_type == "int":
        value = int(text) if _INT.fullmatch(text) else None
        if value is None or not -(2**31) <= value < 2**31:
            raise InvalidShareConfig(
                f"Invalid value {text} for configuration {name}: Not a number of type INT"
            )
        if value < definition.at_least:
            raise InvalidShareConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least {definition.at_least}"
            )
        return value
    if definition.config_type == "boolean":
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise InvalidShareConfig(
                f"Invalid value {text} for configuration {name}: Expected value to be either true or false"
            )
        return lowered == "true"
    text = text.strip()
    if name == ISOLATION_LEVEL and text not in ISOLATION_LEVELS:
        raise InvalidShareConfig(
            f"Invalid value {text} for configuration {name}: String must be one of: {', '.join(ISOLATION_LEVELS)}"
        )
    if name == AUTO_OFFSET_RESET and not _valid_reset(text):
        raise InvalidShareConfig(
            f"Invalid value `{text}` for configuration {name}. The value must be either 'earliest', "
            "'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        )
    return text


def _valid_reset(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return True
    if not lowered.startswith(_BY_DURATION):
        return False
    duration = parse_duration_ms(text[len(_BY_DURATION) :])
    return duration is not None and duration >= 0


def parse_duration_ms(text: str) -> int | None:
    """java.time.Duration.parse (PnDTnHnMn.nS) in milliseconds, None when it does not parse."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return None
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if days is None and not (hours or minutes or seconds):
        return None  # "P" or "PT" alone
    if time_part is not None and not (hours or minutes or seconds):
        return None
    total = int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
    if seconds is not None:
        whole = int(seconds)
        millis = int((fraction or "").ljust(3, "0")[:3]) if fraction else 0
        total += whole * 1000 + (-millis if seconds.startswith("-") else millis)
    return -total if sign == "-" else total


def _shown(value: int | bool | str) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def share_settings(config: BrokerGroupSettings, overrides: Mapping[str, str]) -> ShareGroupSettings:
    """The values in force: a group's override, else the broker's setting (or Kafka's default); an
    override is clamped into the broker's current bounds, as Kafka 4.4 evaluates it."""

    def number(name: str) -> int:
        definition = SHARE_BY_NAME[name]
        assert definition.broker_setting is not None
        override = overrides.get(name)
        if override is None:
            broker_value: int = getattr(config, definition.broker_setting)
            return broker_value
        value = int(override)
        if definition.bounds is not None:
            low, high = getattr(config, definition.bounds[0]), getattr(config, definition.bounds[1])
            value = min(max(value, low), high)
        return value

    def text(name: str) -> str:
        return overrides.get(name, SHARE_BY_NAME[name].default)

    return ShareGroupSettings(
        session_timeout_ms=number(SESSION_TIMEOUT_MS),
        heartbeat_interval_ms=number(HEARTBEAT_INTERVAL_MS),
        record_lock_duration_ms=number(RECORD_LOCK_DURATION_MS),
        delivery_count_limit=number(DELIVERY_COUNT_LIMIT),
        partition_max_record_locks=number(PARTITION_MAX_RECORD_LOCKS),
        auto_offset_reset=text(AUTO_OFFSET_RESET),
        isolation_level=text(ISOLATION_LEVEL),
        renew_acknowledge_enable=text(RENEW_ACKNOWLEDGE_ENABLE) == "true",
        assignment_interval_ms=number(ASSIGNMENT_INTERVAL_MS),
        dlq_topic_name=text(DLQ_TOPIC_NAME),
        dlq_copy_record_enable=text(DLQ_COPY_RECORD_ENABLE) == "true",
    )
