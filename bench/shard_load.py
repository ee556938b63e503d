"""The cost of taking shards over on PostgreSQL (docs/multinode.md#loading-a-shard).

    .venv/bin/python bench/shard_load.py [--groups 2000] [--partitions 50] [--repeat 5]

Starts a throwaway PostgreSQL (initdb; as user postgres when run as root), stores
``groups * partitions`` offsets (100k by default) and times ``PostgresStore.load_shards`` for
one shard, half of them and all 50: the wall time of the read, including decoding the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from coordinator.core.sharding import shard_of  # noqa: E402
from storage.postgres import PostgresStore  # noqa: E402
from storage.records import OffsetCommitRecord  # noqa: E402
from tests.storage.conftest import create_database  # noqa: E402
from tests.storage.pg_server import PgServer  # noqa: E402

SHARDS = 50


async def measure(groups: int, partitions: int, repeat: int) -> None:
    server = PgServer.create()
    try:
        store = PostgresStore(await create_database(server), command_timeout=120)
        await store.open()
        batch: list[OffsetCommitRecord] = []
        for g in range(groups):
            batch += [
                OffsetCommitRecord(f"group-{g}", "topic", p, 1000 + p, -1, "", 1_700_000_000_000, None)
                for p in range(partitions)
            ]
            if len(batch) >= 10_000:
                await store.write(batch)
                batch = []
        if batch:
            await store.write(batch)
        print(f"{groups * partitions} offsets of {groups} groups stored")
        for label, shards in (("1 shard", {7}), ("25 shards", set(range(25))), ("50 shards", set(range(50)))):
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                state = await store.load_shards(shards, lambda group_id: shard_of(group_id, SHARDS))
                times.append(time.perf_counter() - started)
            print(
                f"load_shards({label}): {len(state.offsets)} offsets, "
                f"median {statistics.median(times) * 1000:.0f} ms, min {min(times) * 1000:.0f} ms"
            )
        await store.close()
    finally:
        server.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(measure(args.groups, args.partitions, args.repeat))


if __name__ == "__main__":
    main()
