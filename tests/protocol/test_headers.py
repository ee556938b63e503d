"""Request header v1/v2 and response header v0/v1 against kafka-python, and the ApiVersions exception."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import wire
from protocol.apis import ApiKey
from protocol.messages import CODECS, FLEXIBLE, MESSAGE_CLASSES
from protocol.messages.api_versions import (
    ApiVersion,
    ApiVersionsRequest,
    ApiVersionsResponse,
    encode_api_versions_request_v3,
)
from protocol.messages.headers import (
    RequestHeader,
    decode_request_header_v1,
    decode_request_header_v2,
    encode_request_header_v1,
    encode_request_header_v2,
)
from protocol.primitives import write_uvarint
from tests.protocol.model import INT_RANGES, kp_class, kp_import, pair_id, served_pairs

KpRequestHeader = kp_import("kafka.protocol.api_header", "RequestHeader")
KpResponseHeader = kp_import("kafka.protocol.api_header", "ResponseHeader")

int16s = st.integers(*INT_RANGES["int16"])
int32s = st.integers(*INT_RANGES["int32"])
client_ids = (
    st.none()
    | st.text(st.characters(codec="utf-8"), max_size=12)
    | st.text(st.characters(codec="utf-8"), min_size=130, max_size=140)  # > 127 bytes: compact would differ
)
HEADER_CODECS = {
    1: (encode_request_header_v1, decode_request_header_v1),
    2: (encode_request_header_v2, decode_request_header_v2),
}


@pytest.mark.parametrize("version", [1, 2])
@given(key=int16s, api_version=int16s, correlation_id=int32s, client_id=client_ids)
def test_request_header_matches_kafka_python(
    version: int, key: int, api_version: int, correlation_id: int, client_id: str | None
) -> None:
    encode, decode = HEADER_CODECS[version]
    ours = RequestHeader(key, api_version, correlation_id, client_id)
    out = bytearray()
    encode(ours, out)
    theirs = KpRequestHeader(
        request_api_key=key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    assert bytes(out) == bytes(theirs.encode(flexible=version == 2))

    # ClientId is a nullable *non-compact* string in both versions (its spec says flexibleVersions "none").
    raw = None if client_id is None else client_id.encode()
    expected_client_id = b"\xff\xff" if raw is None else struct.pack(">h", len(raw)) + raw
    assert bytes(out[8:]) == expected_client_id + (b"\x00" if version == 2 else b"")

    assert decode(bytes(out) + b"tail", 0) == (ours, len(out))
    decoded = KpRequestHeader.decode(io.BytesIO(bytes(out)), flexible=version == 2)
    assert (decoded.request_api_key, decoded.request_api_version) == (key, api_version)
    assert (decoded.correlation_id, decoded.client_id) == (correlation_id, client_id)


def test_request_header_known_bytes() -> None:
    out = bytearray()
    encode_request_header_v2(RequestHeader(18, 3, 7, "abc"), out)
    assert bytes(out) == b"\x00\x12\x00\x03\x00\x00\x00\x07\x00\x03abc\x00"
    out = bytearray()
    encode_request_header_v1(RequestHeader(18, 2, 7, None), out)
    assert bytes(out) == b"\x00\x12\x00\x02\x00\x00\x00\x07\xff\xff"


def test_request_header_v2_tagged_fields_are_skipped() -> None:
    """A flexible request whose header carries (unknown) tagged fields still decodes."""
    body = bytearray()
    encode_api_versions_request_v3(ApiVersionsRequest("client", "1.0"), body)
    frame = bytearray(b"\x00\x12\x00\x03\x00\x00\x00\x2a\x00\x01c")
    write_uvarint(frame, 2)  # two tagged fields
    for tag, payload in ((5, b"xyz"), (300, b"\x00" * 200)):
        write_uvarint(frame, tag)
        write_uvarint(frame, len(payload))
        frame += payload
    request = wire.decode_request(bytes(frame + body))
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        18,
        3,
        42,
        "c",
    )
    assert request.body == ApiVersionsRequest("client", "1.0")


@given(correlation_id=int32s)
def test_response_header_matches_kafka_python(correlation_id: int) -> None:
    assert bytes(KpResponseHeader(correlation_id=correlation_id).encode(flexible=False)) == struct.pack(
        ">i", correlation_id
    )
    assert bytes(KpResponseHeader(correlation_id=correlation_id).encode(flexible=True)) == struct.pack(
        ">ib", correlation_id, 0
    )


@pytest.mark.parametrize("pair", served_pairs(), ids=pair_id)
def test_response_header_version(pair: tuple[ApiKey, int]) -> None:
    """Header v1 (with its empty tag section) exactly for flexible versions, except ApiVersions: always v0."""
    key, version = pair
    body_cls = MESSAGE_CLASSES[key][1]
    body = bytearray()
    CODECS[(key, version)][3](body_cls(), body)
    frame = wire.encode_response(key, version, 0x01020304, body_cls())
    header_v1 = (key, version) in FLEXIBLE and key != ApiKey.API_VERSIONS
    header = b"\x01\x02\x03\x04" + (b"\x00" if header_v1 else b"")
    assert frame == struct.pack(">i", len(header) + len(body)) + header + bytes(body)
    assert wire.decode_response(key, version, frame[4:]) == (0x01020304, body_cls())


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    body = ApiVersionsResponse(api_keys=[ApiVersion(18, 0, 4)])
    frame = wire.encode_response(ApiKey.API_VERSIONS, version, 9, body)
    assert frame[4:8] == b"\x00\x00\x00\x09"
    expected_body = bytearray()
    CODECS[(ApiKey.API_VERSIONS, version)][3](body, expected_body)
    assert frame[8:] == expected_body
    kp_response = kp_class("ApiVersionsResponse")
    theirs = kp_response[version].decode(frame[4:], header=True)
    assert theirs.header.correlation_id == 9
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [(18, 0, 4)]
    # ... and the request side: flexible ApiVersions requests (v3+) do use request header v2.
    assert ((ApiKey.API_VERSIONS, version) in FLEXIBLE) == (version >= 3)


@pytest.mark.parametrize("client_version", range(0, 5))
def test_api_versions_unsupported_version_fallback(client_version: int) -> None:
    """KIP-511: an UNSUPPORTED_VERSION answer is a v0 body, which every client version can read."""
    keys = [ApiVersion(int(k), 0, 9) for k in (ApiKey.PRODUCE, ApiKey.JOIN_GROUP, ApiKey.API_VERSIONS)]
    frame = wire.encode_response(ApiKey.API_VERSIONS, 0, 5, ApiVersionsResponse(error_code=35, api_keys=keys))
    theirs = kp_class("ApiVersionsResponse")[client_version].decode(frame[4:], header=True)
    assert theirs.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [
        (k.api_key, k.min_version, k.max_version) for k in keys
    ]
