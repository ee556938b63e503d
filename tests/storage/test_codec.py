"""Members blob and topic configs encodings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.codec import CodecError, decode_configs, decode_members, encode_configs, encode_members
from storage.records import MemberRecord
from tests.storage.helpers import member

int32 = st.integers(-(2**31), 2**31 - 1)
members = st.builds(
    MemberRecord,
    member_id=st.text(),
    group_instance_id=st.none() | st.text(),
    client_id=st.text(),
    client_host=st.text(),
    rebalance_timeout_ms=int32,
    session_timeout_ms=int32,
    subscription=st.binary(),
    assignment=st.binary(),
)
texts = st.text(st.characters(codec="utf-8"))


@given(st.lists(members, max_size=5).map(tuple))
def test_members_round_trip(value: tuple[MemberRecord, ...]) -> None:
    assert decode_members(encode_members(value)) == value


@given(st.lists(st.tuples(texts, st.none() | texts), max_size=8).map(tuple))
def test_configs_round_trip(value: tuple[tuple[str, str | None], ...]) -> None:
    encoded = encode_configs(value)
    assert "\x00" not in encoded
    assert decode_configs(encoded) == value


def test_members_blob_is_version_prefixed_and_compact() -> None:
    blob = encode_members((member("m", subscription=b"s", assignment=b"a"),))
    assert blob[0] == 1
    assert len(blob) < 80
    assert encode_members(()) == b"\x01\x00\x00\x00\x00"


@pytest.mark.parametrize(
    "blob",
    [b"", b"\x02\x00\x00\x00\x00", b"\x01\x00\x00\x00\x01", b"\x01\x00\x00\x00\x00\xff"],
    ids=["empty", "unknown-version", "truncated", "trailing-bytes"],
)
def test_corrupt_members_blob_is_detected(blob: bytes) -> None:
    with pytest.raises(CodecError):
        decode_members(blob)


def test_every_truncation_of_a_valid_blob_is_detected() -> None:
    blob = encode_members((member("a"), member("b", group_instance_id="i")))
    for cut in range(len(blob)):
        with pytest.raises(CodecError):
            decode_members(blob[:cut])


def test_unencodable_member_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        encode_members((member(session_timeout_ms=2**31),))
    with pytest.raises(CodecError):
        encode_members((member(subscription="not bytes"),))
