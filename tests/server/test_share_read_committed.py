"""The read_committed view of an upstream Fetch answer (coordinator/server/share_records.py):
batches at or past the last stable offset left out, aborted transactions' batches and control
markers hidden, as Kafka's consumer decides (docs/share-groups.md, "Isolation")."""

from __future__ import annotations

import struct

from coordinator.server.share_records import read_committed, record_batches

TRANSACTIONAL, CONTROL = 0x10, 0x20
ABORT, COMMIT = 0, 1


def batch(
    base: int, count: int, producer_id: int = -1, attributes: int = 0, marker: int | None = None
) -> bytes:
    if marker is not None:  # one control record: its key is (version 0, type)
        key = struct.pack(">hh", 0, marker)
        record = bytes([0, 0, 0, len(key) * 2]) + key + bytes([0, 0])  # attrs, ts, offset delta, key
        body = bytes([len(record) * 2]) + record
    else:
        body = b"\x00" * count  # the records' bytes are not read
    header_rest = struct.pack(">ibIhiqqqhii", 0, 2, 0, attributes, count - 1, 0, 0, producer_id, 0, 0, count)
    length = len(header_rest) + len(body)
    return struct.pack(">qi", base, length) + header_rest + body


def test_aborted_batches_and_markers_are_hidden_and_the_lso_bounds_the_batches() -> None:
    records = b"".join(
        [
            batch(0, 2),  # plain records
            batch(2, 2, 7, TRANSACTIONAL),  # producer 7, committed below
            batch(4, 1, 7, TRANSACTIONAL | CONTROL, COMMIT),
            batch(5, 3, 9, TRANSACTIONAL),  # producer 9, aborted
            batch(8, 1, 9, TRANSACTIONAL | CONTROL, ABORT),
            batch(9, 2, 9, TRANSACTIONAL),  # producer 9 again, a new transaction: committed
            batch(11, 1, 9, TRANSACTIONAL | CONTROL, COMMIT),
            batch(12, 2, 7, TRANSACTIONAL),  # still open: at the last stable offset
        ]
    )
    batches = record_batches(records)
    assert [(b[0], b[1]) for b in batches][-1] == (12, 13)
    kept, hidden = read_committed(records, batches, last_stable_offset=12, aborted=[(9, 5)])
    assert [(b[0], b[1]) for b in kept] == [(0, 1), (2, 3), (4, 4), (5, 7), (8, 8), (9, 10), (11, 11)]
    assert hidden == ((4, 4), (5, 7), (8, 8), (11, 11))
