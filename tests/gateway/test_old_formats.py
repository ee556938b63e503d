"""Message formats v0/v1 converted at the gateway, checked against kafka-python's own record
codecs (an independent implementation of both formats)."""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from coordinator.gateway import old_formats
from coordinator.gateway.old_formats import ConversionError, batches_to_message_set, message_set_to_batch
from protocol.apis import ApiKey
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.wire import decode_response, encode_request

GZIP, SNAPPY = 1, 2


def legacy(magic: int, entries: list[tuple[int, bytes | None, bytes]], compression: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression, batch_size=1 << 22)
    for offset, (timestamp, key, value) in enumerate(entries):
        builder.append(offset, timestamp if magic else None, key, value)
    return bytes(builder.build())


def v2(base: int, entries: list[tuple[int, bytes | None, bytes]], compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 20)
    for delta, (timestamp, key, value) in enumerate(entries):
        builder.append(delta, timestamp, key, value, [("h", b"dropped")])
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, base)  # the broker's offset: outside the CRC
    return bytes(batch)


def read(records: bytes) -> list[tuple[int, int, int, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, key, value) of every record, each batch's CRC validated."""
    out = []
    memory = MemoryRecords(records)
    while (batch := memory.next_batch()) is not None:
        assert batch.validate_crc()
        out.extend((batch.magic, r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


ENTRIES = [
    (1_700_000_000_000 + i, f"k{i}".encode() if i % 2 else None, f"value-{i}".encode()) for i in range(5)
]


@pytest.mark.parametrize("magic", [0, 1])
def test_a_message_set_becomes_one_v2_batch(magic: int) -> None:
    batch = message_set_to_batch(legacy(magic, ENTRIES))
    records = read(batch)
    assert [(m, o, k, v) for m, o, _t, k, v in records] == [
        (2, i, k, v) for i, (_t, k, v) in enumerate(ENTRIES)
    ]
    if magic == 1:  # magic 0 has no timestamps
        assert [r[2] for r in records] == [t for t, _k, _v in ENTRIES]


def test_a_gzip_wrapper_is_unpacked() -> None:
    batch = message_set_to_batch(legacy(1, ENTRIES, compression=GZIP))
    assert [r[4] for r in read(batch)] == [v for _t, _k, v in ENTRIES]


def test_bad_message_sets_are_refused_with_kafkas_codes() -> None:
    data = bytearray(legacy(1, ENTRIES))
    data[-1] ^= 0xFF
    with pytest.raises(ConversionError) as corrupt:
        message_set_to_batch(bytes(data))
    assert corrupt.value.code == 2  # CORRUPT_MESSAGE
    with pytest.raises(ConversionError) as truncated:
        message_set_to_batch(legacy(1, ENTRIES)[:-3])
    assert truncated.value.code == 2
    wrapper = bytearray(legacy(1, ENTRIES[:1]))
    wrapper[17] |= SNAPPY  # the message's attributes, and its CRC made to match
    struct.pack_into(">I", wrapper, 12, zlib.crc32(bytes(wrapper[16:])))
    with pytest.raises(ConversionError) as codec:
        message_set_to_batch(bytes(wrapper))
    assert codec.value.code == 76  # UNSUPPORTED_COMPRESSION_TYPE


def test_v2_batches_become_magic_1_messages_with_absolute_offsets() -> None:
    records = v2(100, ENTRIES[:3]) + v2(103, ENTRIES[3:], compression=GZIP)
    converted = read(batches_to_message_set(records))
    expected = [(1, 100 + i, t, k, v) for i, (t, k, v) in enumerate(ENTRIES)]
    assert converted == expected


def test_a_partial_batch_at_the_end_and_control_batches_are_left_out() -> None:
    whole = v2(0, ENTRIES[:2])
    control = bytearray(v2(2, ENTRIES[2:3]))
    struct.pack_into(">h", control, 21, 0x20)  # the control bit (its CRC no longer matters here)
    partial = v2(3, ENTRIES[3:])[:-4]
    converted = read(batches_to_message_set(whole + bytes(control) + partial))
    assert [r[1] for r in converted] == [0, 1]


def test_conversion_stops_at_its_budget() -> None:
    records = b"".join(v2(i, [ENTRIES[0]]) for i in range(50))
    small = batches_to_message_set(records, budget=200)
    assert 0 < len(read(small)) < 50


def test_crc32c_matches_the_castagnoli_check_value() -> None:
    assert old_formats.crc32c(b"123456789") == 0xE3069283


def test_only_produce_v0_2_and_fetch_v0_3_are_converted() -> None:
    assert [v for v in range(10) if old_formats.converts(ApiKey.PRODUCE, v)] == [0, 1, 2]
    assert [v for v in range(14) if old_formats.converts(ApiKey.FETCH, v)] == [0, 1, 2, 3]
    assert not old_formats.converts(ApiKey.METADATA, 0)


def test_a_produce_request_too_large_to_convert_is_answered_message_too_large() -> None:
    big = legacy(1, [(0, None, b"x" * 1000)] * 1100)  # over 1 MiB
    body = ProduceRequest(
        None, 1, 1000, [TopicProduceData("t", partition_data=[PartitionProduceData(0, big)])]
    )
    frame = encode_request(ApiKey.PRODUCE, 2, 7, "old", body)[4:]
    with pytest.raises(ConversionError) as refused:
        old_formats.upgrade_request(frame)
    assert refused.value.code == 10  # MESSAGE_TOO_LARGE
    answer = old_formats.produce_error_response(frame, refused.value.code)
    correlation_id, response = decode_response(ApiKey.PRODUCE, 2, answer[4:])
    assert correlation_id == 7
    assert [(p.index, p.error_code) for p in response.responses[0].partition_responses] == [(0, 10)]
