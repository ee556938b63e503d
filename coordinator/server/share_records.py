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
    # read_committed: offsets of ``batches`` never to deliver (aborted transactions, markers).
    hidden: tuple[tuple[int, int], ...] = ()


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


_ATTRIBUTES_AT: Final = 21
_PRODUCER_ID_AT: Final = 43
_TRANSACTIONAL: Final = 0x10
_CONTROL: Final = 0x20
_CONTROL_KEY: Final = struct.Struct(">hh")  # version, type (0 abort, 1 commit)


def read_committed(
    records: bytes,
    batches: tuple[tuple[int, int, int, int], ...],
    last_stable_offset: int,
    aborted: Sequence[tuple[int, int]],
) -> tuple[tuple[tuple[int, int, int, int], ...], tuple[tuple[int, int], ...]]:
    """A read_committed view of a Fetch answer (``aborted``: its (producer id, first offset)
    pairs): the batches below the last stable offset, and the offsets among them a consumer
    never gets -- the batches of aborted transactions and the control markers -- as Kafka's
    consumer and share-partition skip them (docs/share-groups.md, "Isolation")."""
    kept = tuple(b for b in batches if last_stable_offset < 0 or b[1] < last_stable_offset)
    pending = sorted(aborted, key=lambda a: a[1])
    open_aborts: set[int] = set()
    hidden: list[tuple[int, int]] = []
    for base, last, start, _ in kept:
        while pending and pending[0][1] <= last:
            open_aborts.add(pending.pop(0)[0])
        (attributes,) = struct.unpack_from(">h", records, start + _ATTRIBUTES_AT)
        (producer_id,) = struct.unpack_from(">q", records, start + _PRODUCER_ID_AT)
        if attributes & _CONTROL:
            hidden.append((base, last))
            if _is_abort_marker(records, start):
                open_aborts.discard(producer_id)
        elif attributes & _TRANSACTIONAL and producer_id in open_aborts:
            hidden.append((base, last))
    return kept, tuple(hidden)


def _is_abort_marker(records: bytes, start: int) -> bool:
    """Whether the control batch at ``start`` is an abort marker (its one record's key)."""
    pos = start + 61  # the batch header
    try:
        pos = _skip_varint(records, pos)  # record length
        pos += 1  # attributes
        pos = _skip_varint(records, pos)  # timestamp delta
        pos = _skip_varint(records, pos)  # offset delta
        pos = _skip_varint(records, pos)  # key length (4: version and type)
        _, marker = _CONTROL_KEY.unpack_from(records, pos)
    except (IndexError, struct.error):
        return False
    return bool(marker == 0)


def _skip_varint(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


def records_for(fetched: FetchedPartition, ranges: Sequence[tuple[int, int]]) -> bytes:
    """The bytes of the batches that hold any offset of the (first, last) ``ranges``, each once."""
    return b"".join(
        fetched.records[start:end] for base, end_offset, start, end in fetched.batches
        if any(last >= base and first <= end_offset for first, last in ranges)
    )  # fmt: skip


class RecordReader(Protocol):
    """Reads records for share fetches, and where a share-partition without state starts."""

    async def fetch(
        self,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        """``committed_only``: read_committed (below the last stable offset, aborted hidden)."""
        ...

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """ListOffsets: ``timestamp`` -1 latest, -2 earliest, else the first offset at or after it."""
        ...


class RecordSource(RecordReader, Protocol):
    """A RecordReader that can also be told where share-partitions will be read next
    (share_read_ahead.py)."""

    def read_ahead(
        self, wanted: Mapping[TopicPartition, int], max_bytes: int, committed_only: bool = False
    ) -> None: ...


class NoRecords:
    """Standalone mode: every partition is an empty log starting at 0; a fetch waits
    ``max_wait_ms`` for data that never comes, as a broker does for an empty log."""

    async def fetch(
        self,
        wanted: Mapping[TopicPartition, int],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        committed_only: bool = False,
    ) -> dict[TopicPartition, FetchedPartition]:
        if max_wait_ms > 0:
            await asyncio.sleep(min(max_wait_ms, 30_000) / 1000)
        return {tp: FetchedPartition() for tp in wanted}

    def read_ahead(
        self, wanted: Mapping[TopicPartition, int], max_bytes: int, committed_only: bool = False
    ) -> None:
        """Nothing to read ahead in an empty log."""

    async def start_offsets(
        self, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 0)
