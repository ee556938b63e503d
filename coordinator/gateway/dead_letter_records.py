"""The record batches of dead-letter topics (docs/share-groups.md, "Dead-letter topics"): reading
the key and value of archived records out of a Fetch answer's batches, and building the v2 batch
of dead-letter records (Kafka 4.4's: the context headers, the key and value when copied, the
time of writing as timestamp, no compression)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from coordinator.gateway.old_formats import (
    ConversionError,
    _gunzip,
    _read_field,
    _read_varint,
    _varint,
    crc32c,
)

HEADER_TOPIC: Final = "__dlq.errors.topic"
HEADER_PARTITION: Final = "__dlq.errors.partition"
HEADER_OFFSET: Final = "__dlq.errors.offset"
HEADER_GROUP: Final = "__dlq.errors.group"
HEADER_DELIVERY_COUNT: Final = "__dlq.errors.delivery.count"
HEADER_MESSAGE: Final = "__dlq.errors.message"
CLIENT_REJECT: Final = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED: Final = "Offset delivery count exceeded the threshold."

_BATCH_HEAD: Final = struct.Struct(">qiibIhiqqqhii")
_RECORDS_AT: Final = _BATCH_HEAD.size  # 61
_CRC_FROM: Final = 21  # attributes onwards
_GZIP: Final = 1


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead-letter record: its headers, and the original key and value when copied."""

    headers: tuple[tuple[str, bytes], ...]
    key: bytes | None = None
    value: bytes | None = None


def context_headers(
    topic: str, partition: int, offset: int, group_id: str, delivery_count: int, reason: str
) -> tuple[tuple[str, bytes], ...]:
    """Kafka 4.4's headers, in its order, every value a decimal or UTF-8 string."""
    return (
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_GROUP, group_id.encode()),
        (HEADER_DELIVERY_COUNT, str(delivery_count).encode()),
        (HEADER_MESSAGE, reason.encode()),
    )


def reason_for(delivery_count: int, delivery_count_limit: int) -> str:
    """Why an offset was archived, told by its count as Kafka tells it for resumed archiving."""
    return DELIVERY_COUNT_EXCEEDED if delivery_count >= delivery_count_limit else CLIENT_REJECT


def originals(records: bytes, first: int, last: int) -> dict[int, tuple[bytes | None, bytes | None]]:
    """(key, value) of the offsets ``first..last`` found in the v2 batches of ``records``; a
    batch compressed otherwise than gzip, or damaged, is left out (its records are written with
    the headers only, as Kafka does when it cannot read the originals)."""
    found: dict[int, tuple[bytes | None, bytes | None]] = {}
    pos = 0
    while pos + _RECORDS_AT <= len(records):
        head = _BATCH_HEAD.unpack_from(records, pos)
        base, length, attributes, count = head[0], head[1], head[5], head[12]
        end = pos + 12 + length
        if length <= 0 or end > len(records):
            break
        if base <= last and base + head[6] >= first and head[3] == 2:
            body = records[pos + _RECORDS_AT : end]
            try:
                if attributes & 7 == _GZIP:
                    body = _gunzip(body)
                if attributes & 7 in (0, _GZIP):
                    _read_records(body, base, count, first, last, found)
            except (ConversionError, IndexError, OSError, EOFError):
                pass
        pos = end
    return found


def _read_records(
    body: bytes,
    base: int,
    count: int,
    first: int,
    last: int,
    found: dict[int, tuple[bytes | None, bytes | None]],
) -> None:
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(body, pos)
        end = pos + length
        at = pos + 1  # attributes
        _, at = _read_varint(body, at)  # timestamp delta
        delta, at = _read_varint(body, at)
        key, at = _read_field(body, at)
        value, at = _read_field(body, at)
        if first <= base + delta <= last:
            found[base + delta] = (key, value)
        pos = end


def dead_letter_batch(letters: Sequence[DeadLetter], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch of ``letters`` (no producer id: not idempotent, as Kafka's)."""
    records = bytearray()
    for delta, letter in enumerate(letters):
        body = bytearray(b"\x00")  # attributes
        body += _varint(0) + _varint(delta)
        body += _field(letter.key) + _field(letter.value)
        body += _varint(len(letter.headers))
        for name, value in letter.headers:
            body += _field(name.encode()) + _field(value)
        records += _varint(len(body)) + body
    tail = struct.pack(
        ">hiqqqhii", 0, len(letters) - 1, timestamp_ms, timestamp_ms, -1, -1, -1, len(letters)
    ) + bytes(records)
    crc = crc32c(tail)
    length = 4 + 1 + 4 + len(tail)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + tail


def _field(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data
