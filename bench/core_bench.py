"""Core micro-benchmark: the pure group coordinator alone (no codec, no event loop).

The product targets 100k heartbeats/s on one core and a 1000-member rebalance in < 500 ms end
to end; the core must leave most of that budget to the runtime. Medians of several rounds.

    .venv/bin/python bench/core_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.coordinator.scale

from coordinator.context import RequestContext
from coordinator.shard import GroupCoordinator
from tests.coordinator.scale import Sink, apply, heartbeat_rate, join_request, stable_group


def rejoin_seconds(coordinator: GroupCoordinator, member_ids: list[str], generation: int) -> float:
    sinks = [Sink() for _ in member_ids]
    started = time.perf_counter()
    for i, member_id in enumerate(member_ids):
        apply(
            coordinator.join_group(RequestContext(0, 0, 5, f"c{i}", "/h", sinks[i]), join_request(member_id))
        )
    elapsed = time.perf_counter() - started
    assert {sink.response.generation_id for sink in sinks} == {generation + 1}
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    joins, rejoins, rates, large_rates = [], [], [], []
    for _ in range(args.rounds):
        coordinator, member_ids, generation, elapsed = stable_group(1000)
        joins.append(elapsed)
        rates.append(heartbeat_rate(coordinator, member_ids, generation, 50_000))
        rejoins.append(rejoin_seconds(coordinator, member_ids, generation))
        large = stable_group(5000)
        large_rates.append(heartbeat_rate(*large[:3], 50_000))
    print(
        f"1000-member join + sync:           median {statistics.median(joins) * 1000:7.1f} ms  (target < 500 ms end to end)"
    )
    print(f"1000-member rejoin (join phase):   median {statistics.median(rejoins) * 1000:7.1f} ms")
    print(
        f"heartbeats, 1000-member group:     median {statistics.median(rates):9,.0f} /s  (target > 100k/s end to end)"
    )
    print(
        f"heartbeats, 5000-member group:     median {statistics.median(large_rates):9,.0f} /s  (must not fall with group size)"
    )


if __name__ == "__main__":
    main()
