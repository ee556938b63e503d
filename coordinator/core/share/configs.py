"""The settings a share group's partitions run under: the group's ``share.*`` overrides (GROUP
config resources) where set, else the broker's ``group.share.*`` settings. The one place the data
plane reads them (docs/share-groups.md, "Settings")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.partition import ShareLimits

RECORD_LOCK_DURATION_MS: Final = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT: Final = "share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS: Final = "share.partition.max.record.locks"
AUTO_OFFSET_RESET: Final = "share.auto.offset.reset"
DLQ_TOPIC_NAME: Final = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE: Final = "errors.deadletterqueue.copy.record.enable"

LATEST: Final = "latest"
EARLIEST: Final = "earliest"
BY_DURATION: Final = "by_duration:"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    limits: ShareLimits
    # latest, earliest or by_duration:<ISO-8601 duration>
    auto_offset_reset: str = LATEST
    dead_letter_topic: str = ""  # empty: the group has no dead-letter topic
    dead_letter_copy_record: bool = False


def share_group_config(
    settings: BrokerGroupSettings, overrides: Mapping[str, str] | None
) -> ShareGroupConfig:
    """The group's settings given its GROUP config overrides (None: none)."""
    given = overrides or {}

    def number(name: str, default: int) -> int:
        value = given.get(name)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    limits = ShareLimits(
        record_lock_duration_ms=number(RECORD_LOCK_DURATION_MS, settings.group_share_record_lock_duration_ms),
        delivery_count_limit=number(DELIVERY_COUNT_LIMIT, settings.group_share_delivery_count_limit),
        max_record_locks=number(PARTITION_MAX_RECORD_LOCKS, settings.group_share_partition_max_record_locks),
    )
    return ShareGroupConfig(
        limits,
        given.get(AUTO_OFFSET_RESET, LATEST).strip().lower() or LATEST,
        given.get(DLQ_TOPIC_NAME, "").strip(),
        given.get(DLQ_COPY_RECORD_ENABLE, "false").strip().lower() == "true",
    )


def by_duration_ms(reset: str) -> int | None:
    """The duration of ``by_duration:<ISO-8601>`` in ms (days, hours, minutes, seconds), else None."""
    if not reset.startswith(BY_DURATION):
        return None
    text = reset[len(BY_DURATION) :].strip().upper()
    if not text.startswith("P"):
        return None
    total = 0.0
    number = ""
    in_time = False
    units = {"D": 86_400_000, "H": 3_600_000, "M": 60_000, "S": 1_000}
    for char in text[1:]:
        if char == "T":
            in_time = True
        elif char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            if char == "M" and not in_time:
                return None  # months are not a fixed duration
            total += float(number) * units[char]
            number = ""
        else:
            return None
    return None if number else int(total)
