"""The steps of a background load, in one process without a server, on any store.

What ``coordinator/server/group_loading.py`` does after the server starts serving, timed step by
step on a prefilled store (``bench/prefill.py``): the unsharded state, the group ids read and
sorted into shards, one wanted shard read and built (→ its groups could be served), then every
other shard (→ everything loaded). Useful where ``restart_times.py`` cannot show it: a node on
PostgreSQL takes the several-node path, whose shards load in its first ownership round, while
this is the path a single node takes (SQLite, memory, PostgreSQL in gateway mode).

    .venv/bin/python bench/background_steps.py sqlite:////tmp/restart.db
    .venv/bin/python bench/background_steps.py --postgres [--groups 100000 --offsets 10]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prefill import GROUP_PREFIX, prefill

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.sharding import shard_of
from storage.base import GroupLoadingStore
from storage.url import open_store

SHARDS = 50


class Clock:
    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def lap(self, label: str) -> None:
        print(
            f"  {label:<42} {time.perf_counter() - self.wall:6.2f} s wall {time.process_time() - self.cpu:6.2f} s CPU"
        )


async def steps(url: str, wanted_group: str) -> None:
    store = open_store(url)
    await store.open()
    assert isinstance(store, GroupLoadingStore)
    try:
        gc.disable()
        clock = Clock()
        unsharded = await store.load_unsharded()
        clock.lap(f"unsharded state ({len(unsharded.topics)} topics)")
        by_shard: dict[int, list[str]] = {}
        for group_id in await store.group_ids():
            by_shard.setdefault(shard_of(group_id, SHARDS), []).append(group_id)
        clock.lap(f"group ids read and hashed ({sum(map(len, by_shard.values()))})")
        shard = GroupCoordinator(BrokerGroupSettings())
        wanted = shard_of(wanted_group, SHARDS)
        order = [wanted, *sorted(s for s in by_shard if s != wanted)]
        for index, number in enumerate(order):
            state = await store.load_groups(by_shard[number])
            now_ms, wall_ms = int(time.monotonic() * 1000), int(time.time() * 1000)
            shard.load_more(state.group_rows(), state.offsets, now_ms, wall_ms, state.group_configs)
            gc.freeze()
            if index == 0:
                clock.lap(f"shard {number} of {wanted_group} read and built")
        clock.lap(f"all {len(order)} shards ({shard.offset_count()} offsets)")
    finally:
        gc.enable()
        await store.close()


async def analyze(url: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", nargs="?", help="a prefilled store (bench/prefill.py)")
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--offsets", type=int, default=10)
    parser.add_argument("--postgres", action="store_true", help="prefill and use a throwaway PostgreSQL")
    args = parser.parse_args()
    wanted = f"{GROUP_PREFIX}{args.groups // 2}"
    if args.postgres:
        from runner.postgres import throwaway_postgres

        with throwaway_postgres() as url:
            asyncio.run(prefill(url, args.groups, args.offsets))
            # Planner statistics, as autovacuum gathers them on a database in use: without them
            # PostgreSQL scans the whole table for each shard's `group_id = ANY(...)`.
            asyncio.run(analyze(url))
            for _ in range(2):
                print("PostgreSQL:")
                asyncio.run(steps(url, wanted))
    elif args.url:
        print(args.url)
        asyncio.run(steps(args.url, wanted))
    else:
        parser.error("give a prefilled store's URL or --postgres")


if __name__ == "__main__":
    main()
