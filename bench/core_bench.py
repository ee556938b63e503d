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

from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, TopicPartitions
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from tests.coordinator.harness import FakeCatalog, consumer_group_of
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


def consumer_group(members: int, partitions: int) -> tuple[GroupCoordinator, float, float]:
    """KIP-848: ``members`` join one by one (each join bumps the epoch and reruns the uniform
    assignor), then everyone heartbeats with what it owns until the group is Stable."""
    coordinator = GroupCoordinator(BrokerGroupSettings())
    catalog = FakeCatalog()
    topic_id = catalog.set_topic("t", partitions).topic_id
    coordinator.attach_catalog(catalog)
    coordinator.load([], [], 0, 0)
    started = time.perf_counter()
    for i in range(members):
        join = ConsumerGroupHeartbeatRequest(
            "g", f"m{i}", 0, rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[]
        )
        apply(coordinator.handle(RequestContext(0, 0, 1, f"c{i}", "/h", Sink()), join))
    joined = time.perf_counter() - started
    group = consumer_group_of(coordinator, "g")
    assert group is not None
    started = time.perf_counter()
    while group.state != "Stable":
        for m in list(group.members.values()):
            owned = [TopicPartitions(topic_id, sorted(m.assigned.get("t", ())))]
            beat = ConsumerGroupHeartbeatRequest("g", m.member_id, m.member_epoch, topic_partitions=owned)
            apply(coordinator.handle(RequestContext(0, 0, 1, "c", "/h", Sink()), beat))
    return coordinator, joined, time.perf_counter() - started


def consumer_heartbeat_rate(coordinator: GroupCoordinator, count: int) -> float:
    group = consumer_group_of(coordinator, "g")
    assert group is not None
    requests = [
        ConsumerGroupHeartbeatRequest("g", m.member_id, m.member_epoch) for m in group.members.values()
    ]
    sink = Sink()
    started = time.perf_counter()
    done = 0
    while done < count:
        for request in requests:
            coordinator.handle(RequestContext(0, 0, 1, "c", "/h", sink), request)
        done += len(requests)
    return done / (time.perf_counter() - started)


def commit_rate(coordinator: GroupCoordinator, member_ids: list[str], generation: int, count: int) -> float:
    """OffsetCommits of one partition each, every write durable at once (the core's share only)."""
    requests = [
        OffsetCommitRequest(
            "g",
            generation,
            m,
            None,
            -1,
            [OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(i)])],
        )
        for i, m in enumerate(member_ids)
    ]
    ctx = RequestContext(0, 0, 8, "c", "/h", Sink())
    size = len(member_ids)
    started = time.perf_counter()
    for k in range(count):
        requests[k % size].topics[0].partitions[0].committed_offset = k
        apply(coordinator.commit_offsets(ctx, requests[k % size]))
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    joins, rejoins, rates, large_rates, commits = [], [], [], [], []
    cg_joins, cg_reconciles, cg_rates = [], [], []
    for _ in range(args.rounds):
        cg, cg_join, cg_reconcile = consumer_group(1000, 1000)
        cg_joins.append(cg_join)
        cg_reconciles.append(cg_reconcile)
        cg_rates.append(consumer_heartbeat_rate(cg, 50_000))
        coordinator, member_ids, generation, elapsed = stable_group(1000)
        joins.append(elapsed)
        rates.append(heartbeat_rate(coordinator, member_ids, generation, 50_000))
        commits.append(commit_rate(coordinator, member_ids, generation, 50_000))
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
        f"offset commits, 1000-member group: median {statistics.median(commits):9,.0f} /s  (one partition each)"
    )
    print(
        f"heartbeats, 5000-member group:     median {statistics.median(large_rates):9,.0f} /s  (must not fall with group size)"
    )
    print(
        f"KIP-848 1000 joins, one by one:    median {statistics.median(cg_joins) * 1000:7.1f} ms  (1000 epochs, 1000 partitions)"
    )
    print(f"KIP-848 reconcile 1000 to Stable:  median {statistics.median(cg_reconciles) * 1000:7.1f} ms")
    print(f"KIP-848 heartbeats, 1000 members:  median {statistics.median(cg_rates):9,.0f} /s")


if __name__ == "__main__":
    main()
