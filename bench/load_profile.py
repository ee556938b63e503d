"""Where a restart's load time goes: reading the store vs rebuilding the shard, with profiles.

Times, in one process and without a server, the two steps the server runs before it serves
groups: ``store.load()`` (SQL rows to records, in the store's thread) and ``GroupCoordinator.load()``
(records to groups, offsets and timers, with the cProfile entries that take the most time), then
one full garbage collection over the loaded state before and after ``gc.freeze()``. Prefill a store with
``bench/prefill.py`` first (the restart workload's data set):

    .venv/bin/python bench/prefill.py sqlite:////tmp/restart.db --groups 100000 --offsets 10
    .venv/bin/python bench/load_profile.py sqlite:////tmp/restart.db [--top 12] [--no-profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from storage.records import LoadedState
from storage.url import open_store


async def read_store(url: str, into: list[LoadedState]) -> None:
    """Not returned from the main task: CPython 3.11's ``asyncio.run`` formats the main task,
    result included, when it checks its SIGINT handler, and the repr of a million records
    took seconds of the timed step."""
    store = open_store(url)
    await store.open()
    try:
        into.append(await store.load())
    finally:
        await store.close()


def timed(label: str, profile: bool, top: int, fn: Any, *args: Any) -> Any:
    profiler = cProfile.Profile() if profile else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = fn(*args)
    if profiler is not None:
        profiler.disable()
    print(f"{label}: {time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} s CPU")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
        print("\n".join("    " + line for line in lines[start:]))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", help="a prefilled store, e.g. sqlite:////tmp/restart.db")
    parser.add_argument("--top", type=int, default=12, help="profile entries per step")
    parser.add_argument("--no-profile", action="store_true", help="times only (profiling slows both steps)")
    parser.add_argument(
        "--gc-enabled",
        action="store_true",
        help="leave the collector on while loading (the server turns it off)",
    )
    args = parser.parse_args()
    profile = not args.no_profile
    if not args.gc_enabled:
        gc.disable()
    # Reading runs in the store's own thread, out of cProfile's sight: timed only.
    loaded: list[LoadedState] = []
    timed("store.load()", False, 0, lambda: asyncio.run(read_store(args.url, loaded)))
    (state,) = loaded
    loaded.clear()
    print(
        f"    {len(state.groups)} classic groups, {len(state.consumer_groups)} consumer groups, "
        f"{len(state.offsets)} offsets"
    )
    shard = GroupCoordinator(BrokerGroupSettings())
    now_ms, wall_ms = int(time.monotonic() * 1000), int(time.time() * 1000)
    timed(
        "GroupCoordinator.load()",
        profile,
        args.top,
        shard.load,
        state.group_rows(),
        state.offsets,
        now_ms,
        wall_ms,
    )
    del state
    gc.enable()
    timed("gc.collect() over the loaded state", False, 0, gc.collect)
    gc.freeze()
    timed("gc.collect() after gc.freeze()", False, 0, gc.collect)


if __name__ == "__main__":
    main()
