"""Kafka record batches (magic v2), uncompressed: what the pipeline mode produces and fetches.

Layout (all big-endian): baseOffset int64, batchLength int32 (bytes after this field),
partitionLeaderEpoch int32, magic int8 = 2, crc uint32 (CRC-32C of everything after it),
attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64, producerId
int64, producerEpoch int16, baseSequence int32, record count int32, then the records. A record
is: length, attributes int8, timestampDelta, offsetDelta, key length + key, value length +
value, header count + headers, every integer a zig-zag varint.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

MAGIC: Final = 2
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_HEADER_SIZE: Final = _HEADER.size  # 61
_CRC_START: Final = 21  # attributes: the first byte the CRC covers
_LENGTH_END: Final = 12  # baseOffset + batchLength
_COMPRESSION_MASK: Final = 0x07
_CONTROL_FLAG: Final = 0x20


class RecordError(ValueError):
    """Bytes that are not a valid v2 record batch (bad CRC, truncated record, compression)."""


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE: Final = _crc32c_table()


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli), the checksum of record batches v2."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _write_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise RecordError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise RecordError("varint longer than 10 bytes")


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


def encode_batch(records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed batch of (key, value) records, all with `timestamp_ms`; base offset 0
    (the broker assigns offsets), no producer id (not idempotent)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = bytearray(b"\x00")  # attributes
        _write_varint(record, 0)  # timestamp delta
        _write_varint(record, delta)
        for field in (key, value):
            if field is None:
                _write_varint(record, -1)
            else:
                _write_varint(record, len(field))
                record += field
        _write_varint(record, 0)  # headers
        _write_varint(body, len(record))
        body += record
    size = _HEADER_SIZE + len(body)
    fields = (
        0,
        size - _LENGTH_END,
        -1,
        MAGIC,
        0,
        0,
        len(records) - 1,
        timestamp_ms,
        timestamp_ms,
        -1,
        -1,
        -1,
        len(records),
    )
    header = bytearray(_HEADER.pack(*fields))
    batch = header + body
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[_CRC_START:]))
    return bytes(batch)


def decode_batches(data: bytes | None) -> Iterator[Record]:
    """The records of a Fetch response's record set. A partial batch at the end (the broker
    cuts at max bytes) is skipped; control batches (transaction markers) carry no records."""
    if not data:
        return
    view = memoryview(data)
    pos = 0
    while pos + _HEADER_SIZE <= len(view):
        (base_offset, length, _epoch, magic, crc, attributes, _last_delta, base_ts, _max_ts,
         _pid, _pepoch, _seq, count) = _HEADER.unpack_from(view, pos)  # fmt: skip
        end = pos + _LENGTH_END + length
        if length < _HEADER_SIZE - _LENGTH_END:
            raise RecordError(f"batch at offset {base_offset}: length {length} is too small")
        if end > len(view):
            return  # truncated by the broker
        if magic != MAGIC:
            raise RecordError(f"batch at offset {base_offset}: magic {magic}, only v2 is supported")
        if crc32c(view[pos + _CRC_START : end]) != crc:
            raise RecordError(f"batch at offset {base_offset}: CRC-32C mismatch")
        if attributes & _COMPRESSION_MASK:
            raise RecordError(f"batch at offset {base_offset}: compressed batches are not supported")
        if not attributes & _CONTROL_FLAG:
            yield from _records(view[pos + _HEADER_SIZE : end], base_offset, base_ts, count)
        pos = end


def _records(view: memoryview, base_offset: int, base_ts: int, count: int) -> Iterator[Record]:
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(view, pos)
        end = pos + length
        if length < 0 or end > len(view):
            raise RecordError("truncated record")
        pos += 1  # attributes
        ts_delta, pos = _read_varint(view, pos)
        offset_delta, pos = _read_varint(view, pos)
        fields: list[bytes | None] = []
        for _ in range(2):
            size, pos = _read_varint(view, pos)
            if size < 0:
                fields.append(None)
            else:
                if pos + size > end:
                    raise RecordError("truncated record field")
                fields.append(bytes(view[pos : pos + size]))
                pos += size
        yield Record(base_offset + offset_delta, base_ts + ts_delta, fields[0], fields[1])
        pos = end
