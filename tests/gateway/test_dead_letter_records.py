"""The dead-letter record batches (coordinator/gateway/dead_letter_records.py): Kafka 4.4's header
names and values, and a batch that reads back (crc included) with the originals' key and value."""

from __future__ import annotations

import gzip
import struct

from coordinator.gateway.dead_letter_records import (
    CLIENT_REJECT,
    DELIVERY_COUNT_EXCEEDED,
    DeadLetter,
    context_headers,
    dead_letter_batch,
    originals,
    reason_for,
)
from coordinator.gateway.old_formats import crc32c


def test_context_headers_are_kafkas() -> None:
    assert context_headers("orders", 3, 42, "g", 5, reason_for(5, 5)) == (
        ("__dlq.errors.topic", b"orders"),
        ("__dlq.errors.partition", b"3"),
        ("__dlq.errors.offset", b"42"),
        ("__dlq.errors.group", b"g"),
        ("__dlq.errors.delivery.count", b"5"),
        ("__dlq.errors.message", b"Offset delivery count exceeded the threshold."),
    )
    assert reason_for(1, 5) == CLIENT_REJECT and reason_for(6, 5) == DELIVERY_COUNT_EXCEEDED


def test_a_batch_reads_back_with_a_valid_crc() -> None:
    letters = [
        DeadLetter(context_headers("t", 0, n, "g", 1, CLIENT_REJECT), b"k", f"v{n}".encode())
        for n in range(3)
    ]
    letters.append(DeadLetter(context_headers("t", 0, 3, "g", 1, CLIENT_REJECT)))  # headers only
    batch = dead_letter_batch(letters, 1_700_000_000_000)
    (length,) = struct.unpack_from(">i", batch, 8)
    assert length == len(batch) - 12
    (crc,) = struct.unpack_from(">I", batch, 17)
    assert crc == crc32c(batch[21:])
    assert originals(batch, 0, 3) == {0: (b"k", b"v0"), 1: (b"k", b"v1"), 2: (b"k", b"v2"), 3: (None, None)}
    assert originals(batch, 1, 1) == {1: (b"k", b"v1")}


def test_gzip_batches_are_read_and_other_codecs_left_out() -> None:
    plain = dead_letter_batch([DeadLetter((), b"k", b"v")], 0)
    records = plain[61:]
    squeezed = gzip.compress(records)
    head = bytearray(plain[:61])
    struct.pack_into(">h", head, 21, 1)  # gzip
    zipped = bytes(head) + squeezed
    zipped = zipped[:8] + struct.pack(">i", len(zipped) - 12) + zipped[12:]
    assert originals(zipped, 0, 0) == {0: (b"k", b"v")}
    other = bytearray(zipped)
    struct.pack_into(">h", other, 21, 4)  # zstd: left out, written with the headers only
    assert originals(bytes(other), 0, 0) == {}
