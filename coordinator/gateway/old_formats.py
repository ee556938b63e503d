"""Old clients on modern clusters: message formats v0/v1 converted at the gateway, as Kafka 3.x
brokers did (docs/gateway.md#old-clients-message-formats-v0-and-v1).

Kafka 4.0 dropped message formats v0/v1 (KIP-724) and clusters such as Tansu store only v2
record batches, so a client that produces with Produce v0-2 (message sets) or fetches with
Fetch v0-3 (which read only message sets) gets nothing done. The gateway converts:

* Produce v0-2: each partition's message set becomes one v2 record batch (uncompressed; gzip
  wrappers are unpacked), CRCs checked; the request goes upstream as Produce v3 and the answer
  comes back in the client's version.
* Fetch v0-3: the request goes upstream as Fetch v4 (read uncommitted); every v2 batch of the
  answer becomes magic-1 messages (headers dropped, control batches skipped, gzip unpacked) in
  the client's version. Other compression codecs answer UNSUPPORTED_COMPRESSION_TYPE for that
  partition.

Bounded, since conversion runs on the event loop in Python (about 3 MB/s up, 10 MB/s down on
one core): a Fetch answer converts at most MAX_CONVERTED_BYTES of records (the partitions past
that answer no records; the client fetches them again), and a Produce request larger than
MAX_PRODUCE_BYTES (Kafka clients' default max.request.size) or a decompressed wrapper larger
than MAX_CONVERTED_BYTES is refused with MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from protocol.wire import decode_request, decode_response, encode_request, encode_response

PRODUCE_UPSTREAM_VERSION: Final = 3  # the first Produce version that carries v2 record batches
FETCH_UPSTREAM_VERSION: Final = 4  # the first Fetch version that reads v2 record batches
MAX_CONVERTED_BYTES: Final = 4 * 1024 * 1024
MAX_PRODUCE_BYTES: Final = 1024 * 1024

_GZIP: Final = 1
_CODEC_MASK: Final = 0x07
_LOG_APPEND_TIME: Final = 0x08
_CONTROL: Final = 0x20
_OFFSET_SIZE: Final = struct.Struct(">qi")
_MESSAGE_HEAD: Final = struct.Struct(">Ibb")  # crc, magic, attributes
_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
# v2 batch: base offset, length, leader epoch, magic, crc, attributes, last offset delta,
# base timestamp, max timestamp, producer id, producer epoch, base sequence, record count.
_BATCH_HEAD: Final = struct.Struct(">qiibIhiqqqhii")


class ConversionError(Exception):
    """A message set that cannot be converted; ``code`` is the Kafka error to answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def converts(api_key: int, version: int) -> bool:
    """Whether requests of this version are converted (and their answers converted back)."""
    return (api_key == ApiKey.PRODUCE and version <= 2) or (api_key == ApiKey.FETCH and version <= 3)


# -- requests -------------------------------------------------------------------------------------


def upgraded_version(api_key: int) -> int:
    """The version a converted request goes upstream in."""
    return PRODUCE_UPSTREAM_VERSION if api_key == ApiKey.PRODUCE else FETCH_UPSTREAM_VERSION


def upgrade_request(frame: bytes) -> bytes:
    """The request (no length prefix) as upstream gets it: Produce v3 with v2 batches, or Fetch
    v4. Raises ConversionError (Produce) for a message set it cannot convert."""
    request = decode_request(frame)
    body = request.body
    if request.api_key == ApiKey.PRODUCE:
        if len(frame) > MAX_PRODUCE_BYTES:
            raise ConversionError(ErrorCode.MESSAGE_TOO_LARGE, "request too large to convert")
        for topic in body.topic_data:
            for partition in topic.partition_data:
                partition.records = message_set_to_batch(partition.records or b"")
        version = PRODUCE_UPSTREAM_VERSION
    else:
        body.isolation_level = 0  # read uncommitted: what v0-3 fetches saw
        version = FETCH_UPSTREAM_VERSION
    return encode_request(request.api_key, version, request.correlation_id, request.client_id, body)[4:]


