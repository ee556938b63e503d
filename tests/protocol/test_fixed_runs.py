"""A run of fixed-width fields is read with the byte after it and written with it.

The generator reads a struct's compact length or tag count in the same unpack as the fixed fields
before it, and packs them together on the way out (docs/performance.md#the-codecs-one-unpack-per-run-of-fixed-fields).
These cases take the paths that byte's usual value (< 128, or an empty tag section) skips.
"""

from __future__ import annotations

from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
    decode_offset_commit_request_v7,
    decode_offset_commit_request_v9,
    decode_offset_commit_response_v8,
    encode_offset_commit_request_v7,
    encode_offset_commit_request_v9,
    encode_offset_commit_response_v8,
)
from protocol.messages.offset_fetch import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopics,
    decode_offset_fetch_response_v8,
    encode_offset_fetch_response_v8,
)


def _commit(metadata: str | None) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(7, 1234, 5, -1, metadata)
    return OffsetCommitRequest("g", 3, "m", None, -1, [OffsetCommitRequestTopic("t", partitions=[partition])])


def test_a_long_string_after_fixed_fields_takes_a_two_byte_length() -> None:
    metadata = "x" * 300
    out = bytearray()
    encode_offset_commit_request_v9(_commit(metadata), out)
    # ... partition 7, offset 1234, epoch 5, then the length 301 as a two-byte uvarint.
    assert b"\x00\x00\x00\x07" + (1234).to_bytes(8, "big") + b"\x00\x00\x00\x05\xad\x02" + b"x" * 300 in out
    decoded, pos = decode_offset_commit_request_v9(bytes(out), 0)
    assert pos == len(out)
    assert decoded == _commit(metadata)


def test_a_null_or_empty_string_after_fixed_fields() -> None:
    for metadata, length in ((None, b"\x00"), ("", b"\x01")):
        out = bytearray()
        encode_offset_commit_request_v9(_commit(metadata), out)
        assert b"\x00\x00\x00\x05" + length + b"\x00" in out
        decoded, pos = decode_offset_commit_request_v9(bytes(out), 0)
        assert (decoded, pos) == (_commit(metadata), len(out))


def test_a_tag_section_after_fixed_fields_is_skipped() -> None:
    frame = (
        b"\x00\x00\x00\x00"  # throttle time
        + b"\x02\x02t"  # one topic, "t"
        + b"\x02"  # one partition
        + b"\x00\x00\x00\x03\x00\x00"  # partition 3, error 0
        + b"\x01\x05\x03abc"  # its tag section: one unknown tag (5), 3 bytes
        + b"\x00"  # the topic's tag section
        + b"\x00"  # the message's
    )
    decoded, pos = decode_offset_commit_response_v8(frame, 0)
    assert pos == len(frame)
    expected = OffsetCommitResponse(
        0, [OffsetCommitResponseTopic("t", partitions=[OffsetCommitResponsePartition(3, 0)])]
    )
    assert decoded == expected
    out = bytearray()
    encode_offset_commit_response_v8(expected, out)
    assert bytes(out) == frame.replace(b"\x01\x05\x03abc", b"\x00")


def test_fixed_fields_on_both_sides_of_a_string() -> None:
    partitions = [
        OffsetFetchResponsePartitions(1, 10, -1, None, 0),
        OffsetFetchResponsePartitions(2, 20, 4, "m" * 200, 3),
        OffsetFetchResponsePartitions(3, 30, 4, "", 0),
    ]
    message = OffsetFetchResponse(
        0, groups=[OffsetFetchResponseGroup("g", [OffsetFetchResponseTopics("t", partitions=partitions)], 0)]
    )
    out = bytearray()
    encode_offset_fetch_response_v8(message, out)
    assert b"\x00\x00\x00\x01" + (10).to_bytes(8, "big") + b"\xff\xff\xff\xff\x00\x00\x00\x00" in out
    assert b"\x00\x04\xc9\x01" + b"m" * 200 + b"\x00\x03\x00" in out
    decoded, pos = decode_offset_fetch_response_v8(bytes(out), 0)
    assert (decoded, pos) == (message, len(out))


def test_an_empty_string_with_a_tag_section_after_it() -> None:
    out = bytearray()
    encode_offset_commit_request_v9(_commit(""), out)
    plain = b"\x00\x00\x00\x05\x01\x00"  # epoch 5, the empty metadata, no tags
    assert out.count(plain) == 1
    tagged = bytes(out).replace(plain, b"\x00\x00\x00\x05\x01\x01\x05\x02hi")
    decoded, pos = decode_offset_commit_request_v9(tagged, 0)
    assert (decoded, pos) == (_commit(""), len(tagged))


def test_an_empty_string_is_written_with_the_fields_around_it() -> None:
    partition = OffsetFetchResponsePartitions(3, 30, 4, "", 9)
    message = OffsetFetchResponse(
        0, groups=[OffsetFetchResponseGroup("g", [OffsetFetchResponseTopics("t", partitions=[partition])], 0)]
    )
    out = bytearray()
    encode_offset_fetch_response_v8(message, out)
    assert b"\x00\x00\x00\x03" + (30).to_bytes(8, "big") + b"\x00\x00\x00\x04\x01\x00\x09\x00" in out
    assert decode_offset_fetch_response_v8(bytes(out), 0) == (message, len(out))


def test_a_fixed_width_length_is_read_and_written_with_the_fields_before_it() -> None:
    """Non-flexible versions: the int16 length of a string joins the pack of the fixed fields."""
    for metadata, length in ((None, b"\xff\xff"), ("", b"\x00\x00"), ("abc", b"\x00\x03abc")):
        out = bytearray()
        encode_offset_commit_request_v7(_commit(metadata), out)
        assert b"\x00\x00\x00\x07" + (1234).to_bytes(8, "big") + b"\x00\x00\x00\x05" + length in out
        assert decode_offset_commit_request_v7(bytes(out), 0) == (_commit(metadata), len(out))
