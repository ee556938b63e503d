"""Members blob, consumer member topics blob and topic configs encodings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.codec import (
    CodecError,
    decode_classic_protocols,
    decode_configs,
    decode_consumer_topics,
    decode_members,
    encode_classic_protocols,
    encode_configs,
    encode_consumer_topics,
    encode_members,
)
from storage.records import MemberRecord, TopicPartitionList
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


partition_lists = st.lists(
    st.tuples(st.text(), st.lists(st.integers(0, 2**31 - 1), max_size=6).map(tuple)), max_size=5
).map(tuple)


@given(st.lists(st.text(), max_size=5).map(tuple), partition_lists, partition_lists, partition_lists)
def test_consumer_topics_round_trip(
    subscribed: tuple[str, ...],
    assigned: TopicPartitionList,
    pending: TopicPartitionList,
    target: TopicPartitionList,
) -> None:
    blob = encode_consumer_topics(subscribed, assigned, pending, target)
    assert decode_consumer_topics(blob) == (subscribed, assigned, pending, target)


def test_consumer_topics_blob_is_version_prefixed_and_compact() -> None:
    assert encode_consumer_topics((), (), (), ()) == b"\x01" + b"\x00" * 16
    blob = encode_consumer_topics(("t",), (("t", (0, 1, 2)),), (), (("t", (0, 1, 2)),))
    assert blob[0] == 1
    assert len(blob) == 1 + 4 + 5 + 2 * (4 + 5 + 4 + 12) + 4
    # 1000 partitions cost 4 bytes each.
    many = encode_consumer_topics((), (("t", tuple(range(1000))),), (), ())
    assert len(many) < 4100


@pytest.mark.parametrize(
    "blob",
    [b"", b"\x02" + b"\x00" * 16, b"\x01" + b"\x00" * 15, b"\x01" + b"\x00" * 16 + b"\x00"],
    ids=["empty", "unknown-version", "truncated", "trailing-bytes"],
)
def test_corrupt_consumer_topics_blob_is_detected(blob: bytes) -> None:
    with pytest.raises(CodecError):
        decode_consumer_topics(blob)


def test_every_truncation_of_a_consumer_topics_blob_is_detected() -> None:
    blob = encode_consumer_topics(("a", "b"), (("a", (1, 2)),), (("b", ()),), (("a", (1,)), ("b", (0,))))
    for cut in range(len(blob)):
        with pytest.raises(CodecError):
            decode_consumer_topics(blob[:cut])


def test_huge_count_in_a_corrupt_blob_is_detected_without_allocating() -> None:
    blob = b"\x01\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01t" + b"\xff\xff\xff\xff"
    with pytest.raises(CodecError):
        decode_consumer_topics(blob)


@pytest.mark.parametrize(
    "assigned",
    [(("t", (-1,)),), (("t", (2**31,)),), ((1, (0,)),), (("t", ("0",)),), (("\ud800", (0,)),)],
    ids=["negative", "beyond-int32", "name-not-str", "partition-not-int", "lone-surrogate"],
)
def test_unencodable_consumer_topics_are_a_codec_error(assigned: TopicPartitionList) -> None:
    with pytest.raises(CodecError):
        encode_consumer_topics((), assigned, (), ())


@given(st.lists(st.tuples(st.text(), st.binary(max_size=20)), max_size=4).map(tuple))
def test_classic_protocols_round_trip(protocols: tuple[tuple[str, bytes], ...]) -> None:
    assert decode_classic_protocols(encode_classic_protocols(protocols)) == protocols


def test_every_truncation_of_a_classic_protocols_blob_is_detected() -> None:
    blob = encode_classic_protocols((("range", b"\x00\x01"), ("roundrobin", b"")))
    assert blob[0] == 1
    for cut in range(len(blob)):
        with pytest.raises(CodecError):
            decode_classic_protocols(blob[:cut])
    with pytest.raises(CodecError):
        decode_classic_protocols(blob + b"\x00")
