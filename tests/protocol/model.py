"""Spec-driven test model shared by the codec tests.

The field trees walked here come from the same Kafka JSON specs the generator reads
(``protocol.codegen.spec.load_message``), not from the generated code:

* hypothesis strategies producing *plain* values (nested dicts keyed by our snake_case
  attribute names, one entry per field present in the version; tagged fields only sometimes),
* builders turning a plain value into one of our generated dataclasses or into a
  kafka-python object,
* canonicalisers turning either side back into a plain value, normalising the few places
  where kafka-python represents a field differently (uuid.UUID / None for the zero uuid,
  ``authorized_operations`` as a set of bit indexes, memoryview bytes, a missing tagged struct).
"""

from __future__ import annotations

import functools
import importlib
import uuid
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from hypothesis import strategies as st

from protocol.apis import SERVED_VERSIONS, SPEC_NAMES, ApiKey
from protocol.codegen.spec import FieldSpec, MessageSpec, load_message, snake_case

INT_RANGES: Final[dict[str, tuple[int, int]]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
ZERO_UUID: Final = bytes(16)
BYTES_TYPES: Final = ("bytes", "records")

# kafka-python modules holding the message classes of the APIs we serve.
_KP_MODULES: Final = (
    "kafka.protocol.producer.produce",
    "kafka.protocol.producer.transaction",
    "kafka.protocol.consumer.fetch",
    "kafka.protocol.consumer.offsets",
    "kafka.protocol.consumer.group",
    "kafka.protocol.metadata.metadata",
    "kafka.protocol.metadata.find_coordinator",
    "kafka.protocol.metadata.api_versions",
    "kafka.protocol.admin.groups",
    "kafka.protocol.admin.topics",
    "kafka.protocol.admin.cluster",
    "kafka.protocol.admin.users",
    "kafka.protocol.consumer.metadata",
    "kafka.protocol.sasl",
    "kafka.protocol.admin.acl",
    "kafka.protocol.admin.configs",
)
_KP_EXTRA_MODULES: Final = (
    "kafka.protocol.api_header",
    "kafka.protocol.old.commit",
    "kafka.protocol.old.admin",
    "kafka.protocol.old.list_offsets",
    "kafka.protocol.old.fetch",
    "kafka.protocol.old.produce",
    "kafka.protocol.old.types",
)


def _import_kafka_python() -> None:
    # kafka-python 3.0.12 builds its classes at import time from JSON read with the deprecated
    # importlib.resources.read_text; the warning is attributed to importlib, so the project's
    # "ignore::DeprecationWarning:kafka.*" filter does not catch it. Import everything up front.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in _KP_MODULES + _KP_EXTRA_MODULES:
            importlib.import_module(name)


_import_kafka_python()


# APIs kafka-python 3.0.12 has no classes for: their oracle is the hand-computed bytes of
# test_golden.py, or for BROKER_ORACLE a real Kafka 4.4 broker (tests/kafka).
NO_KAFKA_PYTHON: Final = frozenset(
    {
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        ApiKey.STREAMS_GROUP_HEARTBEAT,
        ApiKey.STREAMS_GROUP_DESCRIBE,
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
    }
)
BROKER_ORACLE: Final = frozenset({ApiKey.STREAMS_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_DESCRIBE})


def served_pairs() -> list[tuple[ApiKey, int]]:
    return [(key, v) for key, (low, high) in sorted(SERVED_VERSIONS.items()) for v in range(low, high + 1)]


def kafka_python_max(key: ApiKey) -> int:
    """The newest version kafka-python's classes know for both messages of an API."""
    request, response = (kp_class(SPEC_NAMES[key] + kind) for kind in ("Request", "Response"))
    return min(int(request.max_version), int(response.max_version))


def kafka_python_pairs() -> list[tuple[ApiKey, int]]:
    """The served (API, version) pairs kafka-python's classes can be the oracle for."""
    return [
        (key, v) for key, v in served_pairs() if key not in NO_KAFKA_PYTHON and v <= kafka_python_max(key)
    ]


def golden_pairs() -> list[tuple[ApiKey, int]]:
    """The served pairs without a kafka-python oracle: checked against hand-computed bytes."""
    return [pair for pair in served_pairs() if pair[0] in NO_KAFKA_PYTHON and pair[0] not in BROKER_ORACLE]


def kafka_broker_pairs() -> list[tuple[ApiKey, int]]:
    """Served versions newer than kafka-python's classes (Kafka 4.4 additions): their oracle is
    a real Kafka 4.4 broker (tests/kafka/test_codecs_against_kafka.py)."""
    return [
        (key, v)
        for key, v in served_pairs()
        if key in BROKER_ORACLE or (key not in NO_KAFKA_PYTHON and v > kafka_python_max(key))
    ]


def pair_id(pair: tuple[ApiKey, int]) -> str:
    return f"{pair[0].name}-v{pair[1]}"


def kp_import(module: str, name: str) -> Any:
    """``from module import name`` for kafka-python (its modules are imported above)."""
    assert module in _KP_MODULES + _KP_EXTRA_MODULES, module
    return getattr(importlib.import_module(module), name)


@functools.cache
def kp_class_or_none(name: str) -> Any:
    """The kafka-python 3.x class called ``name`` (e.g. "JoinGroupRequest"), or None."""
    for module_name in _KP_MODULES:
        cls = getattr(importlib.import_module(module_name), name, None)
        if cls is not None:
            return cls
    return None


def kp_class(name: str) -> Any:
    cls = kp_class_or_none(name)
    if cls is None:
        raise LookupError(f"kafka-python has no class {name}")
    return cls


@functools.cache
def spec(name: str) -> MessageSpec:
    return load_message(name)


@dataclass(frozen=True)
class Side:
    """One message (request or response or data) of one API, as seen by both implementations."""

    msg: MessageSpec
    module: ModuleType  # our generated module holding its classes
    kp: Any  # the kafka-python class, None for the NO_KAFKA_PYTHON APIs

    @property
    def ours(self) -> type[Any]:
        cls: type[Any] = getattr(self.module, self.msg.name)
        return cls


@functools.cache
def side(name: str, module: str) -> Side:
    return Side(spec(name), importlib.import_module(f"protocol.messages.{module}"), kp_class_or_none(name))


def request_side(key: ApiKey) -> Side:
    return side(SPEC_NAMES[key] + "Request", snake_case(SPEC_NAMES[key]))


def response_side(key: ApiKey) -> Side:
    return side(SPEC_NAMES[key] + "Response", snake_case(SPEC_NAMES[key]))


def present(fields: list[FieldSpec], version: int) -> list[FieldSpec]:
    return [f for f in fields if f.present(version)]


# ---- strategies -------------------------------------------------------------------------

_short_text = st.text(st.characters(codec="utf-8"), max_size=8)
# Strings and bytes long enough for a 2-byte length varint in compact encodings.
_long_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=3).map(
    lambda s: s * (128 // len(s.encode()) + 1)
)
_short_bytes = st.binary(max_size=8)
_long_bytes = st.binary(min_size=1, max_size=3).map(lambda b: b * (128 // len(b) + 1))


def _scalar_strategy(type_: str, long: bool) -> st.SearchStrategy[Any]:
    if type_ in INT_RANGES:
        low, high = INT_RANGES[type_]
        return st.integers(low, high)
    if type_ == "bool":
        return st.booleans()
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "string":
        return _short_text | _long_text if long else _short_text
    if type_ in BYTES_TYPES:
        return _short_bytes | _long_bytes if long else _short_bytes
    if type_ == "uuid":
        return st.just(ZERO_UUID) | st.binary(min_size=16, max_size=16)
    raise ValueError(f"no strategy for {type_}")


def _value_strategy(f: FieldSpec, version: int, long: bool) -> st.SearchStrategy[Any]:
    strategy: st.SearchStrategy[Any]
    if f.fields is not None:
        inner = struct_strategy(f.fields, version, long)
        strategy = st.lists(inner, max_size=3) if f.is_array else inner
    elif f.is_array:
        elem = _scalar_strategy(f.elem_type, long)
        strategy = st.lists(elem, max_size=3)
        if long:  # occasionally an array long enough for a 2-byte count varint
            strategy |= elem.map(lambda e: [e] * 130)
    else:
        strategy = _scalar_strategy(f.type, long)
    if f.nullable_in(version):
        strategy = st.none() | strategy
    return strategy


def struct_strategy(
    fields: list[FieldSpec], version: int, long: bool = True
) -> st.SearchStrategy[dict[str, Any]]:
    """Plain values of a struct: every untagged field present in ``version``, tagged ones sometimes.

    ``long`` allows strings, bytes and arrays long enough to need 2-byte compact lengths."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in present(fields, version):
        (optional if f.tagged_in(version) else required)[f.attr] = _value_strategy(f, version, long)
    return st.fixed_dictionaries(required, optional=optional)


@functools.cache
def message_strategy(name: str, version: int, long: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    return struct_strategy(spec(name).fields, version, long)


# ---- our dataclasses ------------------------------------------------------------------------


def to_ours(side_: Side, value: dict[str, Any], version: int) -> Any:
    return _ours_struct(side_.module, side_.ours, side_.msg.fields, value, version)


def _ours_struct(
    module: ModuleType, cls: type[Any], fields: list[FieldSpec], value: dict[str, Any], version: int
) -> Any:
    kwargs: dict[str, Any] = {}
    for f in present(fields, version):
        if f.attr in value:
            kwargs[f.attr] = _ours_value(module, f, value[f.attr], version)
    return cls(**kwargs)


def to_ours_value(module: ModuleType, f: FieldSpec, value: Any, version: int) -> Any:
    """One field's plain value as the value of that attribute in our classes."""
    return _ours_value(module, f, value, version)


def _ours_value(module: ModuleType, f: FieldSpec, value: Any, version: int) -> Any:
    if value is None or f.fields is None:
        return list(value) if isinstance(value, list) else value
    cls = struct_class(module, f)
    if f.is_array:
        return [_ours_struct(module, cls, f.fields, e, version) for e in value]
    return _ours_struct(module, cls, f.fields, value, version)


def canon_ours(obj: Any, fields: list[FieldSpec], version: int) -> dict[str, Any]:
    """Plain value of one of our objects: every field present in ``version``."""
    return {f.attr: _canon_ours_value(f, getattr(obj, f.attr), version) for f in present(fields, version)}


def _canon_ours_value(f: FieldSpec, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.fields is not None:
        if f.is_array:
            return [canon_ours(e, f.fields, version) for e in value]
        return canon_ours(value, f.fields, version)
    base = f.elem_type if f.is_array else f.type
    if base in (*BYTES_TYPES, "uuid"):
        return [bytes(e) for e in value] if f.is_array else bytes(value)
    return list(value) if f.is_array else value


def ours_default(cls: type[Any], f: FieldSpec, version: int) -> Any:
    """The plain value of a field's default in our class ``cls`` (what an absent tagged field means)."""
    return _canon_ours_value(f, getattr(cls(), f.attr), version)


def struct_class(module: ModuleType, f: FieldSpec) -> type[Any]:
    assert f.struct_name is not None
    cls: type[Any] = getattr(module, f.struct_name)
    return cls


# ---- kafka-python objects -------------------------------------------------------------------


@dataclass(frozen=True)
class KpField:
    """The kafka-python field matching one of our FieldSpecs (same position in the spec)."""

    name: str  # kafka-python attribute name (json_patch may rename)
    bitfield: bool  # kafka-python decodes this int32 as a set of bit indexes
    raw: Any  # the kafka-python field object


# (kafka-python's name, Kafka 4.4's) of fields renamed since kafka-python's specs.
_RENAMED_SINCE_KAFKA_PYTHON: Final = frozenset({("generation_id", "generation_id_or_member_epoch")})


def kp_fields(kp_struct: Any, fields: list[FieldSpec]) -> list[KpField | None]:
    """Pair our fields with kafka-python's, in spec order, checking they describe the same thing.

    kafka-python's specs predate Kafka 4.4: a field only Kafka 4.4 has (None here) exists only in
    versions kafka-python does not know, and a field only kafka-python has (e.g.
    DescribeConfigsResponse's IsDefault) only in versions we do not serve."""
    theirs = list(kp_struct._fields)

    def same(ours: FieldSpec, kf: Any) -> bool:
        # kafka-python's json_patch turns *AuthorizedOperations int32 into a "bitfield".
        if kf.type_str == "bitfield":
            return ours.type == "int32" and ours.attr.endswith("authorized_operations")
        return bool(kf.name == ours.attr) or (kf.name, ours.attr) in _RENAMED_SINCE_KAFKA_PYTHON

    out: list[KpField | None] = []
    j = 0
    for ours in fields:
        match = next((k for k in range(j, len(theirs)) if same(ours, theirs[k])), None)
        if match is None:
            out.append(None)
            continue
        skipped = theirs[j:match]  # kafka-python's own fields, of versions we do not serve
        assert not any(any(same(f, kf) for f in fields) for kf in skipped), (kp_struct, ours.name)
        kf = theirs[match]
        j = match + 1
        out.append(KpField(kf.name, kf.type_str == "bitfield", kf))
    return out


def _kp_inner_struct(kf: Any) -> Any:
    return kf.array_of if kf.is_struct_array() else kf


def bits_to_set(value: int) -> set[int] | None:
    unsigned = value & 0xFFFFFFFF
    bits = {i for i in range(32) if unsigned >> i & 1}
    return None if bits == {31} else bits


def set_to_bits(bits: set[int] | None) -> int:
    unsigned = sum(1 << b for b in ({31} if bits is None else bits))
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def _require_kp(side_: Side) -> None:
    assert side_.kp is not None, f"kafka-python has no {side_.msg.name}: test it in test_golden.py"


def to_kp(side_: Side, value: dict[str, Any], version: int) -> Any:
    _require_kp(side_)
    kwargs = _kp_kwargs(side_.module, side_.ours, side_.kp._struct, side_.msg.fields, value, version)
    if side_.msg.kind == "data":  # ApiData classes (consumer protocol) are not subscriptable
        return side_.kp(version=version, **kwargs)
    return side_.kp[version](**kwargs)


def _kp_kwargs(
    module: ModuleType,
    cls: type[Any],
    kp_struct: Any,
    fields: list[FieldSpec],
    value: dict[str, Any],
    version: int,
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for f, kf in zip(fields, kp_fields(kp_struct, fields), strict=True):
        if not f.present(version) or f.attr not in value:
            continue
        assert kf is not None, f"kafka-python does not know {f.name} (v{version})"
        v = value[f.attr]
        if f.tagged_in(version) and v == ours_default(cls, f, version):
            # Kafka (and our encoder) omit a tagged field holding its default; kafka-python
            # compares with *its* default (None for uuid and struct fields), so give it that.
            continue
        kwargs[kf.name] = _kp_value(module, f, kf, v, version)
    return kwargs


def _kp_value(module: ModuleType, f: FieldSpec, kf: KpField, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.fields is not None:
        inner = _kp_inner_struct(kf.raw)
        data_class = inner.data_class

        def build(v: dict[str, Any]) -> Any:
            kwargs = _kp_kwargs(module, struct_class(module, f), inner, f.fields or [], v, version)
            return data_class(version=version, **kwargs)

        return [build(e) for e in value] if f.is_array else build(value)
    base = f.elem_type if f.is_array else f.type

    def conv(v: Any) -> Any:
        if base == "uuid":
            return uuid.UUID(bytes=v)
        if kf.bitfield:
            return bits_to_set(v)
        return v

    return [conv(e) for e in value] if f.is_array else conv(value)


def canon_kp(side_: Side, obj: Any, version: int) -> dict[str, Any]:
    _require_kp(side_)
    return _canon_kp_struct(side_.module, side_.ours, side_.kp._struct, side_.msg.fields, obj, version)


def _canon_kp_struct(
    module: ModuleType, cls: type[Any], kp_struct: Any, fields: list[FieldSpec], obj: Any, version: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f, kf in zip(fields, kp_fields(kp_struct, fields), strict=True):
        if f.present(version):
            assert kf is not None, f"kafka-python does not know {f.name} (v{version})"
            out[f.attr] = _canon_kp_value(module, cls, f, kf, getattr(obj, kf.name), version)
    return out


def _canon_kp_value(
    module: ModuleType, cls: type[Any], f: FieldSpec, kf: KpField, value: Any, version: int
) -> Any:
    if f.fields is not None:
        if value is None:
            # kafka-python leaves an absent tagged struct as None; Kafka means its default.
            return ours_default(cls, f, version) if f.tagged_in(version) else None
        inner = _kp_inner_struct(kf.raw)
        inner_cls = struct_class(module, f)
        if f.is_array:
            return [_canon_kp_struct(module, inner_cls, inner, f.fields, e, version) for e in value]
        return _canon_kp_struct(module, inner_cls, inner, f.fields, value, version)
    base = f.elem_type if f.is_array else f.type

    def conv(v: Any) -> Any:
        if base == "uuid":
            return ZERO_UUID if v is None else v.bytes
        if kf.bitfield:
            return set_to_bits(v)
        if v is not None and base in BYTES_TYPES:
            return bytes(v)
        return v

    if f.is_array:
        return None if value is None else [conv(e) for e in value]
    return conv(value)


# ---- a deterministic "everything set" value ---------------------------------------------------

_FULL_SCALARS: Final[dict[str, Any]] = {
    **dict.fromkeys(INT_RANGES, 7),
    "bool": True,
    "float64": 1.5,
    "string": "ab",
    "bytes": b"ab",
    "records": b"ab",
    "uuid": bytes(range(1, 17)),
}


def full_field_value(f: FieldSpec, version: int) -> Any:
    """The plain value full_value() gives one field."""
    if f.fields is not None:
        inner = full_value(f.fields, version)
        return [inner] if f.is_array else inner
    scalar = _FULL_SCALARS[f.elem_type if f.is_array else f.type]
    return [scalar] if f.is_array else scalar


def full_value(fields: list[FieldSpec], version: int) -> dict[str, Any]:
    """A plain value with every present field (tagged ones too) set and one element per array,
    so that its encoding contains every length prefix and tag the version has."""
    return {f.attr: full_field_value(f, version) for f in present(fields, version)}


# ---- type check of decoded objects ------------------------------------------------------------

_SCALAR_TYPES: Final[dict[str, type]] = {
    **dict.fromkeys(INT_RANGES, int),
    "bool": bool,
    "float64": float,
    "string": str,
    "bytes": bytes,
    "records": bytes,
    "uuid": bytes,
}


def assert_well_typed(
    module: ModuleType, cls: type[Any], fields: list[FieldSpec], obj: Any, version: int
) -> None:
    """What a decoder returns matches the spec: right class, no None where the version does not
    allow it, ints in range, absent fields at their defaults."""
    assert type(obj) is cls, (obj, cls)
    defaults = cls()
    for f in fields:
        value = getattr(obj, f.attr)
        if not f.present(version):
            assert value == getattr(defaults, f.attr), f.name
            continue
        if value is None:
            assert f.nullable_in(version), f"non-nullable {f.name} decoded as None"
            continue
        if f.is_array:
            assert type(value) is list, f.name
            for e in value:
                _assert_element(module, f, e, version)
        else:
            _assert_element(module, f, value, version)


def _assert_element(module: ModuleType, f: FieldSpec, value: Any, version: int) -> None:
    if f.fields is not None:
        assert_well_typed(module, struct_class(module, f), f.fields, value, version)
        return
    base = f.elem_type if f.is_array else f.type
    assert type(value) is _SCALAR_TYPES[base], (f.name, value)
    if base in INT_RANGES and isinstance(value, int):
        low, high = INT_RANGES[base]
        assert low <= value <= high, (f.name, value)
    if base == "uuid" and isinstance(value, bytes):
        assert len(value) == 16, f.name
