"""Lag sampler cost (coordinator/server/lag.py): what one sample costs the event loop.

One sample reads every committed offset through the shard's request API (ListGroups, then one
OffsetFetch for every group) and computes the lag series within the budget. Both run on the
server's event loop, so their time is time no request is served. Pure CPU here: the offsets are
loaded into a GroupCoordinator, the log ends are a dict. Prints the median (min-max) of several
rounds for each size, and the longest the event loop was held during one whole sample (the read
lets the loop go every 100 groups, the series are computed in a worker thread; what remains is
mostly the garbage collector's full passes over the loaded state, which --gc-freeze takes out of
its reach):

    .venv/bin/python bench/lag_bench.py [--rounds 5] [--groups 1000,10000] [--partitions 10] [--gc-freeze]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.server.lag import (
    DEFAULT_MAX_SERIES,
    LagSampler,
    Partition,
    compute_lag,
    shard_committed_offsets,
)
from storage.records import OffsetCommitRecord

NOW_MS, WALL_MS = 1_000_000, 1_700_000_000_000


class _Clock:
    def now_ms(self) -> int:
        return NOW_MS

    def wall_ms(self) -> int:
        return WALL_MS


def loaded(groups: int, partitions: int) -> GroupCoordinator:
    """groups simple groups, each with a committed offset on `partitions` partitions of its topic."""
    coordinator = GroupCoordinator(BrokerGroupSettings())
    offsets = [
        OffsetCommitRecord(f"group-{g:06d}", f"topic-{g % 100:03d}", p, 1000 + p, -1, "", WALL_MS, None)
        for g in range(groups)
        for p in range(partitions)
    ]
    coordinator.load([], offsets, NOW_MS, WALL_MS)
    return coordinator


def rounds_ms(rounds: int, run: Callable[[], object]) -> list[float]:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    return timings


async def longest_stall_ms(sampler: LagSampler) -> float:
    """The longest the event loop was held during one sample: gaps seen by a task that yields in a loop."""
    done = False
    longest = 0.0

    async def probe() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)
    assert await sampler.sample_once() is not None
    done = True
    await task
    return longest * 1000


def fmt(timings: list[float]) -> str:
    return f"{statistics.median(timings):8.1f} ms ({min(timings):.1f}-{max(timings):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--groups", default="1000,10000")
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="move the loaded state out of the garbage collector's reach (gc.freeze) before measuring",
    )
    args = parser.parse_args()
    print(
        f"{'groups':>7} {'offsets':>8}  {'read committed':>26}  {'loop stall per sample':>26}  "
        f"{'compute series':>26}  series kept/dropped"
    )
    for groups in (int(g) for g in args.groups.split(",")):
        coordinator = loaded(groups, args.partitions)
        read = shard_committed_offsets([coordinator], _Clock())
        committed = asyncio.run(read())
        ends = {tp: 5000 for offsets in committed.values() for tp in offsets}
        if args.gc_freeze:  # what a server could do once loading is done
            gc.collect()
            gc.freeze()
        read_ms = rounds_ms(args.rounds, lambda read=read: asyncio.run(read()))

        async def end_offsets(
            partitions: list[Partition], ends: dict[Partition, int] = ends
        ) -> dict[Partition, int]:
            return ends

        sampler = LagSampler(read, end_offsets)
        stalls = [asyncio.run(longest_stall_ms(sampler)) for _ in range(args.rounds)]
        sample = compute_lag(committed, ends, DEFAULT_MAX_SERIES, 0.0)
        compute_ms = rounds_ms(
            args.rounds, lambda c=committed, e=ends: compute_lag(c, e, DEFAULT_MAX_SERIES, 0.0)
        )
        kept = len(sample.topic_lag) + len(sample.partition_lag)
        print(
            f"{groups:>7} {groups * args.partitions:>8}  {fmt(read_ms):>26}  {fmt(stalls):>26}  {fmt(compute_ms):>26}  "
            f"{kept}/{sample.dropped}"
        )


if __name__ == "__main__":
    main()
