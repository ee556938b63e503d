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
from protocol.primitives import DecodeError, skip_tagged_fields

_LENGTH: Final = struct.Struct(">i")
_LENGTH_AND_CORRELATION: Final = struct.Struct(">ii")
_KEY_VERSION: Final = struct.Struct(">hh")
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
