"""Core micro-benchmark: the pure group coordinator alone (no codec, no event loop).

The product targets 100k heartbeats/s on one core and a 1000-member rebalance in < 500 ms end
to end; the core must leave most of that budget to the runtime. Medians of several rounds.

    .venv/bin/python bench/core_bench.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import time
from typing import Any

from coordinator.context import RequestContext
from coordinator.group_config import GroupConfig
from coordinator.result import Result
from coordinator.shard import GroupCoordinator
from protocol.messages.consumer_protocol import (
    ConsumerProtocolSubscription,
    encode_consumer_protocol_subscription_v0,
)
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment


def subscription(topics: list[str]) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    encode_consumer_protocol_subscription_v0(ConsumerProtocolSubscription(topics=topics), out)
    return bytes(out)


METADATA = subscription([f"topic-{i}" for i in range(5)])


class Sink:
    __slots__ = ("response",)

    def __init__(self) -> None:
        self.response: Any = None

    def send(self, response: Any) -> None:
        self.response = response


def apply(result: Result, now_ms: int = 0) -> None:
    for reply_to, response in result.replies:
        reply_to.send(response)
    if result.records:
        assert result.on_durable is not None
        apply(result.on_durable(now_ms), now_ms)


def join_request(member_id: str) -> JoinGroupRequest:
    protocols = [
        JoinGroupRequestProtocol("range", METADATA),
        JoinGroupRequestProtocol("roundrobin", METADATA),
    ]
    return JoinGroupRequest("g", 30_000, 60_000, member_id, None, "consumer", protocols)


def stable_group(size: int) -> tuple[GroupCoordinator, list[str], int, float]:
    counter = iter(range(10**9))
    coordinator = GroupCoordinator(
        GroupConfig(group_initial_rebalance_delay_ms=0), lambda p: f"{p}-{next(counter)}"
    )
    sinks = [Sink() for _ in range(size)]
    for i, sink in enumerate(sinks):  # v5: MEMBER_ID_REQUIRED first
        apply(coordinator.join_group(RequestContext(0, 0, 5, f"c{i}", "/h", sink), join_request("")))
    started = time.perf_counter()
    member_ids = [sink.response.member_id for sink in sinks]
    for i, member_id in enumerate(member_ids):
        apply(
            coordinator.join_group(RequestContext(0, 0, 5, f"c{i}", "/h", sinks[i]), join_request(member_id))
        )
    while any(sink.response.error_code for sink in sinks):  # the initial delay (0 ms) may be extended once
        for result in coordinator.poll_timers(0, 0):
            apply(result)
    generation, leader = sinks[0].response.generation_id, sinks[0].response.leader
    assignments = [SyncGroupRequestAssignment(m, b"x" * 64) for m in member_ids]
    sync = SyncGroupRequest("g", generation, leader, None, None, None, assignments)
    apply(coordinator.sync_group(RequestContext(0, 0, 3, "c", "/h", Sink()), sync))
    elapsed = time.perf_counter() - started
    return coordinator, member_ids, generation, elapsed


def heartbeat_rate(
    coordinator: GroupCoordinator, member_ids: list[str], generation: int, count: int
) -> float:
    requests = [HeartbeatRequest("g", generation, m, None) for m in member_ids]
    contexts = [RequestContext(0, 0, 4, "c", "/h", Sink()) for _ in member_ids]
    size = len(member_ids)
    started = time.perf_counter()
    for k in range(count):
        ctx = contexts[k % size]
        ctx.now_ms = k
        coordinator.heartbeat(ctx, requests[k % size])
    return count / (time.perf_counter() - started)


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
