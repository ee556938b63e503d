"""KIP-848 vs classic: how fast 10 members starting together settle, and absorb an 11th member.

Measured on demand (not a pytest test); prints one line per repetition and a summary.

    .venv/bin/python bench/kip848_join.py                      # 5 interleaved repetitions, 60 and 110 partitions,
                                                               # heartbeat 500 ms, then the protocols' defaults
    .venv/bin/python bench/kip848_join.py --reps 3 --partitions 60 --default-reps 0 --json /tmp/k.json

Arms (each repetition uses a fresh group id; one server process per arm and settings, loopback):

* ``kip848``: 11 ``confluent_kafka.Consumer`` with ``group.protocol=consumer`` (the server's
  uniform assignor); the heartbeat interval and session timeout are the server's
  ``--group-consumer-heartbeat-interval-ms`` / ``--group-consumer-session-timeout-ms``.
* ``classic``: ``group.protocol=classic``, ``partition.assignment.strategy=range`` (eager: every
  member revokes everything and rejoins); ``heartbeat.interval.ms`` / ``session.timeout.ms`` on
  the client, ``--group-initial-rebalance-delay-ms`` on the server (0, and 3000 as a control:
  the server applies the delay only to a group that is Empty, so it should not matter here).

Defaults section (``--default-reps``, ``--default-partitions`` 900: the 10 x 900 start shape):
KIP-848 at the server's defaults with one server per ``--group-consumer-heartbeat-policy``
(``handover``: the current default; ``unreleased``: the previous behaviour; ``kafka``), and
classic with librdkafka's defaults, eager (``range``) and ``cooperative-sticky``, interleaved rep
by rep so the arms share the machine's load; the ratios printed are against the first arm.

    .venv/bin/python bench/kip848_join.py --reps 0 --default-reps 20 --classic-default-reps 6 \
        --quiet-intervals 1 --start-spread-ms 300

One repetition: start 10 members at once (``--start-spread-ms``: at random offsets within that
window, like separate processes started together); record when every partition is first owned
exactly once ("start: all owned") and when the split is first even ("start: even"); wait until
stable (each owns ⌊P/10⌋ or ⌈P/10⌉, together all P partitions once, and no callback for ``quiet``
= ``--quiet-intervals`` (2) heartbeat intervals + 0.5 s); sleep a
random part of a heartbeat interval (so the join lands at a random phase of the heartbeats);
t0 = just before the 11th member's thread creates its consumer. Every consumer is polled by its
own thread (``poll(0.05)``; librdkafka wakes the poll when the rebalance op arrives and the GIL is
released while waiting) and its on_assign / on_revoke / on_lost callbacks append
``time.monotonic()`` stamps to one lock-protected log, so the log's order is the time order. The
owned sets are replayed from the log: with KIP-848 librdkafka's callbacks are incremental (assign
adds, revoke removes), with classic eager they are full sets (revoke everything, then assign the
new set); the replay checks this for every callback and, once the group is quiet again, compares
the replayed set with ``consumer.assignment()`` (called in the consumer's own thread:
confluent-kafka blocks a call from another thread while one thread is in ``poll``).

Per repetition:

* absorbed: t0 → first moment all 11 own ⌊P/11⌋ or ⌈P/11⌉ each and together all P exactly once;
* first: t0 → the 11th member's first non-empty assignment;
* stw: sum over the 10 old members of the time they owned nothing (stop-the-world member-seconds),
  and the longest single gap;
* unowned: integral of the number of partitions nobody owned, t0 → absorbed (partition-seconds);
* moved: partitions whose owner at absorption differs from the owner at t0 (for range this depends
  on where the 11th member's id sorts; client ids start with a random tag); revoked: partitions
  revoked from old members after t0 (eager: all P);
* overlap: the largest number of partitions owned by two members at once (must be 0), and
  callbacks after absorption (should be 0).

The result is dominated by heartbeat intervals: an old member learns of the new member from its
next heartbeat (classic: REBALANCE_IN_PROGRESS, then JoinGroup/SyncGroup; KIP-848: the new target
in the heartbeat response), and with KIP-848 the new member receives revoked partitions only on
its own heartbeat after the old owners acknowledged the revocation.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.clients import create_topic
from tests.support.server import ServerProcess, start_server

OLD_MEMBERS = 10
POLL_S = 0.05
SETUP_TIMEOUT_S = 120.0
ABSORB_TIMEOUT_S = 120.0


# --------------------------------------------------------------------------------------------
# Event log and members


@dataclass(frozen=True)
class Event:
    t: float
    member: int
    kind: str  # assign | revoke | lost
    partitions: frozenset[int]


class EventLog:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[Event] = []
        self.problems: list[str] = []  # client errors and warnings

    def add(self, member: int, kind: str, partitions: Iterable[int]) -> None:
        with self.lock:  # stamp inside the lock: list order is time order
            self.events.append(Event(time.monotonic(), member, kind, frozenset(partitions)))

    def problem(self, member: int, text: str) -> None:
        with self.lock:
            self.problems.append(f"{time.monotonic():.3f} m{member}: {text}")

    def snapshot(self) -> list[Event]:
        with self.lock:
            return list(self.events)


class _ProblemHandler(logging.Handler):
    def __init__(self, log: EventLog, member: int) -> None:
        super().__init__(logging.WARNING)
        self.log, self.member = log, member

    def emit(self, record: logging.LogRecord) -> None:
        self.log.problem(self.member, f"librdkafka {record.levelname}: {record.getMessage()}")


class Member(threading.Thread):
    """One consumer, created, polled and closed in its own thread."""

    def __init__(self, index: int, settings: dict[str, Any], topic: str, log: EventLog) -> None:
        super().__init__(name=f"member-{index}", daemon=True)
        self.index, self.settings, self.topic, self.log = index, settings, topic, log
        self.stop_flag = threading.Event()
        self.check_request = threading.Event()
        self.check_done = threading.Event()
        self.checked: frozenset[int] | None = None
        self.member_id = ""
        self.failure: str | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer

        logger = logging.getLogger(f"kip848_join.m{self.index}.{id(self)}")
        logger.propagate = False
        logger.addHandler(_ProblemHandler(self.log, self.index))
        settings = {
            **self.settings,
            "logger": logger,
            "error_cb": lambda err: self.log.problem(self.index, f"error_cb: {err}"),
        }
        try:
            consumer = Consumer(settings)
        except Exception as exc:
            self.failure = f"Consumer(): {exc!r}"
            return
        i, log = self.index, self.log
        consumer.subscribe(
            [self.topic],
            on_assign=lambda c, ps: log.add(i, "assign", (tp.partition for tp in ps)),
            on_revoke=lambda c, ps: log.add(i, "revoke", (tp.partition for tp in ps)),
            on_lost=lambda c, ps: log.add(i, "lost", (tp.partition for tp in ps)),
        )
        try:
            while not self.stop_flag.is_set():
                message = consumer.poll(POLL_S)
                if message is not None and message.error():
                    log.problem(i, f"poll: {message.error()}")
                if self.check_request.is_set():
                    self.check_request.clear()
                    self.checked = frozenset(tp.partition for tp in consumer.assignment())
                    self.member_id = consumer.memberid() or ""
                    self.check_done.set()
        except Exception as exc:
            self.failure = f"poll: {exc!r}"
        finally:
            consumer.close()

    def check(self, timeout: float = 10.0) -> frozenset[int] | None:
        self.check_done.clear()
        self.check_request.set()
        return self.checked if self.check_done.wait(timeout) else None


# --------------------------------------------------------------------------------------------
# Replaying the log


@dataclass
class Replay:
    eager: bool
    owned: dict[int, set[int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)  # callbacks that contradict the protocol's semantics
    max_overlap: int = 0
    lost: int = 0

    def apply(self, ev: Event) -> None:
        cur = self.owned.setdefault(ev.member, set())
        if ev.kind == "assign":
            if self.eager:
                if cur:
                    self.violations.append(f"m{ev.member}: eager assign while owning {sorted(cur)}")
                cur.clear()
            elif cur & ev.partitions:
                self.violations.append(f"m{ev.member}: assign of owned {sorted(cur & ev.partitions)}")
            cur |= ev.partitions
        else:
            if ev.kind == "lost":
                self.lost += 1
            if self.eager and ev.kind == "revoke" and ev.partitions != cur:
                self.violations.append(
                    f"m{ev.member}: eager revoke {sorted(ev.partitions)} != owned {sorted(cur)}"
                )
            elif not ev.partitions <= cur:
                self.violations.append(f"m{ev.member}: {ev.kind} of unowned {sorted(ev.partitions - cur)}")
            cur -= ev.partitions
        total = sum(len(s) for s in self.owned.values())
        self.max_overlap = max(self.max_overlap, total - len(self.union()))

    def union(self) -> set[int]:
        return set().union(*self.owned.values()) if self.owned else set()

    def balanced(self, members: int, partitions: int) -> bool:
        lo, hi = partitions // members, -(-partitions // members)
        counts = [len(self.owned.get(m, ())) for m in range(members)]
        return (
            all(lo <= c <= hi for c in counts)
            and sum(counts) == partitions
            and len(self.union()) == partitions
        )

    def owner_map(self) -> dict[int, int]:
        return {p: m for m, ps in self.owned.items() for p in ps}


def replay(events: Iterable[Event], eager: bool) -> Replay:
    r = Replay(eager)
    for ev in events:
        r.apply(ev)
    return r


# --------------------------------------------------------------------------------------------
# One repetition


@dataclass(frozen=True)
class Arm:
    name: str  # kip848 | classic | kip848-<policy> | classic-eager | classic-coop ...
    server: ServerProcess
    heartbeat_ms: int
    session_ms: int
    client_overrides: dict[str, Any]  # classic client timing (empty: the client's defaults)
    protocol: str = ""  # consumer | classic (empty: from the name)
    strategy: str = "range"  # classic assignment strategy

    @property
    def consumer_protocol(self) -> bool:
        return self.protocol == "consumer" or (not self.protocol and self.name.startswith("kip848"))

    @property
    def eager(self) -> bool:
        return not self.consumer_protocol and self.strategy != "cooperative-sticky"

    def settings(self, group: str, index: int) -> dict[str, Any]:
        common = {
            "bootstrap.servers": self.server.bootstrap,
            "broker.address.family": "v4",
            "group.id": group,
            # A random prefix: the range assignor orders members by member id (client.id-uuid),
            # so the 11th member lands at a random position, as it would in practice.
            "client.id": f"{random.randrange(1 << 32):08x}-m{index}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if self.consumer_protocol:
            return {**common, "group.protocol": "consumer"}
        return {
            **common,
            "group.protocol": "classic",
            "partition.assignment.strategy": self.strategy,
            **self.client_overrides,
        }


@dataclass
class Result:
    arm: str
    label: str
    partitions: int
    rep: int
    group: str
    ok: bool = False
    error: str = ""
    setup_s: float = 0.0
    # The start of the 10 members: start → every partition owned once; → the even split.
    start_covered_s: float = 0.0
    start_even_s: float = 0.0
    phase_s: float = 0.0
    absorbed_s: float = 0.0
    first_s: float = 0.0
    stw_sum_s: float = 0.0
    stw_max_s: float = 0.0
    unowned_ps: float = 0.0
    moved: int = 0
    revoked: int = 0
    callbacks: int = 0
    after_absorbed: int = 0
    max_overlap: int = 0
    lost: int = 0
    violations: list[str] = field(default_factory=list)
    check_mismatches: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    member_ids: list[str] = field(default_factory=list)
    shares: list[int] = field(default_factory=list)
    timeline: list[tuple[float, int, str, list[int]]] = field(default_factory=list)  # after t0, s since t0


def wait_quiet_balanced(log: EventLog, eager: bool, members: int, partitions: int, quiet_s: float,
                        timeout_s: float, since: float) -> bool:  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = log.snapshot()
        last = events[-1].t if events else since
        if time.monotonic() - max(last, since) >= quiet_s and replay(events, eager).balanced(
            members, partitions
        ):
            return True
        time.sleep(0.02)
    return False


def analyse(result: Result, events: list[Event], t0: float, eager: bool, partitions: int) -> None:
    before = [ev for ev in events if ev.t < t0]
    after = [ev for ev in events if ev.t >= t0]
    state = replay(before, eager)
    owners_t0 = state.owner_map()
    empty_since: dict[int, float] = {}
    gaps: dict[int, float] = dict.fromkeys(range(OLD_MEMBERS), 0.0)
    unowned, last_t = 0.0, t0
    absorbed_at: float | None = None
    for ev in after:
        if absorbed_at is None:
            unowned += (partitions - len(state.union())) * (ev.t - last_t)
            last_t = ev.t
        state.apply(ev)
        if ev.member == OLD_MEMBERS and ev.kind == "assign" and ev.partitions and not result.first_s:
            result.first_s = ev.t - t0
        if ev.member < OLD_MEMBERS and ev.kind == "revoke":
            result.revoked += len(ev.partitions)
        if ev.member < OLD_MEMBERS:
            if not state.owned[ev.member] and ev.member not in empty_since:
                empty_since[ev.member] = ev.t
            elif state.owned[ev.member] and ev.member in empty_since:
                gaps[ev.member] += ev.t - empty_since.pop(ev.member)
        if absorbed_at is None and state.balanced(OLD_MEMBERS + 1, partitions):
            absorbed_at = ev.t
            result.absorbed_s = ev.t - t0
            owners = state.owner_map()
            result.moved = sum(1 for p in range(partitions) if owners.get(p) != owners_t0.get(p))
            result.shares = [len(state.owned.get(m, ())) for m in range(OLD_MEMBERS + 1)]
        elif absorbed_at is not None:
            result.after_absorbed += 1
    result.callbacks = len(after)
    result.timeline = [(round(ev.t - t0, 4), ev.member, ev.kind, sorted(ev.partitions)) for ev in after]
    result.stw_sum_s = sum(gaps.values())
    result.stw_max_s = max(gaps.values())
    result.unowned_ps = unowned
    result.max_overlap = state.max_overlap
    result.lost = state.lost
    result.violations = state.violations
    result.ok = absorbed_at is not None and not result.error


def start_figures(result: Result, events: list[Event], started: float, eager: bool, partitions: int) -> None:
    state = Replay(eager)
    for ev in events:
        state.apply(ev)
        covered = len(state.union()) == partitions and sum(len(s) for s in state.owned.values()) == partitions
        if covered and not result.start_covered_s:
            result.start_covered_s = ev.t - started
        if state.balanced(OLD_MEMBERS, partitions):
            result.start_even_s = ev.t - started
            return


def run_rep(
    arm: Arm,
    label: str,
    topic: str,
    partitions: int,
    rep: int,
    quiet_intervals: float = 2,
    start_spread_s: float = 0.0,
) -> Result:
    group = f"{label}-{arm.name}-p{partitions}-r{rep}-{random.randrange(1 << 30):08x}"
    result = Result(arm.name, label, partitions, rep, group)
    log = EventLog()
    quiet_s = quiet_intervals * arm.heartbeat_ms / 1000 + 0.5
    members = [Member(i, arm.settings(group, i), topic, log) for i in range(OLD_MEMBERS)]
    started = time.monotonic()
    try:
        # Separate processes started "at once" come up over a few hundred ms: start the 10 at
        # random offsets in [0, start_spread_s] (in start order).
        offsets = sorted(random.uniform(0, start_spread_s) for _ in members)
        for m, offset in zip(members, offsets, strict=True):
            time.sleep(max(0.0, started + offset - time.monotonic()))
            m.start()
        if not wait_quiet_balanced(
            log, arm.eager, OLD_MEMBERS, partitions, quiet_s, SETUP_TIMEOUT_S, started
        ):
            result.error = "10 members did not become stable"
            return result
        result.setup_s = time.monotonic() - started
        start_figures(result, log.snapshot(), started, arm.eager, partitions)
        result.phase_s = random.uniform(0, arm.heartbeat_ms / 1000)
        time.sleep(result.phase_s)
        newcomer = Member(OLD_MEMBERS, arm.settings(group, OLD_MEMBERS), topic, log)
        members.append(newcomer)
        t0 = time.monotonic()
        newcomer.start()
        if not wait_quiet_balanced(
            log, arm.eager, OLD_MEMBERS + 1, partitions, quiet_s, ABSORB_TIMEOUT_S, t0
        ):
            result.error = "11 members did not become stable"
        events = log.snapshot()
        analyse(result, events, t0, arm.eager, partitions)
        final = replay(events, arm.eager)
        for m in members:
            seen = m.check()
            if seen != frozenset(final.owned.get(m.index, ())):
                result.check_mismatches.append(
                    f"m{m.index}: assignment() {sorted(seen) if seen is not None else 'timeout'}"
                    f" != replayed {sorted(final.owned.get(m.index, ()))}"
                )
        result.member_ids = [m.member_id for m in members]
        return result
    finally:
        for m in members:
            m.stop_flag.set()
        for m in members:
            m.join(30)
            if m.failure:
                result.error += f" m{m.index} {m.failure}"
        result.problems = list(log.problems)
        if not result.ok and not result.error:
            result.error = "not absorbed"


# --------------------------------------------------------------------------------------------
# Summary


def ms(x: float) -> str:
    return f"{x * 1000:,.0f}"


def describe(samples: list[float]) -> str:
    if not samples:
        return "n/a"
    return f"{ms(statistics.median(samples))} ({ms(min(samples))}-{ms(max(samples))})"


def rep_line(r: Result) -> str:
    if not r.ok:
        return f"  {r.label:8} {r.arm:15} P={r.partitions:<3} rep {r.rep}: FAILED {r.error}"
    flags = []
    if r.max_overlap:
        flags.append(f"OVERLAP {r.max_overlap}")
    if r.after_absorbed:
        flags.append(f"{r.after_absorbed} callbacks after absorption")
    if r.violations:
        flags.append(f"{len(r.violations)} semantic violations")
    if r.check_mismatches:
        flags.append(f"{len(r.check_mismatches)} assignment() mismatches")
    if r.lost:
        flags.append(f"{r.lost} lost")
    if r.problems:
        flags.append(f"{len(r.problems)} client problems")
    return (
        f"  {r.label:8} {r.arm:15} P={r.partitions:<3} rep {r.rep}: absorbed {ms(r.absorbed_s):>6} ms"
        f"  first {ms(r.first_s):>6} ms  stw sum {ms(r.stw_sum_s):>6} ms (max {ms(r.stw_max_s):>5})"
        f"  unowned {r.unowned_ps:6.2f} p·s  moved {r.moved:3d}  revoked {r.revoked:3d}"
        f"  start: covered {ms(r.start_covered_s):>6} ms even {ms(r.start_even_s):>6} ms"
        f"  setup {r.setup_s:5.1f} s  phase {ms(r.phase_s):>5} ms  {'; '.join(flags)}"
    )


def summarise(results: list[Result]) -> str:
    lines = [
        "| settings | P | arm | n | start: all owned ms | start: even ms | absorbed ms "
        "| 11th's first partition ms | stop-the-world member-ms (sum of 10) "
        "| longest gap ms | unowned partition·s | moved | revoked |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted(
        {(r.label, r.partitions, r.arm) for r in results}, key=lambda k: (k[0] != "fast", k[1], k[2])
    )
    for label, p, arm in keys:
        rs = [r for r in results if (r.label, r.partitions, r.arm) == (label, p, arm) and r.ok]
        n_all = sum(1 for r in results if (r.label, r.partitions, r.arm) == (label, p, arm))
        if not rs:
            lines.append(f"| {label} | {p} | {arm} | 0/{n_all} |" + " n/a |" * 9)
            continue
        unowned = [r.unowned_ps for r in rs]
        moved = [r.moved for r in rs]
        lines.append(
            f"| {label} | {p} | {arm} | {len(rs)}/{n_all} | {describe([r.start_covered_s for r in rs])} "
            f"| {describe([r.start_even_s for r in rs])} | {describe([r.absorbed_s for r in rs])} "
            f"| {describe([r.first_s for r in rs])} | {describe([r.stw_sum_s for r in rs])} "
            f"| {describe([r.stw_max_s for r in rs])} "
            f"| {statistics.median(unowned):.2f} ({min(unowned):.2f}-{max(unowned):.2f}) "
            f"| {statistics.median(moved):g} ({min(moved)}-{max(moved)}) "
            f"| {statistics.median([r.revoked for r in rs]):g} |"
        )
    lines.append("")
    # Ratios against the first arm of each settings and size (interleaved, so measured side by side).
    for label, p in sorted({(k[0], k[1]) for k in keys}, key=lambda k: (k[0] != "fast", k[1])):
        arms = list(dict.fromkeys(r.arm for r in results if (r.label, r.partitions) == (label, p)))
        base = [r for r in results if (r.label, r.partitions, r.arm, r.ok) == (label, p, arms[0], True)]
        for other in arms[1:]:
            rs = [r for r in results if (r.label, r.partitions, r.arm, r.ok) == (label, p, other, True)]
            if not base or not rs:
                continue
            for figure in ("start_even_s", "absorbed_s"):
                mb = statistics.median(getattr(r, figure) for r in base)
                mo = statistics.median(getattr(r, figure) for r in rs)
                if not mo:
                    continue
                pairs = [
                    f"{getattr(b, figure) / getattr(o, figure):.2f}"
                    for b, o in zip(base, rs, strict=False)
                    if getattr(o, figure)
                ]
                lines.append(
                    f"{label}, P={p}, {figure[:-2]}: median {arms[0]} / median {other} = {mb / mo:.2f}"
                    f"  (per interleaved pair: {', '.join(pairs)})"
                )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Main


def bad_server_lines(server: ServerProcess) -> list[str]:
    keys = ("WARNING", "ERROR", "CRITICAL", "Traceback", "Exception")
    return [line.rstrip() for line in server.log_lines if any(k in line for k in keys)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions per arm (fast settings)")
    parser.add_argument("--partitions", default="60,110", help="comma-separated partition counts")
    parser.add_argument("--heartbeat-ms", type=int, default=500, help="heartbeat interval of both protocols")
    parser.add_argument("--session-ms", type=int, default=45000, help="session timeout of both protocols")
    parser.add_argument("--delay-control-reps", type=int, default=3,
                        help="classic with initial delay 3000 (first partition count), 0 = skip")  # fmt: skip
    parser.add_argument("--default-reps", type=int, default=3,
                        help="repetitions with both protocols' defaults (first partition count), 0 = skip")  # fmt: skip
    parser.add_argument("--default-partitions", type=int, default=900,
                        help="partition count of the defaults section (10 x 900: the issue's start shape)")  # fmt: skip
    parser.add_argument("--default-arms", default="handover,unreleased,eager,cooperative",
                        help="defaults section arms: KIP-848 with the server's heartbeat policy handover, "
                        "unreleased or kafka; classic eager (range) or cooperative (cooperative-sticky)")  # fmt: skip
    parser.add_argument("--classic-default-reps", type=int, default=None,
                        help="repetitions of the classic arms in the defaults section (default: --default-reps)")  # fmt: skip
    parser.add_argument("--quiet-intervals", type=float, default=2,
                        help="stable = no callback for this many heartbeat intervals + 0.5 s")  # fmt: skip
    parser.add_argument("--start-spread-ms", type=float, default=0,
                        help="start the 10 members at random offsets within this many ms")  # fmt: skip
    parser.add_argument("--json", help="write every raw figure and the server logs here")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    sizes = [int(p) for p in args.partitions.split(",")] if args.reps else []
    default_arms = [a.strip() for a in args.default_arms.split(",") if a.strip()]
    unknown = [
        a for a in default_arms if a not in ("handover", "unreleased", "kafka", "eager", "cooperative")
    ]
    if unknown:
        parser.error(f"unknown --default-arms: {', '.join(unknown)}")
    classic_default_reps = (
        args.default_reps if args.classic_default_reps is None else args.classic_default_reps
    )
    hb, session = args.heartbeat_ms, args.session_ms
    from confluent_kafka import libversion, version

    print(
        f"confluent-kafka {version()[0]}, librdkafka {libversion()[0]}; loadavg {os.getloadavg()}", flush=True
    )
    results: list[Result] = []
    servers: dict[str, ServerProcess] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:

        def server(name: str, extra: dict[str, str], topic_sizes: list[int] | None = None) -> ServerProcess:
            s = start_server(f"sqlite:///{Path(tmp) / name}.db", extra)
            servers[name] = s
            for p in sizes if topic_sizes is None else topic_sizes:
                create_topic(s.bootstrap, f"p{p}", p)
            return s

        try:
            classic_client = {"heartbeat.interval.ms": hb, "session.timeout.ms": session}
            fast = [
                Arm("kip848", server("fast-kip848", {
                    "group-consumer-heartbeat-interval-ms": str(hb),
                    "group-consumer-session-timeout-ms": str(session),
                    "group-initial-rebalance-delay-ms": "0",
                }), hb, session, {}),
                Arm("classic", server("fast-classic", {"group-initial-rebalance-delay-ms": "0"}),
                    hb, session, classic_client),
            ]  # fmt: skip
            control = (
                Arm("classic-delay3s", server("fast-classic-delay3s", {"group-initial-rebalance-delay-ms": "3000"}),
                    hb, session, classic_client)
                if args.delay_control_reps else None
            )  # fmt: skip
            print(
                f"fast settings: heartbeat {hb} ms (kip848: server --group-consumer-heartbeat-interval-ms; "
                f"classic: client heartbeat.interval.ms), session timeout {session} ms, "
                f"classic group.initial.rebalance.delay.ms 0 (control arm: 3000)",
                flush=True,
            )
            for rep in range(args.reps):
                for p in sizes:
                    arms = list(fast)
                    if control is not None and p == sizes[0] and rep < args.delay_control_reps:
                        arms.append(control)
                    for arm in arms:
                        r = run_rep(
                            arm, "fast", f"p{p}", p, rep, args.quiet_intervals, args.start_spread_ms / 1000
                        )
                        results.append(r)
                        print(rep_line(r), flush=True)
            if args.default_reps:
                dp = args.default_partitions
                defaults: list[Arm] = []
                classic_server: ServerProcess | None = None
                for name in default_arms:
                    if name in ("handover", "unreleased", "kafka"):
                        kip = server(f"default-kip848-{name}", {
                            "group-consumer-heartbeat-interval-ms": "5000",
                            "group-consumer-session-timeout-ms": "45000",
                            "group-initial-rebalance-delay-ms": "3000",
                            "group-consumer-heartbeat-policy": name,
                        }, [dp])  # fmt: skip
                        defaults.append(Arm(f"kip848-{name}", kip, 5000, 45000, {}, protocol="consumer"))
                    else:
                        if classic_server is None:
                            classic_server = server(
                                "default-classic", {"group-initial-rebalance-delay-ms": "3000"}, [dp]
                            )
                        strategy = "range" if name == "eager" else "cooperative-sticky"
                        defaults.append(
                            Arm(f"classic-{name}", classic_server, 3000, 45000, {}, "classic", strategy)
                        )
                print(
                    f"default settings, P={dp}: kip848 server heartbeat 5000 ms, session 45000 ms, heartbeat "
                    "policy per arm; classic client defaults (heartbeat.interval.ms 3000, session.timeout.ms "
                    "45000), eager = range, cooperative = cooperative-sticky; server initial delay 3000",
                    flush=True,
                )
                for rep in range(max(args.default_reps, classic_default_reps)):
                    for arm in defaults:
                        if rep >= (args.default_reps if arm.consumer_protocol else classic_default_reps):
                            continue
                        r = run_rep(
                            arm,
                            "defaults",
                            f"p{dp}",
                            dp,
                            rep,
                            args.quiet_intervals,
                            args.start_spread_ms / 1000,
                        )
                        results.append(r)
                        print(rep_line(r), flush=True)
        finally:
            for s in servers.values():
                s.stop()
    print(f"\ntotal {time.monotonic() - started:.0f} s; loadavg {os.getloadavg()}\n")
    print(summarise(results))
    anomalies = False
    for r in results:
        details = r.violations + r.check_mismatches + r.problems
        if details or r.max_overlap or not r.ok:
            anomalies = True
            print(f"\n{r.label} {r.arm} P={r.partitions} rep {r.rep} ({r.group}): {r.error}")
            for line in details[:20]:
                print(f"    {line}")
    for name, s in servers.items():
        bad = bad_server_lines(s)
        if bad:
            anomalies = True
            print(f"\nserver {name}: {len(bad)} warning/error lines, first ones:")
            for line in bad[:20]:
                print(f"    {line}")
    if not anomalies:
        print("\nno overlaps, no semantic violations, no client or server warnings")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "results": [asdict(r) for r in results],
                    "server_logs": {n: s.log_text() for n, s in servers.items()},
                },
                indent=1,
            )
        )
        print(f"raw figures: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
