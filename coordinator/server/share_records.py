"""Where records come from for share fetches (docs/share-groups.md, "The data plane"): the
upstream cluster in gateway mode (coordinator/gateway/share_upstream.py), nothing in standalone
mode (a coordinator holds no records: every partition is an empty log)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

TopicPartition = tuple[str, int]

_BATCH_HEAD: Final = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA_AT: Final = 23  # base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2
_LOG_OVERHEAD: Final = 12


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition's answer: an error code, or the record batches read (whole, in log order)."""

    error_code: int = 0
    records: bytes = b""
    # (base offset, last offset, start, end): each batch and where its bytes are in ``records``.
    batches: tuple[tuple[int, int, int, int], ...] = field(default_factory=tuple)
    high_watermark: int = -1


def record_batches(records: bytes) -> tuple[tuple[int, int, int, int], ...]:
    """The complete v2 record batches of a Fetch answer's records (a partial last batch, cut by
    the byte limit, is left out)."""
    out: list[tuple[int, int, int, int]] = []
    pos, size = 0, len(records)
    while pos + _LOG_OVERHEAD <= size:
        base, length = _BATCH_HEAD.unpack_from(records, pos)
        end = pos + _LOG_OVERHEAD + length
        if length <= 0 or end > size or pos + _LAST_OFFSET_DELTA_AT + 4 > size:
            break
        (delta,) = struct.unpack_from(">i", records, pos + _LAST_OFFSET_DELTA_AT)
        out.append((base, base + delta, pos, end))
        pos = end
    return tuple(out)


def records_for(fetched: FetchedPartition, ranges: Sequence[tuple[int, int]]) -> bytes:
    """The bytes of the batches that hold any offset of the (first, last) ``ranges``, each once."""
    return b"".join(
        fetched.records[start:end] for base, end_offset, start, end in fetched.batches
        if any(last >= base and first <= end_offset for first, last in ranges)
    )  # fmt: skip


class RecordReader(Protocol):
    """Reads records for share fetches, and where a share-partition without state starts."""

    async def fetch(
        self, wanted: Mapping[TopicPartition, int], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> dict[TopicPartition, FetchedPartition]: ...

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets: ``timestamp`` -1 latest, -2 earliest, else the first offset at or after it."""
        ...


class RecordSource(RecordReader, Protocol):
    """A RecordReader that can also be told where share-partitions will be read next
    (share_read_ahead.py)."""

    def read_ahead(self, wanted: Mapping[TopicPartition, int], max_bytes: int) -> None: ...


class NoRecords:
    """Standalone mode: every partition is an empty log starting at 0; a fetch waits
    ``max_wait_ms`` for data that never comes, as a broker does for an empty log."""

    async def fetch(
        self, wanted: Mapping[TopicPartition, int], max_wait_ms: int, min_bytes: int, max_bytes: int
    ) -> dict[TopicPartition, FetchedPartition]:
        if max_wait_ms > 0:
            await asyncio.sleep(min(max_wait_ms, 30_000) / 1000)
        return {tp: FetchedPartition() for tp in wanted}

    def read_ahead(self, wanted: Mapping[TopicPartition, int], max_bytes: int) -> None:
        """Nothing to read ahead in an empty log."""

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 0)
