"""Whole requests and responses: header + body, as they travel inside a frame.

Requests use header v2 in flexible versions and v1 otherwise; responses use header v1 in
flexible versions and v0 otherwise, except ApiVersions responses, which always use v0 so that a
client can read the error of a version it does not know (KIP-511).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

from protocol.apis import ApiKey
from protocol.messages import CODECS, FLEXIBLE
from protocol.messages.headers import (
    RequestHeader,
    decode_request_header_v1,
    decode_request_header_v2,
    encode_request_header_v1,
    encode_request_header_v2,
)
from protocol.primitives import DecodeError, skip_tagged_fields

_KEY_VERSION_CORRELATION: Final = struct.Struct(">hhi")
_LENGTH: Final = struct.Struct(">i")
_LENGTH_AND_CORRELATION: Final = struct.Struct(">ii")

_DECODE_FAILURES: Final = (DecodeError, IndexError, struct.error, UnicodeDecodeError, OverflowError)


class UnsupportedApi(Exception):
    """The request names an API key or version this server does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None):
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a frame; DecodeError if it is too short."""
    if len(frame) < 8:
        raise DecodeError(f"request frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: bytes) -> Request:
    """Decode one request frame (without its length prefix).

    Raises UnsupportedApi for an unknown key or version (the header was still readable) and
    DecodeError for anything malformed or truncated.
    """
    if len(frame) < 8:  # peek_header inlined: every request
        raise DecodeError(f"request frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    key_version = (api_key, api_version)
    codecs = CODECS.get(key_version)
    flexible = key_version in FLEXIBLE
    try:
        header, pos = (decode_request_header_v2 if flexible else decode_request_header_v1)(frame, 0)
        if codecs is None:
            raise UnsupportedApi(api_key, api_version, correlation_id, header.client_id)
        body, pos = codecs[0](frame, pos)
    except _DECODE_FAILURES as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"malformed {_api_name(api_key)} v{api_version} request: {exc!r}") from exc
    if pos != len(frame):
        if pos > len(frame):
            raise DecodeError(f"truncated {_api_name(api_key)} v{api_version} request")
        # Kafka ignores trailing bytes for ApiVersions (newer clients' requests to older brokers).
        # librdkafka (2.x) ends every AlterUserScramCredentials request with one extra zero byte,
        # which Kafka's parser leaves unread; we accept exactly that. Anything else is malformed.
        librdkafka_quirk = api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS and frame[pos:] == b"\x00"
        if api_key != ApiKey.API_VERSIONS and not librdkafka_quirk:
            raise DecodeError(
                f"{len(frame) - pos} unexpected trailing bytes after {_api_name(api_key)} v{api_version}"
            )
    return Request(api_key, api_version, correlation_id, header.client_id, body)


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A complete response frame: length prefix, response header, body."""
    out = bytearray(_LENGTH_AND_CORRELATION.pack(0, correlation_id))
    if (api_key, api_version) in FLEXIBLE and api_key != ApiKey.API_VERSIONS:
        out.append(0)  # response header v1: no tagged fields
    CODECS[(api_key, api_version)][3](body, out)
    _LENGTH.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A complete request frame (used by our own clients: load test, admin CLI, tests)."""
    out = bytearray(4)
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if (api_key, api_version) in FLEXIBLE:
        encode_request_header_v2(header, out)
    else:
        encode_request_header_v1(header, out)
    CODECS[(api_key, api_version)][1](body, out)
    _LENGTH.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its length prefix."""
    try:
        (correlation_id,) = _LENGTH.unpack_from(frame, 0)
        pos = 4
        if (api_key, api_version) in FLEXIBLE and api_key != ApiKey.API_VERSIONS:
            pos = skip_tagged_fields(frame, pos)
        body, pos = CODECS[(api_key, api_version)][2](frame, pos)
    except _DECODE_FAILURES as exc:
        if isinstance(exc, DecodeError):
            raise
        raise DecodeError(f"malformed {_api_name(api_key)} v{api_version} response: {exc!r}") from exc
    if pos > len(frame):
        raise DecodeError(f"truncated {_api_name(api_key)} v{api_version} response")
    return correlation_id, body


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"
