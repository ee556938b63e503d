"""Where the Kafka JSON message specs come from, and what we add to them.

The specs are read from the pinned kafka-python package (which bundles Apache Kafka 4.x's
``clients/src/main/resources/common/message``); they are never copied into this repository.

Kafka 4.0 (KIP-896) removed some old versions that clients released in 2018-2020 still send.
The 4.x specs keep those versions' field annotations (e.g. OffsetCommit's ``CommitTimestamp``
is still marked ``"versions": "1"``) and only raise ``validVersions``; the table below lowers
it back to the floor Kafka 3.x served. The field layouts of those versions were checked against
Kafka 3.x's specs and are covered by round-trip tests against kafka-python's hand-written
pre-4.0 classes (``kafka.protocol.old``).

Specs the package does not bundle (the KIP-848 consumer group APIs) come from our own table,
``protocol.extra_specs.EXTRA_SPECS``; a bundled file of the same name takes precedence.
"""

from __future__ import annotations

import copy
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Final

from protocol.extra_specs import EXTRA_SPECS

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
    "FetchRequest": 0,
    "FetchResponse": 0,
    "ProduceRequest": 0,
    "ProduceResponse": 0,
}

_FULL_LINE_COMMENTS = re.compile(r"(?m)^\s*//.*\n?")


def spec_dir() -> Path:
    return Path(str(resources.files(SPEC_PACKAGE)))


def load_spec(name: str) -> dict[str, Any]:
    """Load one spec (e.g. "JoinGroupRequest") with comments stripped and our floor applied.

    The bundled file if there is one, else our own definition from EXTRA_SPECS."""
    path = spec_dir() / f"{name}.json"
    spec: dict[str, Any]
    if path.exists() or name not in EXTRA_SPECS:
        spec = json.loads(_FULL_LINE_COMMENTS.sub("", path.read_text(encoding="utf-8")))
    else:
        spec = copy.deepcopy(EXTRA_SPECS[name])
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
    digest.update(json.dumps(EXTRA_SPECS, sort_keys=True).encode())
    return digest.hexdigest()[:16]
