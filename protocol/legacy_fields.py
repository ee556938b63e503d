"""Fields of the versions Kafka 4.0 removed, which later 4.x specs deleted from the JSON.

We still serve those versions (docs/protocol.md, "Versions older than Kafka 4"). Kafka 4.0's
specs kept these fields with their old version annotations; Kafka 4.4's specs dropped them.
``protocol.schemas.load_spec`` re-inserts each one after the field named ``after`` in the
struct reached by ``path`` (field names from the top of the message), so the codecs keep the
Kafka 3.x layout of those versions. The wire layouts are checked against kafka-python's
hand-written pre-4.0 classes in tests/protocol/test_old_layouts.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class LegacyField:
    path: tuple[str, ...]
    after: str
    field: dict[str, Any]


LEGACY_FIELDS: Final[dict[str, tuple[LegacyField, ...]]] = {
    "OffsetCommitRequest": (
        LegacyField(
            ("Topics", "Partitions"),
            "CommittedLeaderEpoch",
            {
                "name": "CommitTimestamp",
                "type": "int64",
                "versions": "1",
                "default": "-1",
                "about": "The timestamp of the commit (version 1 only).",
            },
        ),
    ),
    "ListOffsetsRequest": (
        LegacyField(
            ("Topics", "Partitions"),
            "Timestamp",
            {
                "name": "MaxNumOffsets",
                "type": "int32",
                "versions": "0",
                "default": "1",
                "about": "The maximum number of offsets to report (version 0 only).",
            },
        ),
    ),
    "ListOffsetsResponse": (
        LegacyField(
            ("Topics", "Partitions"),
            "ErrorCode",
            {
                "name": "OldStyleOffsets",
                "type": "[]int64",
                "versions": "0",
                "ignorable": False,
                "about": "The result offsets (version 0 only).",
            },
        ),
    ),
}
