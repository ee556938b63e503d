"""The cost of taking shards over on PostgreSQL (docs/multinode.md#loading-a-shard).

    .venv/bin/python bench/shard_load.py [--groups 2000] [--partitions 50] [--repeat 5]

Starts a throwaway PostgreSQL (initdb; as user postgres when run as root), stores
``groups * partitions`` offsets (100k by default) and times what a node taking shards over
reads: every group id once (``group_ids``), then the rows of each shard's groups
(``load_groups``, one read per shard, as the node loads them one by one) for one shard, half of
them and all 50: the wall time of the reads, including decoding the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import asyncpg

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
        dsn = await create_database(server)
        store = PostgresStore(dsn, command_timeout=120)
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
        # A long-running database has planner statistics (autovacuum); a freshly filled one not yet.
        analyzing = await asyncpg.connect(dsn)
        await analyzing.execute("ANALYZE")
        await analyzing.close()
        for label, shards in (
            ("1 shard", [7]),
            ("25 shards", list(range(25))),
            ("50 shards", list(range(50))),
        ):
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                by_shard: dict[int, list[str]] = {}
                for group_id in await store.group_ids():
                    by_shard.setdefault(shard_of(group_id, SHARDS), []).append(group_id)
                offsets = 0
                for shard in shards:
                    offsets += len((await store.load_groups(by_shard.get(shard, []))).offsets)
                times.append(time.perf_counter() - started)
            print(
                f"take {label}: {offsets} offsets, "
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