def produce_error_response(frame: bytes, code: int) -> bytes:
    """The answer to a Produce v0-2 request refused by the conversion: ``code`` for every partition."""
    request = decode_request(frame)
    topics = [
        TopicProduceResponse(
            name=topic.name,
            partition_responses=[
                PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
                for p in topic.partition_data
            ],
        )
        for topic in request.body.topic_data
    ]
    return encode_response(
        ApiKey.PRODUCE, request.api_version, request.correlation_id, ProduceResponse(topics)
    )


def downgrade_response(api_key: int, version: int, frame: bytes) -> bytes:
    """Upstream's answer (length prefix included) to a converted request, in the client's version."""
    correlation_id, body = decode_response(api_key, upgraded_version(api_key), frame[4:])
    if api_key == ApiKey.FETCH:
        budget = MAX_CONVERTED_BYTES
        for topic in body.responses:
            for partition in topic.partitions:
                records = partition.records or b""
                if not records or partition.error_code:
                    continue
                if budget <= 0:
                    partition.records = b""  # fetched again by the client
                    continue
                try:
                    partition.records = batches_to_message_set(records, budget)
                except ConversionError as exc:
                    partition.error_code, partition.records = exc.code, b""
                    continue
                budget -= len(partition.records)
    return encode_response(api_key, version, correlation_id, body)


# -- message sets (v0/v1) -> one v2 batch ---------------------------------------------------------


def _messages(data: bytes, depth: int = 0) -> list[tuple[int, bytes | None, bytes | None, int]]:
    """(timestamp, key, value, attributes) of every message of a v0/v1 message set."""
    out: list[tuple[int, bytes | None, bytes | None, int]] = []
    pos, end = 0, len(data)
    while pos + 12 <= end:
        _offset, size = _OFFSET_SIZE.unpack_from(data, pos)
        start = pos + 12
        if size < 14 or start + size > end:
            raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "truncated message")
        crc, magic, attributes = _MESSAGE_HEAD.unpack_from(data, start)
        if magic not in (0, 1):
            raise ConversionError(ErrorCode.CORRUPT_MESSAGE, f"message format {magic} in a message set")
        if zlib.crc32(data[start + 4 : start + size]) != crc:
            raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "message CRC mismatch")
        at = start + 6
        timestamp = -1
        if magic == 1:
            (timestamp,) = _I64.unpack_from(data, at)
            at += 8
        key, at = _bytes(data, at, start + size)
        value, at = _bytes(data, at, start + size)
        codec = attributes & _CODEC_MASK
        if codec == 0:
            out.append((timestamp, key, value, attributes))
        elif codec == _GZIP and depth == 0:
            out.extend(_messages(_gunzip(value or b""), depth + 1))
        else:
            raise ConversionError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression codec {codec} is not converted"
            )
        pos = start + size
    if pos != end:
        raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "trailing bytes after the last message")
    return out


def _bytes(data: bytes, pos: int, limit: int) -> tuple[bytes | None, int]:
    (length,) = _I32.unpack_from(data, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > limit:
        raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "truncated message")
    return data[pos : pos + length], pos + length


def _gunzip(data: bytes) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, MAX_CONVERTED_BYTES)
    if inflater.unconsumed_tail:
        raise ConversionError(ErrorCode.MESSAGE_TOO_LARGE, "decompressed message set too large")
    return out


