"""Spec model: Kafka's JSON message specs as typed objects with version-range algebra."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from protocol.schemas import load_spec

MAX_VERSION = 32767

FIXED_FORMATS = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
VARIABLE_TYPES = {"string", "bytes", "records"}


@dataclass(frozen=True, slots=True)
class Versions:
    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> Versions | None:
        if text is None or not text.strip() or text.strip() == "none":
            return None
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


def _in(versions: Versions | None, version: int) -> bool:
    return versions is not None and version in versions


def snake_case(name: str) -> str:
    # Same rule as kafka-python, so attribute names match the oracle's.
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(slots=True)
class FieldSpec:
    name: str
    attr: str
    type: str
    versions: Versions
    nullable: Versions | None
    tag: int | None
    tagged: Versions | None
    flexible_override: Versions | None
    has_flexible_override: bool
    default: Any
    fields: list[FieldSpec] | None
    struct_name: str | None  # for struct and struct-array fields
    # Kafka semantics: a non-default value of an ignorable field is dropped when encoding a
    # version without the field; for any other field that is an error.
    ignorable: bool = False

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        return self.type[2:]

    @property
    def is_struct(self) -> bool:
        return self.fields is not None and not self.is_array

    @property
    def is_struct_array(self) -> bool:
        return self.fields is not None and self.is_array

    def present(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return _in(self.nullable, version)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and _in(self.tagged, version)

    def compact_in(self, version: int, flexible: bool) -> bool:
        if self.has_flexible_override:
            return _in(self.flexible_override, version)
        return flexible


@dataclass(slots=True)
class MessageSpec:
    name: str
    kind: str  # request, response, header, data
    api_key: int | None
    valid: Versions
    flexible: Versions | None
    fields: list[FieldSpec] = field(default_factory=list)

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)


def _parse_field(raw: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> FieldSpec:
    type_ = raw["type"]
    base = type_[2:] if type_.startswith("[]") else type_
    sub = raw.get("fields")
    struct_name: str | None = None
    if base and base[0].isupper():
        struct_name = base
        if sub is None:
            sub = common[base]
    versions = Versions.parse(raw["versions"])
    if versions is None:
        raise ValueError(f"field {raw['name']} has no versions")
    return FieldSpec(
        name=raw["name"],
        attr=snake_case(raw["name"]),
        type=type_,
        versions=versions,
        nullable=Versions.parse(raw.get("nullableVersions")),
        tag=raw.get("tag"),
        tagged=Versions.parse(raw.get("taggedVersions")),
        flexible_override=Versions.parse(raw.get("flexibleVersions")),
        has_flexible_override="flexibleVersions" in raw,
        default=raw.get("default"),
        fields=[_parse_field(f, common) for f in sub] if sub is not None else None,
        struct_name=struct_name,
        ignorable=bool(raw.get("ignorable", False)),
    )


def load_message(name: str) -> MessageSpec:
    raw = load_spec(name)
    common = {s["name"]: s["fields"] for s in raw.get("commonStructs", [])}
    valid = Versions.parse(raw["validVersions"])
    assert valid is not None, name
    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=valid,
        flexible=Versions.parse(raw.get("flexibleVersions")),
        fields=[_parse_field(f, common) for f in raw["fields"]],
    )
