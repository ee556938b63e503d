"""Where the Kafka JSON message specs come from, and what we add to them.

The specs are read from Apache Kafka 4.4.0's client jar (``kafka-clients-4.4.0.jar`` carries
``common/message/*.json``), which ``.ci/setup`` resolves into tests/java/target/lib. Another jar
or a directory of JSON files can be named with ``PROTOCOL_SPECS`` or ``python -m
protocol.codegen --specs PATH``. The specs are never copied into this repository.

Kafka 4.0 (KIP-896) removed some old versions that clients released in 2018-2020 still send.
We still serve them (docs/protocol.md, "Versions older than Kafka 4"), so two things are put back:

* ``validVersions`` is lowered to the floor Kafka 3.x served (``KAFKA_3X_VERSION_FLOOR``);
* the fields that existed only in a removed version, which later 4.x releases deleted from the
  JSON, are re-inserted from ``protocol.legacy_fields.LEGACY_FIELDS`` (each with the field it
  follows), so the codecs of those versions keep Kafka 3.x's layout.

Both are covered by round-trip tests against kafka-python's hand-written pre-4.0 classes
(tests/protocol/test_old_layouts.py).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import zipfile
from functools import cache
from pathlib import Path
from typing import Any, Final

from protocol.legacy_fields import LEGACY_FIELDS

KAFKA_VERSION: Final = "4.4.0"
SPECS_ENV: Final = "PROTOCOL_SPECS"
JAR_MEMBER_DIR: Final = "common/message/"
DEFAULT_JAR: Final = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "java"
    / "target"
    / "lib"
    / f"kafka-clients-{KAFKA_VERSION}.jar"
)

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
_source_override: Path | None = None


class SpecsNotFound(RuntimeError):
    pass


def use_source(path: Path | None) -> None:
    """Read the specs from `path` (a jar or a directory) instead of the default."""
    global _source_override
    _source_override = path
    _spec_texts.cache_clear()


def spec_source() -> Path:
    if _source_override is not None:
        return _source_override
    env = os.environ.get(SPECS_ENV)
    return Path(env) if env else DEFAULT_JAR


@cache
def _spec_texts(source: Path) -> dict[str, str]:
    """Spec name -> raw JSON text, for every spec of the source."""
    if source.is_dir():
        return {p.stem: p.read_text(encoding="utf-8") for p in sorted(source.glob("*.json"))}
    if not source.is_file():
        raise SpecsNotFound(
            f"no Kafka message specs at {source}: run .ci/setup (it resolves kafka-clients-{KAFKA_VERSION}.jar)"
            f" or name a jar or directory with {SPECS_ENV}"
        )
    texts: dict[str, str] = {}
    with zipfile.ZipFile(source) as jar:
        for member in sorted(jar.namelist()):
            if (
                member.startswith(JAR_MEMBER_DIR)
                and member.endswith(".json")
                and "/" not in member[len(JAR_MEMBER_DIR) :]
            ):
                texts[member[len(JAR_MEMBER_DIR) : -len(".json")]] = jar.read(member).decode("utf-8")
    if not texts:
        raise SpecsNotFound(f"{source} holds no {JAR_MEMBER_DIR}*.json")
    return texts


def spec_texts() -> dict[str, str]:
    return _spec_texts(spec_source())


def raw_spec(name: str) -> dict[str, Any]:
    """One spec exactly as Kafka ships it (comments stripped), without our additions."""
    text = spec_texts().get(name)
    if text is None:
        raise SpecsNotFound(f"{spec_source()} has no spec {name}")
    parsed: dict[str, Any] = json.loads(_FULL_LINE_COMMENTS.sub("", text))
    return parsed


def load_spec(name: str) -> dict[str, Any]:
    """Load one spec (e.g. "JoinGroupRequest") with our version floor and legacy fields applied."""
    spec = raw_spec(name)
    floor = KAFKA_3X_VERSION_FLOOR.get(name)
    if floor is not None:
        _, _, high = spec["validVersions"].partition("-")
        spec["validVersions"] = f"{floor}-{high}"
    for legacy in LEGACY_FIELDS.get(name, ()):
        _insert_field(spec, legacy.path, legacy.after, copy.deepcopy(legacy.field))
    return spec


def _insert_field(spec: dict[str, Any], path: tuple[str, ...], after: str, field: dict[str, Any]) -> None:
    fields: list[dict[str, Any]] = spec["fields"]
    for struct in path:
        fields = next(f for f in fields if f["name"] == struct)["fields"]
    if any(f["name"] == field["name"] for f in fields):
        return  # the spec still has it
    index = next(i for i, f in enumerate(fields) if f["name"] == after)
    fields.insert(index + 1, field)


def spec_fingerprint() -> str:
    """Identifies the spec set the committed code was generated from (for the drift check)."""
    digest = hashlib.sha256()
    for name, text in sorted(spec_texts().items()):
        digest.update(name.encode())
        digest.update(text.encode())
    digest.update(repr(sorted(LEGACY_FIELDS.items())).encode())
    return digest.hexdigest()[:16]
