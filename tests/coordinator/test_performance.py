"""Cost properties of the hot paths that can be checked exactly (allocation, heap growth).

Timings live in bench/core_bench.py: these machines are shared and noisy, so no test here asserts
on wall-clock time.
"""

from __future__ import annotations

import tracemalloc

from coordinator.core.context import RequestContext
from tests.coordinator.scale import Sink, apply, heartbeat_rate, join_request, stable_group


def test_1000_member_group_rejoins_into_one_new_generation() -> None:
    coordinator, member_ids, generation, _ = stable_group(1000)
    sinks = [Sink() for _ in member_ids]
    for i, member_id in enumerate(member_ids):
        apply(
            coordinator.join_group(RequestContext(0, 0, 5, f"c{i}", "/h", sinks[i]), join_request(member_id))
        )
    assert {sink.response.generation_id for sink in sinks} == {generation + 1}


def test_heartbeats_leave_no_garbage_behind() -> None:
    coordinator, member_ids, generation, _ = stable_group(200)
    heartbeat_rate(coordinator, member_ids, generation, 10_000)  # warm up
    timers = coordinator._timers
    heap_size = len(timers._heap)
    tracemalloc.start()
    try:
        # Memory held after 10k heartbeats vs after 50k more: a leak would grow with the count.
        heartbeat_rate(coordinator, member_ids, generation, 10_000)
        before = tracemalloc.get_traced_memory()[0]
        heartbeat_rate(coordinator, member_ids, generation, 50_000)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 1_024, f"{after - before} bytes retained by 50k heartbeats"
    assert len(timers._heap) == heap_size  # deadlines moved in place, no new heap entries
