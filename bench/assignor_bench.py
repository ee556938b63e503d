"""Server-side assignor micro-benchmark (coordinator/assignors.py), pure CPU, no event loop.

The assignors run on the event loop on every group-epoch change; the target is 1,000 members x
10 topics x 1,000 partitions (10k partitions) in under ~100 ms for uniform with homogeneous
subscriptions. Prints the median (and min-max) of several rounds per scenario:

* fresh: a new group, nobody holds anything;
* steady: re-run on the assignor's own output (the common case: an epoch bump that changes
  nothing for the assignment);
* join / leave: one member joins / leaves a settled group;
* heterogeneous: each member subscribes to 5 of the 10 topics (seeded), overlapping.

    .venv/bin/python bench/assignor_bench.py [--rounds 7] [--members 1000] [--topics 10] [--partitions 1000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coordinator.core.consumer.assignors import ASSIGNORS, Assignment, AssignmentMember, Assignor

Members = dict[str, AssignmentMember]


def group(
    n: int, subs: Callable[[int], frozenset[str]], current: Mapping[str, Assignment] | None = None
) -> Members:
    current = current or {}
    return {
        f"member-{i:05d}": AssignmentMember(
            member_id=f"member-{i:05d}",
            instance_id=None,
            rack_id=None,
            subscribed_topics=subs(i),
            current=current.get(f"member-{i:05d}", {}),
        )
        for i in range(n)
    }


def settle(members: Members, result: Mapping[str, Assignment]) -> Members:
    return {
        mid: AssignmentMember(mid, m.instance_id, m.rack_id, m.subscribed_topics, result.get(mid, {}))
        for mid, m in members.items()
    }


def timed(rounds: int, run: Callable[[], object]) -> list[float]:
    run()  # warm-up
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        samples.append(time.perf_counter() - started)
    return samples


def report(label: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(f"  {label:<34} median {statistics.median(ms):8.1f} ms   (min {min(ms):7.1f}, max {max(ms):7.1f})")


def scenarios(assignor: Assignor, members: Members, topics: dict[str, int], rounds: int) -> None:
    report("fresh", timed(rounds, lambda: assignor.assign(members, topics)))
    result = assignor.assign(members, topics)
    sizes = [sum(len(p) for p in a.values()) for a in result.values()]
    print(f"  {'(partitions per member)':<34} min {min(sizes)}, max {max(sizes)}")
    settled = settle(members, result)
    report("steady (re-run on own output)", timed(rounds, lambda: assignor.assign(settled, topics)))
    first = next(iter(members.values()))
    joined = dict(settled)
    joined["member-new"] = AssignmentMember("member-new", None, None, first.subscribed_topics, {})
    report("one member joins", timed(rounds, lambda: assignor.assign(joined, topics)))
    left = dict(settled)
    del left[next(iter(left))]
    report("one member leaves", timed(rounds, lambda: assignor.assign(left, topics)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1000)
    args = parser.parse_args()

    topics = {f"topic-{t:02d}": args.partitions for t in range(args.topics)}
    names = sorted(topics)
    everything = frozenset(names)
    rng = random.Random(848)
    half = [frozenset(rng.sample(names, max(1, len(names) // 2))) for _ in range(args.members)]

    print(
        f"{args.members} members x {args.topics} topics x {args.partitions} partitions "
        f"({args.topics * args.partitions} partitions), median of {args.rounds} rounds"
    )
    for name in ("uniform", "range"):
        assignor = ASSIGNORS[name]
        print(f"{name}, homogeneous:")
        scenarios(assignor, group(args.members, lambda _: everything), topics, args.rounds)
        print(f"{name}, heterogeneous (each member {len(names) // 2} random topics):")
        scenarios(assignor, group(args.members, lambda i: half[i]), topics, args.rounds)


if __name__ == "__main__":
    main()
