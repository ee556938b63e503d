"""Prefill a store for the restart benchmark through the storage layer's own API.

Writes ``groups`` Stable single-member groups named ``rs-<i>`` and ``groups * offsets_per_group``
committed offsets (group ``rs-<i>`` holds offset ``i + 1`` on partitions ``0..n-1`` of topic
``bench-restart``), plus that topic in the catalog. Going through ``Store.write`` keeps the
rows in whatever schema and encodings ``storage/`` uses today.

    .venv/bin/python bench/prefill.py sqlite:////tmp/x.db [--groups 100000] [--offsets 10]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storage.records import (
    ClusterRecord,
    GroupMetadataRecord,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    TopicRecord,
)
from storage.url import open_store

TOPIC = "bench-restart"
GROUP_PREFIX = "rs-"
BATCH = 20_000
# A consumer subscription (v0, one topic) and an assignment of a few partitions, as a real
# consumer group would store them.
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x0dbench-restart\xff\xff\xff\xff"
ASSIGNMENT = (
    b"\x00\x00\x00\x00\x00\x01\x00\x0dbench-restart\x00\x00\x00\x03"
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02\xff\xff\xff\xff"
)


def records(groups: int, offsets_per_group: int, now_ms: int) -> Iterator[Record]:
    yield TopicRecord(TOPIC, uuid.uuid4().bytes, max(offsets_per_group, 1), 1, ())
    for i in range(groups):
        group_id = f"{GROUP_PREFIX}{i}"
        member_id = f"consumer-{i}-{uuid.UUID(int=i).hex}"
        yield GroupMetadataRecord(
            group_id=group_id,
            protocol_type="consumer",
            generation_id=1,
            protocol_name="range",
            leader_id=member_id,
            state_ms=now_ms,
            members=(
                MemberRecord(
                    member_id=member_id,
                    group_instance_id=None,
                    client_id=f"consumer-{i}",
                    client_host="/127.0.0.1",
                    rebalance_timeout_ms=60000,
                    session_timeout_ms=45000,
                    subscription=SUBSCRIPTION,
                    assignment=ASSIGNMENT,
                ),
            ),
        )
        for p in range(offsets_per_group):
            yield OffsetCommitRecord(group_id, TOPIC, p, i + 1, -1, "", now_ms, None)


async def prefill(url: str, groups: int, offsets_per_group: int) -> float:
    """Write the records; returns the seconds it took."""
    started = time.monotonic()
    store = open_store(url)
    await store.open()
    try:
        # The cluster id a server formats a new database with (without it, a database holding
        # groups refuses to start: docs/hardening.md).
        batch: list[Record] = [ClusterRecord("bench-prefill", int(time.time() * 1000))]
        for record in records(groups, offsets_per_group, int(time.time() * 1000)):
            batch.append(record)
            if len(batch) >= BATCH:
                await store.write(batch)
                batch = []
        if batch:
            await store.write(batch)
    finally:
        await store.close()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="store URL, e.g. sqlite:////tmp/restart.db")
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--offsets", type=int, default=10, help="offsets per group")
    args = parser.parse_args()
    seconds = asyncio.run(prefill(args.url, args.groups, args.offsets))
    print(f"prefilled {args.groups} groups and {args.groups * args.offsets} offsets in {seconds:.1f} s")


if __name__ == "__main__":
    main()
