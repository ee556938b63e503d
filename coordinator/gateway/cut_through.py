"""Cut-through forwarding: a response passed on to the client while it is still arriving.

Holding a whole response before sending it on costs the client one transfer time per response
and the gateway a copy of it; a consumer fetches megabytes per Fetch, one Fetch at a time per
broker. So a forwarded response that is next in line for its client connection goes out chunk
by chunk as upstream's chunks arrive, its length prefix first (docs/gateway.md, "Cut-through").

Only Fetch v16+ (KIP-951) needs care: its NodeEndpoints come in the top-level tagged fields,
after all the records. `FetchTail` follows the response's structure as the bytes pass (records
are skipped by their length, never buffered), passes on everything before the tagged fields,
holds those, and rewrites them at their original length when the response is complete.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Final, Protocol

from coordinator.gateway.node_endpoints import Rewrite, rewrite_tagged_fields
from protocol.primitives import DecodeError

# A step of a response's structure: n > 0 reads the next n bytes (sent back to the walk),
# n < 0 skips -n bytes (records), nothing sent back.
_Walk = Generator[int, bytes | None, None]
_LENGTH_PREFIX: Final = 4


class ResponseStream(Protocol):
    """Where a streamed response's bytes go: ``write`` for each chunk as it arrives (length
    prefix included), then ``end`` once, when the response is complete."""

    def write(self, chunk: memoryview) -> None: ...

    def end(self) -> None: ...


Write = Callable[[memoryview], None]


class FetchTail:
    """Passes a Fetch v16+ response on as it arrives, all but its top-level tagged fields, which
    are held and rewritten at their original length at the end."""

    __slots__ = ("_address_of", "_read", "_tail", "_walk", "_want", "_write")

    def __init__(self, write: Write, address_of: Rewrite) -> None:
        self._write = write
        self._address_of = address_of
        self._walk = _fetch_response()
        self._want = next(self._walk)
        self._read = bytearray()
        self._tail: bytearray | None = None  # once the walk reached the tagged fields

    def write(self, chunk: memoryview) -> None:
        pos, size = 0, len(chunk)
        while pos < size and self._tail is None:
            want = self._want
            if want < 0:
                step = min(-want, size - pos)
                pos += step
                if step == -want:
                    self._step(None)
                else:
                    self._want = want + step
            else:
                step = min(want - len(self._read), size - pos)
                self._read += chunk[pos : pos + step]
                pos += step
                if len(self._read) == want:
                    read = bytes(self._read)
                    self._read.clear()
                    self._step(read)
        if pos:
            self._write(chunk[:pos])  # all of it before the tagged fields
        if self._tail is not None and pos < size:
            self._tail += chunk[pos:]

    def end(self) -> None:
        """The response is complete: the tagged fields, rewritten. DecodeError when malformed."""
        if self._tail is None:
            raise DecodeError("truncated Fetch response: it ended before its tagged fields")
        self._write(memoryview(rewrite_tagged_fields(bytes(self._tail), self._address_of)))

    def _step(self, read: bytes | None) -> None:
        try:
            self._want = self._walk.send(read)
        except StopIteration:
            self._tail = bytearray()


def _fetch_response() -> _Walk:
    """Fetch response v16-v18 (flexible), from its length prefix to its top-level tagged fields."""
    yield -_LENGTH_PREFIX
    yield -4  # correlation id
    yield from _tagged_fields()  # response header v1
    yield -10  # throttle_time_ms, error_code, session_id
    topics = yield from _uvarint()
    for _ in range(max(topics - 1, 0)):
        yield -16  # topic id
        partitions = yield from _uvarint()
        for _ in range(max(partitions - 1, 0)):
            yield -30  # partition index, error code, high watermark, last stable, log start
            aborted = yield from _uvarint()
            for _ in range(max(aborted - 1, 0)):
                yield -16  # producer id, first offset
                yield from _tagged_fields()
            yield -4  # preferred read replica
            records = yield from _uvarint()
            if records > 1:
                yield -(records - 1)
            yield from _tagged_fields()
        yield from _tagged_fields()


def _uvarint() -> Generator[int, bytes | None, int]:
    result = shift = 0
    while True:
        read = yield 1
        assert read is not None
        byte = read[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
        if shift > 28:
            raise DecodeError("varint is longer than 5 bytes")


def _tagged_fields() -> Generator[int, bytes | None, None]:
    count = yield from _uvarint()
    for _ in range(count):
        yield from _uvarint()  # tag
        size = yield from _uvarint()
        if size:
            yield -size
