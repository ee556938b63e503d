"""The high watermarks the gateway sees in the Fetch responses it forwards, as the log ends.

Some Kafka-compatible brokers answer ListOffsets(latest) with something other than the log end:
Tansu 0.6 answers the last batch's base offset + 1, so after one batch of 100 records the "log
end" is 1. A Fetch response carries each partition's high watermark, the log end as consumers
see it. The gateway reads them as forwarded responses pass (never holding or changing a byte)
and prefers them where ListOffsets(latest) answers less: in the lag sampler's log ends and in
the ListOffsets(latest) answers it forwards (docs/gateway.md#log-ends-and-lag).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Generator
from typing import Final

from protocol.primitives import DecodeError

log = logging.getLogger(__name__)

Partition = tuple[str, int]
# A partition's topic as a Fetch response names it: its name (v0-v12) or its topic id (v13+).
TopicKey = str | bytes
Seen = Callable[[TopicKey, int, int], None]
# A step of a response's structure: n > 0 reads the next n bytes (sent back), n < 0 skips -n bytes.
_Walk = Generator[int, bytes | None, None]

MAX_PARTITIONS: Final = 100_000  # bounded however many partitions clients fetch
_PARTITION_HEAD: Final = struct.Struct(">ihq")  # partition index, error code, high watermark


class HighWatermarks:
    """The latest high watermark fetched per partition, and the log end to trust."""

    def __init__(self, max_partitions: int = MAX_PARTITIONS) -> None:
        self.max_partitions = max_partitions
        self._seen: dict[Partition, int] = {}
        self._told_behind = False
        # Set once upstream answered ListOffsets(latest) behind a high watermark: from then on
        # every such answer is checked against a fresh one (needs_probe).
        self.lists_behind = False

    def observe(self, partition: Partition, high_watermark: int) -> None:
        if high_watermark < 0:
            return
        if partition in self._seen or len(self._seen) < self.max_partitions:
            self._seen[partition] = high_watermark

    def get(self, partition: Partition) -> int | None:
        return self._seen.get(partition)

    def needs_probe(self, partition: Partition) -> bool:
        """Whether a ListOffsets(latest) answer for ``partition`` waits for a fresh high
        watermark: always once upstream is known to answer behind, else when none was ever seen
        (a partition no client fetches through the gateway, such as a changelog before its
        restoration, would otherwise keep upstream's answer)."""
        return self.lists_behind or partition not in self._seen

    def log_end(self, partition: Partition, listed: int) -> int:
        """The log end of ``partition`` given ListOffsets(latest)'s answer ``listed``: the fetched
        high watermark where it is further (a log end never lies before a high watermark)."""
        fetched = self._seen.get(partition)
        if fetched is None or fetched <= listed:
            return listed
        self.lists_behind = True
        if not self._told_behind:
            self._told_behind = True
            log.warning(
                "upstream answers ListOffsets(latest) behind the log end: %s-%d is %d, its Fetch "
                "responses report a high watermark of %d (Tansu 0.6 answers the last batch's base "
                "offset + 1); lag and forwarded ListOffsets(latest) use the high watermarks the "
                "gateway's clients fetched",
                partition[0], partition[1], listed, fetched,
            )  # fmt: skip
        return fetched


class FetchWatch:
    """Reads the partition high watermarks of one forwarded Fetch response as its bytes pass.

    ``feed`` takes the response's chunks in order, its length prefix first. It never raises: a
    response it cannot follow is left alone (the client gets it all the same)."""

    __slots__ = ("_read", "_walk", "_want")

    def __init__(self, version: int, seen: Seen) -> None:
        self._walk: _Walk | None = _fetch_response(version, seen)
        self._want = next(self._walk)
        self._read = bytearray()

    def feed(self, chunk: bytes | memoryview) -> None:
        walk = self._walk
        if walk is None:
            return
        try:
            pos, size = 0, len(chunk)
            while pos < size:
                want = self._want
                if want < 0:
                    step = min(-want, size - pos)
                    pos += step
                    self._want = want + step
                    if self._want == 0:
                        self._want = walk.send(None)
                else:
                    step = min(want - len(self._read), size - pos)
                    self._read += chunk[pos : pos + step]
                    pos += step
                    if len(self._read) == want:
                        read = bytes(self._read)
                        self._read.clear()
                        self._want = walk.send(read)
        except StopIteration:
            self._walk = None  # every partition read: the rest is not needed
        except (DecodeError, struct.error, IndexError, UnicodeDecodeError) as exc:
            log.debug("a Fetch response's high watermarks could not be read: %s", exc)
            self._walk = None


def _fetch_response(version: int, seen: Seen) -> _Walk:
    """Fetch response v0-v18, from its length prefix to the last partition."""
    flexible = version >= 12
    yield -4  # length prefix
    yield -4  # correlation id
    if flexible:
        yield from _tagged_fields()  # response header v1
    if version >= 1:
        yield -4  # throttle_time_ms
    if version >= 7:
        yield -6  # error_code, session_id
    topics = yield from _count(flexible)
    for _ in range(topics):
        key: TopicKey
        if version >= 13:
            key = yield from _read(16)
        else:
            key = yield from _string(flexible)
        partitions = yield from _count(flexible)
        for _ in range(partitions):
            index, error, high_watermark = _PARTITION_HEAD.unpack((yield from _read(14)))
            if error == 0:
                seen(key, index, high_watermark)
            if version >= 4:
                yield -8  # last_stable_offset
                if version >= 5:
                    yield -8  # log_start_offset
                aborted = yield from _count(flexible)
                for _ in range(aborted):
                    yield -16  # producer_id, first_offset
                    if flexible:
                        yield from _tagged_fields()
            if version >= 11:
                yield -4  # preferred_read_replica
            size = yield from _length(flexible, 4)
            if size > 0:
                yield -size  # records
            if flexible:
                yield from _tagged_fields()
        if flexible:
            yield from _tagged_fields()


def _read(size: int) -> Generator[int, bytes | None, bytes]:
    read = yield size
    assert read is not None
    return read


def _count(flexible: bool) -> Generator[int, bytes | None, int]:
    """An array's element count (a null array counts none)."""
    if flexible:
        return max((yield from _uvarint()) - 1, 0)
    count: int = struct.unpack(">i", (yield from _read(4)))[0]
    return max(count, 0)


def _length(flexible: bool, width: int) -> Generator[int, bytes | None, int]:
    """A string's or bytes' length; -1 for null."""
    if flexible:
        return (yield from _uvarint()) - 1
    size: int = struct.unpack(">h" if width == 2 else ">i", (yield from _read(width)))[0]
    return size


def _string(flexible: bool) -> Generator[int, bytes | None, str]:
    size = yield from _length(flexible, 2)
    if size <= 0:
        return ""
    return (yield from _read(size)).decode()


def _uvarint() -> Generator[int, bytes | None, int]:
    result = shift = 0
    while True:
        byte = (yield from _read(1))[0]
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
