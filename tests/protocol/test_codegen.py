"""The generated code is current, covers exactly what we serve, and its defaults follow the specs."""

from __future__ import annotations

import copy
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from protocol import wire
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.codegen.spec import FieldSpec
from protocol.messages import CODECS, FLEXIBLE, MESSAGE_CLASSES
from protocol.schemas import spec_source
from tests.protocol.model import (
    NO_KAFKA_PYTHON,
    ZERO_UUID,
    Side,
    full_field_value,
    full_value,
    kp_fields,
    request_side,
    response_side,
    served_pairs,
    set_to_bits,
    side,
    struct_class,
    to_ours,
    to_ours_value,
)

REPO = Path(__file__).resolve().parents[2]


def test_generated_code_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_reads_the_specs_from_a_directory_too(tmp_path: Path) -> None:
    """--specs names another source: the same JSON unpacked from the jar gives the same code."""
    with zipfile.ZipFile(spec_source()) as jar:
        for member in jar.namelist():
            if member.startswith("common/message/") and member.endswith(".json"):
                (tmp_path / Path(member).name).write_bytes(jar.read(member))
    result = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--check", "--specs", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (tmp_path / "OffsetCommitRequest.json").unlink()
    missing = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--check", "--specs", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "OffsetCommitRequest" in missing.stderr


