"""Parsers for command-line values: topic[:partitions], ISO 8601 date-times and durations.

Each raises ValueError with a readable message; the CLI turns that into a usage error (exit 2).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Final

_TOPIC: Final = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_DURATION: Final = re.compile(
    r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_topic_spec(text: str) -> tuple[str, list[int] | None]:
    """'orders' -> ('orders', None: every partition); 'orders:0,2' -> ('orders', [0, 2])."""
    topic, sep, partitions_text = text.partition(":")
    if not _TOPIC.match(topic):
        raise ValueError(f"invalid topic name {topic!r} (letters, digits, '.', '_' and '-', at most 249)")
    if not sep:
        return topic, None
    partitions: list[int] = []
    for item in partitions_text.split(","):
        if not item.strip().isdigit():
            raise ValueError(f"invalid partition {item.strip()!r} in {text!r}: expected TOPIC:P[,P...]")
        partitions.append(int(item))
    return topic, sorted(set(partitions))


def parse_datetime_ms(text: str) -> int:
    """ISO 8601 date-time -> epoch milliseconds; without a zone it is local time (as Kafka's tool)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"invalid ISO 8601 date-time {text!r} (e.g. 2024-05-01T12:00:00, 2024-05-01T12:00:00.000+02:00 or ...Z)"
        ) from None
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """ISO 8601 duration PnDTnHnMn.nS (as Java's Duration.parse) -> milliseconds."""
    match = _DURATION.match(text.strip())
    if not match or not any(match.groupdict().values()) or text.strip().upper().endswith("T"):
        raise ValueError(
            f"invalid ISO 8601 duration {text!r} (format PnDTnHnMnS, e.g. PT30M, P1DT12H, PT90S)"
        )
    parts = {k: float(v) for k, v in match.groupdict().items() if v}
    return int(timedelta(**parts).total_seconds() * 1000)
