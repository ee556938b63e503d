"""Malformed input: decoders only ever raise DecodeError (or UnsupportedApi), fast and in bounded memory."""

from __future__ import annotations

import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import wire
from protocol.apis import ApiKey
from protocol.messages import CODECS, FLEXIBLE
from protocol.primitives import DecodeError
from tests.protocol.model import (
    assert_well_typed,
    full_value,
    message_strategy,
    pair_id,
    request_side,
    response_side,
    served_pairs,
    to_ours,
)

PAIRS = served_pairs()
REJECTIONS = (DecodeError, wire.UnsupportedApi)
# Truncation tests decode every prefix (quadratic): fewer examples than the profile's default.
_profile = settings.default
assert _profile is not None
fewer_examples = settings(max_examples=max(3, _profile.max_examples // 5))


def try_request(frame: bytes) -> Any:
    """Decode a request: rejected with DecodeError/UnsupportedApi, or decoded to a well-typed body."""
    try:
        request = wire.decode_request(frame)
    except REJECTIONS:
        return None
    s = request_side(ApiKey(request.api_key))
    assert_well_typed(s.module, s.ours, s.msg.fields, request.body, request.api_version)
    return request


def try_response(key: ApiKey, version: int, frame: bytes) -> Any:
    """Decode a response: rejected with DecodeError, or decoded to a well-typed body."""
    try:
        _, body = wire.decode_response(key, version, frame)
    except DecodeError:
        return None
    s = response_side(key)
    assert_well_typed(s.module, s.ours, s.msg.fields, body, version)
    return body


def request_frame(key: ApiKey, version: int, value: dict[str, Any], client_id: str | None = "c") -> bytes:
    body = to_ours(request_side(key), value, version)
    return wire.encode_request(key, version, 1234, client_id, body)[4:]


def response_frame(key: ApiKey, version: int, value: dict[str, Any]) -> bytes:
    return wire.encode_response(key, version, 1234, to_ours(response_side(key), value, version))[4:]


@given(frame=st.binary(max_size=64))
def test_random_frames(frame: bytes) -> None:
    try_request(frame)


def request_header(key: ApiKey, version: int, client_id: str | None) -> bytes:
    """The request header (v1 or v2) a well-formed request of this version starts with."""
    empty = request_side(key).ours()
    body = bytearray()
    CODECS[(key, version)][1](empty, body)
    frame = wire.encode_request(key, version, 1234, client_id, empty)[4:]
    return frame[: len(frame) - len(body)]


def response_header(key: ApiKey, version: int) -> bytes:
    return response_frame(key, version, {})[
        : 5 if (key, version) in FLEXIBLE and key != ApiKey.API_VERSIONS else 4
    ]


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@given(data=st.data())
def test_request_random_body(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = pair
    # Random bytes right after api key, version and correlation id ...
    fixed = struct.pack(">hhi", key, version, 1)
    try_request(fixed + data.draw(st.binary(max_size=200), label="after fixed header"))
    # ... and after a well-formed header.
    header = request_header(key, version, data.draw(st.none() | st.text(max_size=4), label="client_id"))
    try_request(header + data.draw(st.binary(max_size=200), label="body"))


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@given(data=st.data())
def test_response_random_body(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = pair
    try_response(key, version, data.draw(st.binary(max_size=200), label="frame"))
    try_response(
        key, version, response_header(key, version) + data.draw(st.binary(max_size=200), label="body")
    )


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@given(data=st.data())
def test_mutated_frames(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    """A valid request/response with a few bytes overwritten decodes or is rejected cleanly."""
    key, version = pair
    request = data.draw(message_strategy(request_side(key).msg.name, version, long=False), label="request")
    response = data.draw(message_strategy(response_side(key).msg.name, version, long=False), label="response")
    decoders: list[tuple[bytes, Callable[[bytes], Any]]] = [
        (request_frame(key, version, request), try_request),
        (response_frame(key, version, response), lambda f: try_response(key, version, f)),
    ]
    for frame, decode in decoders:
        mutated = bytearray(frame)
        for _ in range(data.draw(st.integers(1, 4), label="mutations")):
            pos = data.draw(st.integers(0, len(mutated) - 1), label="pos")
            mutated[pos] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
        decode(bytes(mutated))


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@fewer_examples
@given(data=st.data())
def test_truncated_requests(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = pair
    fields = request_side(key).msg.fields
    value = data.draw(
        message_strategy(request_side(key).msg.name, version, long=False)
        | st.just(full_value(fields, version))
    )
    frame = request_frame(key, version, value)
    assert wire.decode_request(frame).body == to_ours(request_side(key), value, version)
    for n in range(len(frame)):
        with pytest.raises(DecodeError):
            wire.decode_request(frame[:n])


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@fewer_examples
@given(data=st.data())
def test_truncated_responses(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = pair
    fields = response_side(key).msg.fields
    value = data.draw(
        message_strategy(response_side(key).msg.name, version, long=False)
        | st.just(full_value(fields, version))
    )
    frame = response_frame(key, version, value)
    assert wire.decode_response(key, version, frame)[1] == to_ours(response_side(key), value, version)
    for n in range(len(frame)):
        with pytest.raises(DecodeError):
            wire.decode_response(key, version, frame[:n])


# Lengths a hostile peer could declare: int16 and int32 maxima written over whatever is there, and
# a 5-byte varint for 2**31 (a compact length of 2**31-1) in place of one byte (every compact
# length in these frames is a 1-byte varint).
HUGE_INT16, HUGE_INT32, HUGE_VARINT = b"\x7f\xff", b"\x7f\xff\xff\xff", b"\x80\x80\x80\x80\x08"


def _patched(frame: bytes, start: int) -> list[bytes]:
    """``frame`` with a huge length written at every position from ``start`` on."""
    out = []
    for pos in range(start, len(frame)):
        out.append(frame[:pos] + HUGE_INT16 + frame[pos + 2 :])
        out.append(frame[:pos] + HUGE_INT32 + frame[pos + 4 :])
        out.append(frame[:pos] + HUGE_VARINT + frame[pos + 1 :])
    return out


def _assert_cheap(frames: list[bytes], decode: Callable[[bytes], Any]) -> None:
    """Each decode finishes quickly (no loop over a declared count) and nothing sized by a
    declared length is allocated (traced peak stays far below the 2 GiB a 2**31-1 length asks)."""
    slowest = 0.0
    tracemalloc.start()
    try:
        for frame in frames:
            started = time.process_time()  # CPU time: robust against a busy machine
            decode(frame)
            slowest = max(slowest, time.process_time() - started)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"decoding hostile lengths peaked at {peak} bytes"
    assert slowest < 0.5, f"slowest decode of a hostile length took {slowest:.3f}s of CPU"


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_huge_declared_lengths(pair: tuple[ApiKey, int]) -> None:
    """Every length prefix (and everything else) overwritten with 2**31-1 and friends: rejected fast."""
    key, version = pair
    request = request_frame(key, version, full_value(request_side(key).msg.fields, version))
    _assert_cheap(_patched(request, 8), try_request)
    response = response_frame(key, version, full_value(response_side(key).msg.fields, version))
    _assert_cheap(_patched(response, 4), lambda f: try_response(key, version, f))
