"""Fetch v16+ responses passed on while they arrive, their NodeEndpoints rewritten at the end."""

from __future__ import annotations

import random

import pytest

from coordinator.gateway.cut_through import FetchTail
from coordinator.gateway.node_endpoints import rewrite_node_endpoints
from coordinator.gateway.upstream import frame_with_length
from protocol.apis import ApiKey
from protocol.primitives import DecodeError
from tests.gateway.test_node_endpoints import GATEWAY, UPSTREAM, _fetch


def _split(data: bytes, seed: int) -> list[bytes]:
    chance = random.Random(seed)
    chunks, pos = [], 0
    while pos < len(data):
        size = chance.choice([1, 2, 3, 7, 64, 500])
        chunks.append(data[pos : pos + size])
        pos += size
    return chunks


@pytest.mark.parametrize("endpoints", [UPSTREAM, []])
@pytest.mark.parametrize("version", [16, 17, 18])
@pytest.mark.parametrize("seed", range(20))
def test_the_client_gets_what_the_whole_rewrite_gives_in_any_chunking(
    endpoints: list[tuple[int, str, int, str | None]], version: int, seed: int
) -> None:
    frame = frame_with_length(_fetch(version, endpoints))
    sent: list[bytes] = []
    tail = FetchTail(lambda chunk: sent.append(bytes(chunk)), GATEWAY.get)
    chunks = _split(frame, seed)
    for chunk in chunks:
        tail.write(memoryview(chunk))
    before_end = b"".join(sent)
    tail.end()
    assert b"".join(sent) == frame[:4] + rewrite_node_endpoints(ApiKey.FETCH, version, frame[4:], GATEWAY.get)
    # Only the top-level tagged fields were held: the records went out before the end.
    assert len(before_end) >= frame.rindex(b"192.168.1.9:9092") + len(b"192.168.1.9:9092")
    assert b"upstream" not in b"".join(sent)


def test_a_response_that_ends_before_its_tagged_fields_is_malformed() -> None:
    frame = frame_with_length(_fetch(16, UPSTREAM))
    tail = FetchTail(lambda chunk: None, GATEWAY.get)
    tail.write(memoryview(frame[: len(frame) // 2]))
    with pytest.raises(DecodeError):
        tail.end()


def test_a_record_set_longer_than_the_response_is_caught_at_the_end() -> None:
    frame = bytearray(frame_with_length(_fetch(16, [])))
    at = frame.index(b"\x00" * 61)  # the records of the first partition, after their length varint
    frame[at - 2 : at] = b"\xff\x7f"  # 16383 bytes of records: more than the response holds
    tail = FetchTail(lambda chunk: None, GATEWAY.get)
    tail.write(memoryview(bytes(frame)))
    with pytest.raises(DecodeError):
        tail.end()