def message_set_to_batch(data: bytes) -> bytes:
    """A v0/v1 message set as one uncompressed v2 record batch (empty stays empty)."""
    messages = _messages(data)
    if not messages:
        return b""
    stamped = [m[0] for m in messages if m[0] >= 0]
    base = stamped[0] if stamped else -1
    log_append = any(m[3] & _LOG_APPEND_TIME for m in messages)
    records = bytearray()
    for delta, (timestamp, key, value, _attributes) in enumerate(messages):
        body = bytearray(b"\x00")  # record attributes
        body += _varint(timestamp - base if timestamp >= 0 and base >= 0 else 0)
        body += _varint(delta)
        for field in (key, value):
            if field is None:
                body += _varint(-1)
            else:
                body += _varint(len(field))
                body += field
        body += _varint(0)  # no headers
        records += _varint(len(body))
        records += body
    attributes = _LOG_APPEND_TIME if log_append else 0
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        len(messages) - 1,
        base,
        max(stamped) if stamped else -1,
        -1,  # producer id
        -1,  # producer epoch
        -1,  # base sequence
        len(messages),
    )
    crc_part = tail + bytes(records)
    head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(crc_part), -1, 2)
    return head + struct.pack(">I", crc32c(crc_part)) + crc_part


# -- v2 batches -> magic-1 messages ---------------------------------------------------------------


def batches_to_message_set(data: bytes, budget: int = MAX_CONVERTED_BYTES) -> bytes:
    """Upstream's records (v2 batches, or already v0/v1) as a magic-1 message set. A batch cut
    short at the end of the fetch is left out, as Kafka leaves it to the client; output stops
    once it exceeds ``budget`` (the client fetches the rest)."""
    out = bytearray()
    pos, end = 0, len(data)
    while pos + 17 <= end and len(out) < budget:
        base_offset, length = _OFFSET_SIZE.unpack_from(data, pos)
        stop = pos + 12 + length
        if stop > end:
            break  # partial batch at the end of the fetch
        magic = data[pos + 16]
        if magic < 2:
            out += data[pos:stop]  # already a v0/v1 message
        else:
            if length < _BATCH_HEAD.size - 12:
                raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "truncated record batch")
            fields = _BATCH_HEAD.unpack_from(data, pos)
            attributes, base_timestamp, max_timestamp, count = fields[5], fields[7], fields[8], fields[12]
            if not attributes & _CONTROL:
                _append_records(
                    out, data[pos + _BATCH_HEAD.size : stop], attributes, base_offset,
                    base_timestamp, max_timestamp, count,
                )  # fmt: skip
        pos = stop
    return bytes(out)


def _append_records(
    out: bytearray,
    records: bytes,
    attributes: int,
    base_offset: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
) -> None:
    codec = attributes & _CODEC_MASK
    if codec == _GZIP:
        records = _gunzip(records)
    elif codec != 0:
        raise ConversionError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"compression codec {codec}")
    log_append = attributes & _LOG_APPEND_TIME
    pos = 0
    for _ in range(count):
        length, pos = _read_varint(records, pos)
        stop = pos + length
        pos += 1  # record attributes
        timestamp_delta, pos = _read_varint(records, pos)
        offset_delta, pos = _read_varint(records, pos)
        key, pos = _read_field(records, pos)
        value, pos = _read_field(records, pos)
        pos = stop  # headers: magic 1 has none
        timestamp = max_timestamp if log_append else base_timestamp + timestamp_delta
        message = bytearray(struct.pack(">bbq", 1, _LOG_APPEND_TIME if log_append else 0, timestamp))
        for field in (key, value):
            if field is None:
                message += _I32.pack(-1)
            else:
                message += _I32.pack(len(field))
                message += field
        out += _OFFSET_SIZE.pack(base_offset + offset_delta, 4 + len(message))
        out += struct.pack(">I", zlib.crc32(message))
        out += message


def _read_field(data: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        return None, pos
    if pos + length > len(data):
        raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "truncated record")
    return data[pos : pos + length], pos + length


def _varint(value: int) -> bytes:
    """A zigzag varint (record fields)."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ConversionError(ErrorCode.CORRUPT_MESSAGE, "truncated record")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C: Final = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of v2 record batches."""
    crc = 0xFFFFFFFF
    table = _CRC32C
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
