"""Where the Kafka JSON message specs come from, and what we add to them.

The specs are read from the pinned kafka-python package (which bundles Apache Kafka 4.x's
``clients/src/main/resources/common/message``); they are never copied into this repository.

Kafka 4.0 (KIP-896) removed some old versions that clients released in 2018-2020 still send.
The 4.x specs keep those versions' field annotations (e.g. OffsetCommit's ``CommitTimestamp``
is still marked ``"versions": "1"``) and only raise ``validVersions``; the table below lowers
it back to the floor Kafka 3.x served. The field layouts of those versions were checked against
Kafka 3.x's specs and are covered by round-trip tests against kafka-python's hand-written
pre-4.0 classes (``kafka.protocol.old``).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Final

SPEC_PACKAGE: Final = "kafka.protocol.schemas.resources"

# Message name -> lowest version Kafka 3.x accepted (the 4.x specs start higher).
KAFKA_3X_VERSION_FLOOR: Final[dict[str, int]] = {
    "OffsetCommitRequest": 0,
    "OffsetCommitResponse": 0,
    "OffsetFetchRequest": 0,
    "OffsetFetchResponse": 0,
    "CreateTopicsRequest": 0,
    "CreateTopicsResponse": 0,
    "DeleteTopicsRequest": 0,
    "DeleteTopicsResponse": 0,
    "ListOffsetsRequest": 0,
    "ListOffsetsResponse": 0,
}

_FULL_LINE_COMMENTS = re.compile(r"(?m)^\s*//.*\n?")


def spec_dir() -> Path:
    return Path(str(resources.files(SPEC_PACKAGE)))


def load_spec(name: str) -> dict[str, Any]:
    """Load one spec (e.g. "JoinGroupRequest") with comments stripped and our floor applied."""
    text = (spec_dir() / f"{name}.json").read_text(encoding="utf-8")
    spec: dict[str, Any] = json.loads(_FULL_LINE_COMMENTS.sub("", text))
    floor = KAFKA_3X_VERSION_FLOOR.get(name)
    if floor is not None:
        _, _, high = spec["validVersions"].partition("-")
        spec["validVersions"] = f"{floor}-{high}"
    return spec


def spec_fingerprint() -> str:
    """Identifies the spec set the committed code was generated from (for the drift check)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(spec_dir().glob("*.json")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
