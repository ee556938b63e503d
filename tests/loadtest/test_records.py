"""The record-batch codec of the pipeline mode, against kafka-python's as the oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

from loadtest.records import RecordError, crc32c, decode_batches, encode_batch

_field = st.one_of(st.none(), st.binary(max_size=300))


@given(st.binary(max_size=2000))
def test_crc32c_matches_kafka_python(data: bytes) -> None:
    assert crc32c(data) == calc_crc32c(data)


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C catalogue check value


@given(st.lists(st.tuples(_field, _field), min_size=1, max_size=30), st.integers(0, 2**41))
def test_our_batches_decode_in_kafka_python_and_back(
    records: list[tuple[bytes | None, bytes | None]], ts: int
) -> None:
    batch = encode_batch(records, ts)
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc()
    assert [(r.key, r.value, r.timestamp, r.offset) for r in theirs] == [
        (k, v, ts, i) for i, (k, v) in enumerate(records)
    ]
    ours = list(decode_batches(batch))
    assert [(r.key, r.value, r.timestamp_ms, r.offset) for r in ours] == [
        (k, v, ts, i) for i, (k, v) in enumerate(records)
    ]


def _kafka_python_batch(base_offset: int, values: list[bytes], ts: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i, value in enumerate(values):
        builder.append(i, timestamp=ts + i, key=None, value=value, headers=[])
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data)  # the CRC does not cover the base offset


def test_fetched_record_sets_of_several_batches_and_a_partial_one() -> None:
    first = _kafka_python_batch(100, [b"a", b"b"], 1000)
    second = _kafka_python_batch(102, [b"c"], 2000)
    got = list(decode_batches(first + second + second[:30]))
    assert [(r.offset, r.value, r.timestamp_ms) for r in got] == [
        (100, b"a", 1000), (101, b"b", 1001), (102, b"c", 2000),
    ]  # fmt: skip
    assert list(decode_batches(None)) == [] == list(decode_batches(b""))


def test_a_corrupt_batch_is_an_error() -> None:
    batch = bytearray(encode_batch([(None, b"value")], 5))
    batch[-3] ^= 0xFF
    with pytest.raises(RecordError, match="CRC-32C mismatch"):
        list(decode_batches(bytes(batch)))
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([], 0)