def test_without_the_jar_the_generator_says_how_to_get_it(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--check", "--specs", str(tmp_path / "absent.jar")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and ".ci/setup" in result.stderr


def test_codecs_cover_exactly_the_served_versions() -> None:
    served = {(int(k), v) for k, (low, high) in SERVED_VERSIONS.items() for v in range(low, high + 1)}
    assert set(CODECS) == served
    assert set(MESSAGE_CLASSES) == {int(k) for k in SERVED_VERSIONS}
    assert set(FLEXIBLE) <= served
    for key, version in served:
        assert ((key, version) in FLEXIBLE) == request_side(ApiKey(key)).msg.is_flexible(version)
        # Request and response flexibility always agree in the specs; the wire layer relies on it.
        assert ((key, version) in FLEXIBLE) == response_side(ApiKey(key)).msg.is_flexible(version)
        assert MESSAGE_CLASSES[key] == (request_side(ApiKey(key)).ours, response_side(ApiKey(key)).ours)
        for codec in CODECS[(key, version)]:
            assert callable(codec)


@pytest.mark.parametrize("key", sorted(SERVED_VERSIONS), ids=lambda k: ApiKey(k).name)
def test_versions_outside_the_window_are_unsupported(key: ApiKey) -> None:
    low, high = SERVED_VERSIONS[key]
    for version in (low - 1, high + 1, 0x7FFF, -1):
        if low <= version <= high:
            continue
        # A well-formed ApiVersions v0 request with the tested key and version written into its header.
        frame = wire.encode_request(
            ApiKey.API_VERSIONS, 0, 77, "cid", request_side(ApiKey.API_VERSIONS).ours()
        )
        raw = bytearray(frame[4:])
        raw[0:4] = int(key).to_bytes(2, "big") + version.to_bytes(2, "big", signed=True)
        with pytest.raises(wire.UnsupportedApi) as info:
            wire.decode_request(bytes(raw))
        assert (info.value.api_key, info.value.api_version) == (key, version)
        assert (info.value.correlation_id, info.value.client_id) == (77, "cid")


def test_unknown_api_key_is_unsupported() -> None:
    for key in (4, 5, 61, 1000, -1):
        with pytest.raises(wire.UnsupportedApi):
            wire.decode_request(key.to_bytes(2, "big", signed=True) + b"\x00\x00\x00\x00\x00\x05\xff\xff")


# kafka-python's json_patch changes these defaults away from the spec (ours follow the spec,
# as Kafka's generated Java classes do).
KP_PATCHED_DEFAULTS = {("ListOffsetsRequest", "replica_id"), ("CreatePartitionsTopic", "assignments")}


def _default_pairs(
    module: Any, cls: type[Any], kp_struct: Any, fields: list[FieldSpec]
) -> list[tuple[str, Any, Any]]:
    instance = cls()
    out = []
    for f, kf in zip(fields, kp_fields(kp_struct, fields), strict=True):
        if kf is None:
            continue  # a Kafka 4.4 field kafka-python lacks: tests/kafka checks it against Kafka
        ours = getattr(instance, f.attr)
        if f.fields is not None:
            inner = kf.raw.array_of if kf.raw.is_struct_array() else kf.raw
            out += _default_pairs(module, struct_class(module, f), inner, f.fields)
            if not f.is_array:
                assert ours == (None if f.default == "null" else struct_class(module, f)())
                continue
        if (cls.__name__, f.attr) in KP_PATCHED_DEFAULTS:
            continue
        theirs = kf.raw.default
        if f.type == "uuid":
            theirs = ZERO_UUID if theirs is None else theirs.bytes
        elif kf.bitfield:
            theirs = set_to_bits(theirs)
        out.append((f"{cls.__name__}.{f.attr}", ours, theirs))
    return out


def _sides() -> list[Side]:
    """Every served message kafka-python has a class for (test_golden.py checks the others' defaults)."""
    sides = [
        s
        for key in sorted(SERVED_VERSIONS)
        if key not in NO_KAFKA_PYTHON
        for s in (request_side(key), response_side(key))
    ]
    return [
        *sides,
        side("ConsumerProtocolSubscription", "consumer_protocol"),
        side("ConsumerProtocolAssignment", "consumer_protocol"),
    ]


@pytest.mark.parametrize("s", _sides(), ids=lambda s: s.msg.name)
def test_defaults_match_kafka_python(s: Side) -> None:
    pairs = _default_pairs(s.module, s.ours, s.kp._struct, s.msg.fields)
    mismatched = [
        (name, ours, theirs)
        for name, ours, theirs in pairs
        if ours != theirs or type(ours) is not type(theirs)
    ]
    assert not mismatched


def _absent_fields(
    fields: list[FieldSpec], version: int, path: tuple[tuple[str, bool], ...] = ()
) -> list[tuple[tuple[tuple[str, bool], ...], FieldSpec]]:
    """(path to the holding struct, field) for every field absent in ``version``, at every depth
    reachable through present struct fields (arrays through their first element)."""
    out: list[tuple[tuple[tuple[str, bool], ...], FieldSpec]] = []
    for f in fields:
        if not f.present(version):
            out.append((path, f))
        elif f.fields is not None:
            out += _absent_fields(f.fields, version, (*path, (f.attr, f.is_array)))
    return out


def _absent_cases() -> list[tuple[ApiKey, int, bool]]:
    return [
        (key, version, is_request)
        for key, version in served_pairs()
        for is_request in (True, False)
        if _absent_fields((request_side(key) if is_request else response_side(key)).msg.fields, version)
    ]


@pytest.mark.parametrize(
    ("key", "version", "is_request"),
    _absent_cases(),
    ids=lambda v: v.name if isinstance(v, ApiKey) else str(v),
)
def test_fields_absent_in_a_version(key: ApiKey, version: int, is_request: bool) -> None:
    """A non-default value of a field the version lacks: dropped if the field is ignorable,
    else refused (Kafka's UnsupportedVersionException), at every nesting depth."""
    s = request_side(key) if is_request else response_side(key)
    encode = CODECS[(key, version)][1 if is_request else 3]
    base = to_ours(s, full_value(s.msg.fields, version), version)
    expected = bytearray()
    encode(base, expected)
    for path, f in _absent_fields(s.msg.fields, version):
        obj = copy.deepcopy(base)
        holder = obj
        for attr, is_array in path:
            holder = getattr(holder, attr)
            if is_array:
                holder = holder[0]
        # A value set as in the versions that have the field (struct fields fully populated).
        value = to_ours_value(s.module, f, full_field_value(f, f.versions.low), f.versions.low)
        default = getattr(type(holder)(), f.attr)
        if value == default and isinstance(value, bool | int):
            value = not value if isinstance(value, bool) else value + 1
        assert value != default, f.name
        setattr(holder, f.attr, value)
        out = bytearray()
        if f.ignorable:
            encode(obj, out)
            assert out == expected, f.name
        else:
            with pytest.raises(ValueError, match=f"non-default {f.name} at version {version}"):
                encode(obj, out)
