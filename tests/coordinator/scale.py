"""A large stable group built straight on the pure core, shared by tests and bench/core_bench.py."""

from __future__ import annotations

import time
from typing import Any

from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.result import Result
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.coordinator.harness import subscription

METADATA = subscription([f"topic-{i}" for i in range(5)])


class Sink:
    __slots__ = ("response",)

    def __init__(self) -> None:
        self.response: Any = None

    def send(self, response: Any) -> None:
        self.response = response


def apply(result: Result, now_ms: int = 0) -> None:
    follow_up = result.deliver(now_ms)
    if follow_up is not None:
        apply(follow_up, now_ms)


def join_request(member_id: str) -> JoinGroupRequest:
    protocols = [
        JoinGroupRequestProtocol("range", METADATA),
        JoinGroupRequestProtocol("roundrobin", METADATA),
    ]
    return JoinGroupRequest("g", 30_000, 60_000, member_id, None, "consumer", protocols)


def stable_group(size: int) -> tuple[GroupCoordinator, list[str], int, float]:
    counter = iter(range(10**9))
    coordinator = GroupCoordinator(
        BrokerGroupSettings(group_initial_rebalance_delay_ms=0), lambda p: f"{p}-{next(counter)}"
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
