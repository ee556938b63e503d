"""Forwarded requests and their responses, decoded and re-encoded with the gateway's codec table
(protocol.apis.GATEWAY_DECODED): the gateway reads a forwarded request to authorize it, may
forward a request with fewer topics, and merges its own refusals into upstream's response.

The request header is kept as the client sent it (its bytes are reused when the body changes).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from protocol.messages import GATEWAY_CODECS, GATEWAY_FLEXIBLE
from protocol.messages.headers import decode_request_header_v1, decode_request_header_v2
from protocol.primitives import DecodeError, read_uvarint, skip_tagged_fields

_LENGTH: Final = struct.Struct(">i")
_LENGTH_AND_CORRELATION: Final = struct.Struct(">ii")
_KEY_VERSION: Final = struct.Struct(">hh")
_KEY_VERSION_CLIENT: Final = struct.Struct(">hhxxxxh")  # api key, version, (correlation id), client id length
_FAILURES: Final = (DecodeError, IndexError, struct.error, UnicodeDecodeError, OverflowError, ValueError)
API_VERSIONS_KEY: Final = 18


def decodable(api_key: int, api_version: int) -> bool:
    return (api_key, api_version) in GATEWAY_CODECS


def decode_forwarded(frame: bytes) -> tuple[int, Any]:
    """(length of the request header, body) of a request frame without its length prefix.

    DecodeError for a malformed request or one whose version has no codec here."""
    try:
        api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
        codecs = GATEWAY_CODECS.get((api_key, api_version))
        if codecs is None:
            raise DecodeError(f"api {api_key} v{api_version} cannot be decoded by the gateway")
        flexible = (api_key, api_version) in GATEWAY_FLEXIBLE
        _, header_end = (decode_request_header_v2 if flexible else decode_request_header_v1)(frame, 0)
        body, pos = codecs[0](frame, header_end)
    except _FAILURES as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"malformed api {frame[:2].hex()} request: {exc!r}") from exc
    if pos != len(frame):
        raise DecodeError(f"api {api_key} v{api_version} request: {len(frame) - pos} bytes unread")
    return header_end, body


def request_header_end(frame: bytes) -> int:
    """Where the body of a request frame (no length prefix) starts."""
    try:
        api_key, api_version, client_id_length = _KEY_VERSION_CLIENT.unpack_from(frame, 0)
        pos = 10 + (client_id_length if client_id_length > 0 else 0)
        if (api_key, api_version) not in GATEWAY_FLEXIBLE:
            return pos if pos <= len(frame) else _truncated()
        if frame[pos] == 0:  # no tagged fields: the usual header v2
            return pos + 1
        return int(skip_tagged_fields(frame, pos))
    except _FAILURES as exc:
        raise DecodeError(f"malformed request header: {exc!r}") from exc


def _truncated() -> int:
    raise DecodeError("request header past the end of the frame")


def encode_forwarded(frame: bytes, header_end: int, body: Any) -> bytes:
    """The request frame (no length prefix) with the client's header and a new body."""
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    out = bytearray(frame[:header_end])
    GATEWAY_CODECS[(api_key, api_version)][1](body, out)
    return bytes(out)


def decode_forwarded_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame that starts with its length prefix."""
    try:
        (correlation_id,) = _LENGTH.unpack_from(frame, 4)
        pos = 8
        if (api_key, api_version) in GATEWAY_FLEXIBLE and api_key != API_VERSIONS_KEY:
            pos = skip_tagged_fields(frame, pos)
        body, pos = GATEWAY_CODECS[(api_key, api_version)][2](frame, pos)
    except _FAILURES as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"malformed api {api_key} v{api_version} response: {exc!r}") from exc
    if pos > len(frame):
        raise DecodeError(f"truncated api {api_key} v{api_version} response")
    return correlation_id, body


def encode_forwarded_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A complete response frame: length prefix, response header, body."""
    out = bytearray(_LENGTH_AND_CORRELATION.pack(0, correlation_id))
    if (api_key, api_version) in GATEWAY_FLEXIBLE:
        out.append(0)  # response header v1: no tagged fields
    GATEWAY_CODECS[(api_key, api_version)][3](body, out)
    _LENGTH.pack_into(out, 0, len(out) - 4)
    return bytes(out)


_INT16: Final = struct.Struct(">h")
ZERO_UUID: Final = bytes(16)
_INT32: Final = struct.Struct(">i")


