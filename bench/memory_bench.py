"""Memory per idle group: what the pure core keeps for each group once it is quiet.

Builds N groups on a fresh shard in a fresh interpreter, through the core's own request
handlers (every write applied as durable at once), and reports the growth of VmRSS divided
by N, after a full collection:

* **classic**: 2 members (JoinGroup v5 with the KIP-394 round trip, a consumer subscription to
  one topic, SyncGroup with a 64-byte assignment each), then an OffsetCommit of 10 partitions.
* **consumer** (KIP-848): 2 members heartbeat into the group until it is Stable with 5 of the
  topic's 10 partitions each.

    .venv/bin/python bench/memory_bench.py                      # 20k and 100k groups of each kind
    .venv/bin/python bench/memory_bench.py --groups 20000 --kinds classic --sites 15

``--sites N`` also prints the N largest allocation sites (tracemalloc; slower, bigger) of the
first configuration. Run on demand; it is not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.coordinator

from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.result import Result
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, TopicPartitions
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.coordinator.harness import FakeCatalog, consumer_group_of, subscription

TOPIC = "orders"
PARTITIONS = 10
METADATA = subscription([TOPIC])


class Sink:
    __slots__ = ("response",)

    def __init__(self) -> None:
        self.response: object = None

    def send(self, response: object) -> None:
        self.response = response


def apply(result: Result) -> None:
    follow_up = result.deliver(0)
    if follow_up is not None:
        apply(follow_up)


def ctx(sink: Sink, version: int, client: str) -> RequestContext:
    return RequestContext(0, 0, version, client, "/10.0.0.1", sink)


def classic_group(shard: GroupCoordinator, group_id: str) -> None:
    sinks = [Sink(), Sink()]
    protocols = [JoinGroupRequestProtocol("range", METADATA)]

    def join(i: int, member_id: str) -> None:
        request = JoinGroupRequest(group_id, 45_000, 300_000, member_id, None, "consumer", protocols)
        apply(shard.join_group(ctx(sinks[i], 5, f"consumer-{group_id}-{i}"), request))

    for i in range(2):
        join(i, "")  # MEMBER_ID_REQUIRED
    member_ids = [sink.response.member_id for sink in sinks]  # type: ignore[attr-defined]
    for i, member_id in enumerate(member_ids):
        join(i, member_id)
    for _ in range(10):
        if not any(sink.response.error_code for sink in sinks):  # type: ignore[attr-defined]
            break
        for result in shard.poll_timers(0, 0):  # the initial rebalance delay (0 ms) ends
            apply(result)
    responses = [sink.response for sink in sinks]
    generation = responses[0].generation_id  # type: ignore[attr-defined]
    leader = responses[0].leader  # type: ignore[attr-defined]
    assert all(r.error_code == 0 for r in responses), responses  # type: ignore[attr-defined]
    assignments = [SyncGroupRequestAssignment(m, b"a" * 64) for m in member_ids]
    for i, member_id in enumerate(member_ids):
        sync = SyncGroupRequest(
            group_id, generation, member_id, None, None, None, assignments if member_id == leader else []
        )
        apply(shard.sync_group(ctx(sinks[i], 3, "c"), sync))
    partitions = [OffsetCommitRequestPartition(p, 1000 + p) for p in range(PARTITIONS)]
    commit = OffsetCommitRequest(
        group_id,
        generation,
        member_ids[0],
        None,
        -1,
        [OffsetCommitRequestTopic(TOPIC, partitions=partitions)],
    )
    sink = Sink()
    apply(shard.commit_offsets(ctx(sink, 8, "c"), commit))
    answered = sink.response.topics[0].partitions  # type: ignore[attr-defined]
    assert len(answered) == PARTITIONS and all(p.error_code == 0 for p in answered), sink.response


def consumer_group(shard: GroupCoordinator, group_id: str, topic_id: bytes) -> None:
    for i in range(2):
        join = ConsumerGroupHeartbeatRequest(
            group_id, f"{group_id}-m{i}", 0, rebalance_timeout_ms=300_000,
            subscribed_topic_names=[TOPIC], topic_partitions=[],
        )  # fmt: skip
        apply(shard.handle(ctx(Sink(), 1, f"consumer-{group_id}-{i}"), join))
    group = consumer_group_of(shard, group_id)
    assert group is not None
    for _ in range(10):
        if group.state == "Stable":
            return
        for m in list(group.members.values()):
            owned = [TopicPartitions(topic_id, sorted(m.assigned.get(TOPIC, ())))]
            beat = ConsumerGroupHeartbeatRequest(
                group_id, m.member_id, m.member_epoch, topic_partitions=owned
            )
            apply(shard.handle(ctx(Sink(), 1, "c"), beat))
    raise AssertionError(f"{group_id} not Stable: {group.state}")


def check(shard: GroupCoordinator, kind: str, groups: int) -> None:
    """Every group is there, Stable, with its offsets: the figure is for the state described."""
    if kind == "classic":
        stored = sum(len(shard.committed_offsets(f"group-{i:07d}")) for i in range(groups))
        assert stored == groups * PARTITIONS, stored
    else:
        for i in range(groups):
            group = consumer_group_of(shard, f"group-{i:07d}")
            assert group is not None and group.state == "Stable" and len(group.members) == 2


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def measure(kind: str, groups: int, sites: int) -> dict[str, object]:
    """In this interpreter: build the groups and return the RSS growth per group."""
    counter = iter(range(10**12))
    shard = GroupCoordinator(
        # group.max.groups defaults to 100,000: room for the warm-up groups too.
        BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_groups=groups + 10),
        lambda prefix: f"{prefix}-{next(counter):032x}",
    )
    catalog = FakeCatalog()
    topic_id = catalog.set_topic(TOPIC, PARTITIONS).topic_id
    shard.attach_catalog(catalog)
    shard.load([], [], 0, 0)
    classic_group(shard, "warm-up-c")  # first-use allocations (caches, interned names) before the baseline
    consumer_group(shard, "warm-up-k", topic_id)
    if sites:
        tracemalloc.start(1)
    gc.collect()
    before = rss_bytes()
    started = time.perf_counter()
    for i in range(groups):
        group_id = f"group-{i:07d}"
        if kind == "classic":
            classic_group(shard, group_id)
        else:
            consumer_group(shard, group_id, topic_id)
    seconds = time.perf_counter() - started
    check(shard, kind, groups)
    gc.collect()
    after = rss_bytes()
    out: dict[str, object] = {
        "kind": kind,
        "groups": groups,
        "rss_per_group_bytes": (after - before) / groups,
        "rss_growth_mb": (after - before) / 2**20,
        "build_seconds": seconds,
    }
    if sites:
        snapshot = tracemalloc.take_snapshot()
        top = snapshot.statistics("lineno")[:sites]
        out["sites"] = [f"{stat.size / groups:8.0f} B/group  {stat.traceback[0]}" for stat in top]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", default="20000,100000", help="comma list of group counts")
    parser.add_argument("--kinds", default="classic,consumer", help="classic and/or consumer")
    parser.add_argument("--sites", type=int, default=0, help="print the N largest allocation sites")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "GROUPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.sites)))
        return
    print("| groups | kind | RSS per idle group (B) | RSS growth (MB) | build time (s) |")
    print("|---:|---|---:|---:|---:|")
    for count in (int(x) for x in args.groups.split(",")):
        for kind in args.kinds.split(","):
            # A fresh interpreter per configuration: freed memory is not given back to the OS.
            cmd = [sys.executable, __file__, "--one", kind, str(count), "--sites", str(args.sites)]
            result = json.loads(subprocess.run(cmd, capture_output=True, check=True, text=True).stdout)
            print(
                f"| {count:,} | {kind} | {result['rss_per_group_bytes']:,.0f} | {result['rss_growth_mb']:.1f} | "
                f"{result['build_seconds']:.1f} |",
                flush=True,
            )
            for line in result.get("sites", []):
                print(f"    {line}")


if __name__ == "__main__":
    main()
