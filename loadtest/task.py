"""One Spark task's share of the load: `members` simulated members on one asyncio loop.

`run_task` is what an executor calls. It runs for the scenario's duration (members start
spread over the ramp-up), drives churn and kills, samples the loop's lag, sends progress
datagrams to the driver, then stops every member (LeaveGroup) and returns the result rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from loadtest.consumer import ConsumerMember, GroupTracker
from loadtest.member import Member, encode_subscription
from loadtest.pipeline import Producer
from loadtest.runtime import Recorded
from loadtest.scenario import (
    GROUP_END_OP,
    HANDOVER_OP,
    LOOP_LAG_OP,
    RECONCILIATION_OP,
    REQUEST_OPS,
    ResultRow,
    Scenario,
    expected_codes,
    is_loopback_host,
)
from protocol.errors import ErrorCode

_REQUEST_OPS = frozenset(REQUEST_OPS)
_EPOCH_OPS = frozenset({RECONCILIATION_OP, HANDOVER_OP, GROUP_END_OP})
_PROGRESS_INTERVAL_S = 1.0
_NOTES_PER_CODE = 5


class TaskRuntime:
    """State shared by the members of one task."""

    def __init__(self, scenario: Scenario, task: int) -> None:
        self.scenario = scenario
        self.task = task
        self.loop = asyncio.get_running_loop()
        self.versions = scenario.versions
        self.rows: list[ResultRow] = []
        self.members: dict[int, Member] = {}
        self.stopping = False
        self.failure: BaseException | None = None
        self.requests = 0
        self.signals = 0  # REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED... (expected non-zero codes)
        self.unexpected = 0
        self.unexpected_by_code: dict[int, int] = {}
        self.lag_window_ms = 0.0
        self.kills = 0
        self.churns = 0
        self._expected = expected_codes(scenario.faults, scenario.group_protocol)
        self.trackers: dict[str, GroupTracker] = {}  # consumer mode: per group of this task
        self.notes: list[str] = []  # diagnostics (server error messages...), printed at the end
        self._notes_by_code: dict[int, int] = {}
        self._epoch_offset = time.time() - time.perf_counter()  # record() takes perf_counter times
        self._subscriptions: dict[str, bytes] = {}
        self._loopback: dict[str, bool] = {}
        self._next_number = scenario.members_of(task)
        self._stop_event = asyncio.Event()
        self._started = self.loop.time()
        self._background: set[asyncio.Task[Any]] = set()

    # called by members

    def record(self, member: Recorded, op: str, start: float, end: float, code: int, generation: int) -> None:
        self.record_row(member.number, member.group, op, start, end, code, generation)

    def record_row(
        self,
        number: int,
        group: str,
        op: str,
        start: float,
        end: float,
        code: int,
        generation: int,
        record: int = -1,
    ) -> None:
        self.rows.append(
            (
                self.scenario.target,
                self.task,
                number,
                group,
                op,
                (start + self._epoch_offset) * 1000.0,
                (end - start) * 1000.0,
                int(code),
                int(generation),
                record,
            )
        )
        if op in _REQUEST_OPS:
            self.requests += 1
        elif op in _EPOCH_OPS:
            return  # SUPERSEDED/NOT_CONVERGED describe a group, not a response: no signal
        if code:
            if code in self._expected:
                self.signals += 1
            else:
                self.unexpected += 1
                self.unexpected_by_code[code] = self.unexpected_by_code.get(code, 0) + 1

    def subscription(self, topic: str) -> bytes:
        data = self._subscriptions.get(topic)
        if data is None:
            data = self._subscriptions[topic] = encode_subscription(topic)
        return data

    def tracker(self, group: str) -> GroupTracker:
        tracker = self.trackers.get(group)
        if tracker is None:
            tracker = self.trackers[group] = GroupTracker(self, group, self.scenario.partitions)
        return tracker

    def note(self, message: str, code: int) -> None:
        """Keep a diagnostic line (at most a few per code) for the end of the task."""
        seen = self._notes_by_code.get(code, 0)
        self._notes_by_code[code] = seen + 1
        if seen < _NOTES_PER_CODE:
            self.notes.append(message)

    def loopback_ok(self, host: str) -> bool:
        ok = self._loopback.get(host)
        if ok is None:
            ok = self._loopback[host] = is_loopback_host(host)
        return ok

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self._stop_event.set()

    # the run

    async def run(self) -> list[ResultRow]:
        sc = self.scenario
        loop = self.loop
        started = self._started = loop.time()
        deadline = started + sc.duration_s
        self._spawn(self._loop_lag())
        self._spawn(self._progress())
        if sc.churn_rate > 0:
            self._spawn(self._faults("churn", sc.churn_rate))
        if sc.kill_rate > 0:
            self._spawn(self._faults("kill", sc.kill_rate))
        if sc.pipeline:
            self._spawn(Producer(self).run(started, deadline - sc.drain_s))
        self._spawn(self._ramp_up(started))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                await self._stop_event.wait()
        self.stopping = True
        now = time.perf_counter()
        for tracker in self.trackers.values():
            tracker.finish(now)
        for job in list(self._background):
            if job.get_name() != "progress":
                job.cancel()
        members = list(self.members.values())
        stops = [loop.create_task(m.stop(leave=True)) for m in members]
        if stops:
            _, pending = await asyncio.wait(stops, timeout=sc.stop_timeout_s)
            for job in pending:
                job.cancel()
            await asyncio.gather(*stops, return_exceptions=True)
        for member in members:
            member.close()
        await asyncio.sleep(0)
        for job in list(self._background):
            job.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self._send_progress(final=True)
        self._print_notes()
        if self.failure is not None:
            raise RuntimeError(f"load task {self.task} failed: {self.failure!r}") from self.failure
        return self.rows

    def _spawn(self, coro: Any) -> None:
        name = getattr(coro, "__name__", "job").lstrip("_")
        job = self.loop.create_task(coro, name=name)
        self._background.add(job)
        job.add_done_callback(self._background.discard)

    async def _ramp_up(self, started: float) -> None:
        sc = self.scenario
        count = sc.members_of(self.task)
        step = sc.ramp_up_s / count if count else 0.0
        for slot in range(count):
            if self.stopping:
                return
            delay = started + slot * step - self.loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._start_member(slot, slot)

    def _print_notes(self) -> None:
        if not self.notes:
            return
        more = sum(self._notes_by_code.values()) - len(self.notes)
        lines = [f"loadtest task {self.task}: {note}" for note in self.notes]
        if more > 0:
            lines.append(f"loadtest task {self.task}: ... and {more} more")
        print("\n".join(lines), file=sys.stderr, flush=True)

    def _start_member(self, number: int, slot: int) -> Member:
        kind = ConsumerMember if self.scenario.consumer else Member
        member = kind(self, number, slot)
        self.members[number] = member
        member.start()
        return member

    async def _faults(self, kind: str, rate: float) -> None:
        """Poisson process of member replacements: graceful (churn) or abrupt (kill)."""
        rng = random.Random(f"{self.scenario.seed}-{self.task}-{kind}")
        # Pipeline mode: faults stop with the producers, so the drain shows what the groups lost.
        until = self._started + self.scenario.duration_s - self.scenario.drain_s
        while not self.stopping:
            await asyncio.sleep(rng.expovariate(rate))
            if self.loop.time() >= until:
                return
            candidates = [m for m in self.members.values() if m.stable]
            if not candidates:
                continue
            victim = rng.choice(candidates)
            del self.members[victim.number]
            now = time.perf_counter()
            self.record(victim, kind, now, now, ErrorCode.NONE, victim.generation)
            if kind == "kill":
                self.kills += 1
                victim.kill()
                self._spawn(self._replace(victim, None))
            else:
                self.churns += 1
                self._spawn(self._replace(victim, victim.stop(leave=True, aborted=True)))

    async def _replace(self, victim: Member, leaving: Any) -> None:
        if leaving is not None:
            await leaving
        await asyncio.sleep(self.scenario.restart_delay_s)
        if not self.stopping:
            number = self._next_number
            self._next_number += 1
            self._start_member(number, victim.slot)

    async def _loop_lag(self) -> None:
        interval = self.scenario.loop_lag_interval_ms / 1000
        probe = _LagProbe(self)
        while True:
            before = time.perf_counter()
            await asyncio.sleep(interval)
            lag = max(time.perf_counter() - before - interval, 0.0)
            probe.sample(before, lag)

    async def _progress(self) -> None:
        while True:
            await self._send_progress(final=False)
            await asyncio.sleep(_PROGRESS_INTERVAL_S)

    async def _send_progress(self, final: bool) -> None:
        sc = self.scenario
        if not sc.progress_host:
            return
        members = self.members.values()
        message = {
            "target": sc.target,
            "task": self.task,
            "members": len(self.members),
            "stable": sum(1 for m in members if m.stable),
            "joined": sum(1 for m in members if m.joined_once),
            "requests": self.requests,
            "signals": self.signals,
            "unexpected": self.unexpected,
            "unexpected_by_code": {str(k): v for k, v in self.unexpected_by_code.items()},
            "lag_ms": round(self.lag_window_ms, 1),
            "kills": self.kills,
            "churns": self.churns,
            "final": final,
            "time": time.time(),
        }
        self.lag_window_ms = 0.0
        data = json.dumps(message).encode()
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(data, (sc.progress_host, sc.progress_port))


class _LagProbe:
    def __init__(self, rt: TaskRuntime) -> None:
        self.rt = rt
        self.offset = rt._epoch_offset
        self.append: Callable[[ResultRow], None] = rt.rows.append

    def sample(self, at: float, lag: float) -> None:
        rt = self.rt
        lag_ms = lag * 1000.0
        if lag_ms > rt.lag_window_ms:
            rt.lag_window_ms = lag_ms
        self.append(
            (rt.scenario.target, rt.task, -1, "", LOOP_LAG_OP, (at + self.offset) * 1000.0, lag_ms, 0, -1, -1)
        )


def run_task(scenario: Scenario | dict[str, Any], task: int) -> list[ResultRow]:
    """Run one task's members to completion on a fresh loop (uvloop when installed)."""
    sc = scenario if isinstance(scenario, Scenario) else Scenario.from_dict(scenario)

    async def main() -> list[ResultRow]:
        hard_limit = sc.duration_s + sc.stop_timeout_s + 30
        async with asyncio.timeout(hard_limit):
            return await TaskRuntime(sc, task).run()

    try:
        import uvloop
    except ImportError:
        return asyncio.run(main())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main())
