"""Streams groups: how fast three Kafka Streams instances get all their tasks running, and how
fast a fourth one is absorbed -- Kafka 4.4's own coordinator against the gateway in front of the
same broker, in one run with the arms interleaved.

Measured on demand (not a pytest test):

    .venv/bin/python bench/streams_join.py               # 3 repetitions per arm
    .venv/bin/python bench/streams_join.py --reps 1

One repetition, per arm: a fresh application id and input/output topics (6 partitions, so 12
tasks: the word count of tests/java, a stateless and a stateful subtopology); t0 = just before
three instances (one JVM each) start at once; "start" = when all three print RUNNING and the
group is described Stable with three members and every task assigned once; then a fourth instance
starts (t1) and "scale" = when it is RUNNING and the group is Stable again with four members and
every task assigned; "scale" is split into "joined" (the new member is in the group: JVM start-up
and the client's first heartbeat) and "settled" (from there to Stable: the coordinator's hand-over
through heartbeats). Both sides use a 500 ms streams heartbeat interval (the test broker's
``group.streams.heartbeat.interval.ms``, tests/support/kafka_broker.py; the gateway's
``group-streams-heartbeat-interval-ms``) and no initial rebalance delay
(``group.streams.initial.rebalance.delay.ms=0`` on both). JVM start-up is inside both figures,
equally for both arms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from tests.gateway.conftest import running_gateway
from tests.support.kafka_broker import running_kafka
from tests.support.streams_app import StreamsInstance, WordCountApp
from tests.support.wire_client import WireClient

PARTITIONS = 6


def _described(bootstrap: str, app: str, members: int) -> tuple[bool, bool]:
    """Whether the group has ``members`` members, and whether it is settled with them."""
    with WireClient(bootstrap) as client:
        group = client.request(ApiKey.STREAMS_GROUP_DESCRIBE, 1, StreamsGroupDescribeRequest([app])).groups[0]
    tasks = sorted(
        (t.subtopology_id, p) for m in group.members for t in m.assignment.active_tasks for p in t.partitions
    )
    wanted = sorted((s, p) for s in ("0", "1") for p in range(PARTITIONS))
    joined = group.error_code == 0 and len(group.members) == members
    return joined, joined and group.group_state == "Stable" and tasks == wanted


def _wait(
    bootstrap: str, app: str, instances: list[StreamsInstance], members: int, t0: float
) -> tuple[float, float]:
    """Seconds from t0 until the group has ``members`` members, and until it is settled."""
    joined_at: float | None = None
    while True:
        joined, settled = _described(bootstrap, app, members)
        now = time.monotonic()
        if joined and joined_at is None:
            joined_at = now
        if settled and all(i.running() for i in instances):
            assert joined_at is not None
            return joined_at - t0, now - t0
        if now - t0 > 180:
            raise TimeoutError(f"{app}: not settled with {members} members after 180 s")
        time.sleep(0.05)


def one_run(arm: str, bootstrap: str, rep: int, work: Path) -> tuple[float, float, float]:
    app_id = f"bench-{arm}-{rep}"
    words, output = f"{app_id}-words", f"{app_id}-counts"
    with WireClient(bootstrap) as client:
        created = client.request(
            ApiKey.CREATE_TOPICS,
            5,
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=t, num_partitions=PARTITIONS, replication_factor=1)
                    for t in (words, output)
                ]
            ),
        )
    assert all(t.error_code == 0 for t in created.topics), created
    directory = work / app_id
    directory.mkdir()
    app = WordCountApp(bootstrap, app_id, directory, (words, output))
    try:
        t0 = time.monotonic()
        first = [app.start() for _ in range(3)]
        _, start = _wait(bootstrap, app_id, first, 3, t0)
        t1 = time.monotonic()
        added = app.start()
        joined, scale = _wait(bootstrap, app_id, [*first, added], 4, t1)
        return start, joined, scale
    finally:
        app.stop_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float]]] = {"kafka": [], "gateway": []}
    with (
        tempfile.TemporaryDirectory() as tmp,
        # Kafka's streams groups wait group.streams.initial.rebalance.delay.ms (3 s) before a new
        # group's first assignment; both arms run without it.
        running_kafka(extra_properties={"group.streams.initial.rebalance.delay.ms": "0"}) as kafka,
        running_gateway(kafka.bootstrap, **{"group-streams-heartbeat-interval-ms": "500"}) as gateway,
    ):
        arms = {"kafka": kafka.bootstrap, "gateway": gateway.bootstrap}
        for rep in range(args.reps):
            # Alternate which arm goes first, so that neither always runs after the other's teardown.
            order = list(arms.items()) if rep % 2 == 0 else list(reversed(arms.items()))
            for arm, bootstrap in order:
                start, joined, scale = one_run(arm, bootstrap, rep, Path(tmp))
                results[arm].append((start, joined, scale))
                print(
                    f"rep {rep} {arm:8s} start {start:6.2f} s   scale {scale:6.2f} s"
                    f" (joined {joined:5.2f} s, then settled in {scale - joined:5.2f} s)",
                    flush=True,
                )
    for arm, runs in results.items():
        figures = {
            "start": [s for s, _, _ in runs],
            "scale": [s for _, _, s in runs],
            "joined": [j for _, j, _ in runs],
            "settled": [s - j for _, j, s in runs],
        }
        print(
            f"{arm:8s} "
            + "   ".join(
                f"{name} median {statistics.median(v):5.2f} s ({min(v):.2f}-{max(v):.2f})"
                for name, v in figures.items()
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
