"""CPU cost of authorizing forwarded requests in the gateway (coordinator/gateway/authorization.py).

    python bench/authz_bench.py                  # Produce and Fetch shapes as librdkafka sends them

Times ForwardedAuthorization.screen on request frames shaped like the bench's clients' (Produce:
one batch per partition; Fetch: a consumer's request for its partitions) with a non-super
principal holding a PREFIXED ALLOW among other bindings, so the decisions come from the ACLs
(and from the cache once decided). Reports microseconds per request and per MB forwarded: the
gateway's own forwarding costs about 1 ms of CPU per MB (docs/gateway.md#performance), so
authorization's share of throughput is roughly its µs/MB over 1000.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator.gateway.authorization import ForwardedAuthorization
from coordinator.gateway.authz_rules import PREVIEWS, RULES
from coordinator.gateway.catalog import UpstreamCatalog
from coordinator.security.acl import Authorizer, Operation, PatternType, Permission, ResourceType
from protocol.messages import fetch, produce
from storage.records import AclRecord
from tests.gateway.authz_client import frame_of

PARTITIONS = 3


def _authorization() -> ForwardedAuthorization:
    authorizer = Authorizer(["User:admin"])
    acls = [
        AclRecord(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED, f"User:u{i}", "*", Operation.ALL, Permission.ALLOW)
        for i in range(200)
    ]  # fmt: skip
    acls.append(AclRecord(ResourceType.TOPIC, "bench-", PatternType.PREFIXED, "User:client", "*", Operation.ALL, Permission.ALLOW))  # fmt: skip
    acls.append(AclRecord(ResourceType.TOPIC, "bench-secret", PatternType.LITERAL, "User:*", "*", Operation.ALL, Permission.DENY))  # fmt: skip
    authorizer.load(acls)
    return ForwardedAuthorization(authorizer, UpstreamCatalog(), RULES, PREVIEWS)


def _time(screen: Callable[[], object], seconds: float = 1.0) -> float:
    """Median µs per call over rounds of about 0.1 s."""
    per_call: list[float] = []
    for _ in range(1000):
        screen()  # warm-up: the decisions cached
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        calls = 0
        started = time.perf_counter()
        while calls < 50 or time.perf_counter() - started < 0.1:
            screen()
            calls += 1
        per_call.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(per_call)


def main() -> int:
    authorization = _authorization()
    print("| request | bytes | µs per request | µs per MB |")
    print("|---|---|---|---|")
    for batch_kb in (16, 256, 1024):
        batch = b"r" * (batch_kb * 1024)
        topics = [
            produce.TopicProduceData("bench-t", partition_data=[produce.PartitionProduceData(p, batch) for p in range(PARTITIONS)])
        ]  # fmt: skip
        frame = frame_of(0, 9, produce.ProduceRequest(None, -1, 30000, topics))
        micros = _time(partial(authorization.screen, "User:client", "127.0.0.1", 0, 9, frame))
        print(
            f"| Produce v9, 3 x {batch_kb} KB | {len(frame)} | {micros:.1f} | {micros / (len(frame) / 1e6):.0f} |"
        )
    partitions = [
        fetch.FetchPartition(partition=p, fetch_offset=1000, partition_max_bytes=1 << 20)
        for p in range(PARTITIONS)
    ]
    request = fetch.FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800,
                                 topics=[fetch.FetchTopic(topic="bench-t", partitions=partitions)])  # fmt: skip
    frame = frame_of(1, 12, request)
    micros = _time(partial(authorization.screen, "User:client", "127.0.0.1", 1, 12, frame))
    answer_mb = 4.5  # librdkafka's Fetch answers in the gateway bench (docs/gateway.md#performance)
    print(
        f"| Fetch v12, 3 partitions | {len(frame)} | {micros:.1f} | {micros / answer_mb:.0f} (per MB answered) |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