def produce_topics(frame: bytes, header_end: int, version: int) -> tuple[str | None, list[tuple[str, bytes]]]:
    """(transactional id, [(topic name, topic id)]) of a Produce request, read without decoding
    (or copying) its records: the cheap first look of the gateway's authorization.

    DecodeError (or struct.error/IndexError/UnicodeDecodeError) for a malformed request. The
    one-byte varints and empty tagged-field sections of every request are read inline (this
    runs once per Produce request)."""
    flexible = version >= 9
    pos = header_end
    transactional_id: str | None = None
    if version >= 3:
        transactional_id, pos = _nullable_string(frame, pos, flexible)
    pos += 6  # acks, timeout
    count, pos = _array_length(frame, pos, flexible)
    topics: list[tuple[str, bytes]] = []
    unpack_int32 = _INT32.unpack_from
    for _ in range(count):
        name, topic_id = "", ZERO_UUID
        if version >= 13:
            topic_id = frame[pos : pos + 16]
            pos += 16
        else:
            text, pos = _nullable_string(frame, pos, flexible)
            name = text or ""
        partitions, pos = _array_length(frame, pos, flexible)
        for _ in range(partitions):
            pos += 4  # index
            if flexible:
                size, pos = read_uvarint(frame, pos)
                pos += size - 1 if size else 0
                pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
            else:
                (size,) = unpack_int32(frame, pos)
                pos += 4 + (size if size > 0 else 0)
        if flexible:
            pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
        topics.append((name, topic_id))
    if flexible:
        pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
    if pos != len(frame):
        raise DecodeError(f"Produce v{version} request: {len(frame) - pos} bytes unread")
    return transactional_id, topics


def _nullable_string(frame: bytes, pos: int, flexible: bool) -> tuple[str | None, int]:
    if flexible:
        size = frame[pos]
        if size < 0x80:
            pos += 1
        else:
            size, pos = read_uvarint(frame, pos)
        size -= 1
    else:
        (size,) = _INT16.unpack_from(frame, pos)
        pos += 2
    if size < 0:
        return None, pos
    if pos + size > len(frame):
        raise DecodeError("string past the end of the request")
    return frame[pos : pos + size].decode("utf-8"), pos + size


def _array_length(frame: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        size = frame[pos]
        if size < 0x80:
            return max(size - 1, 0), pos + 1
        size, pos = read_uvarint(frame, pos)
        return max(size - 1, 0), pos
    (size,) = _INT32.unpack_from(frame, pos)
    return max(size, 0), pos + 4


def fetch_topics(frame: bytes, header_end: int, version: int) -> list[tuple[str, bytes]] | None:
    """[(topic name, topic id)] of a consumer's Fetch request, read without building its
    objects; None for a follower's request or one with top-level tagged fields (ReplicaState):
    those go through the full decoding."""
    flexible = version >= 12
    pos = header_end
    if version < 15:
        (replica_id,) = _INT32.unpack_from(frame, pos)
        if replica_id >= 0:
            return None
        pos += 4
    pos += 8 + (4 if version >= 3 else 0) + (1 if version >= 4 else 0) + (8 if version >= 7 else 0)
    partition_size = (
        4 + (4 if version >= 9 else 0) + 8 + (4 if version >= 12 else 0) + (8 if version >= 5 else 0) + 4
    )
    count, pos = _array_length(frame, pos, flexible)
    topics: list[tuple[str, bytes]] = []
    for _ in range(count):
        name, topic_id = "", ZERO_UUID
        if version >= 13:
            topic_id = frame[pos : pos + 16]
            pos += 16
        else:
            text, pos = _nullable_string(frame, pos, flexible)
            name = text or ""
        partitions, pos = _array_length(frame, pos, flexible)
        for _ in range(partitions):
            pos += partition_size
            if flexible:
                pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
        if flexible:
            pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
        topics.append((name, topic_id))
    if version >= 7:  # forgotten topics: nothing to authorize, skipped
        count, pos = _array_length(frame, pos, flexible)
        for _ in range(count):
            if version >= 13:
                pos += 16
            else:
                _, pos = _nullable_string(frame, pos, flexible)
            partitions, pos = _array_length(frame, pos, flexible)
            pos += 4 * partitions
            if flexible:
                pos = pos + 1 if frame[pos] == 0 else skip_tagged_fields(frame, pos)
    if version >= 11:
        _, pos = _nullable_string(frame, pos, flexible)  # rack id
    if flexible:
        if frame[pos] != 0:
            return None  # ClusterId or ReplicaState: a broker's request
        pos += 1
    if pos != len(frame):
        raise DecodeError(f"Fetch v{version} request: {len(frame) - pos} bytes unread")
    return topics
