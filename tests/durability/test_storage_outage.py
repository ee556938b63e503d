"""PostgreSQL goes away under a commit load and comes back (issue 4, "Faults").

Committers (one connection each, simple-consumer commits; single-partition, pipelined and
100-partition requests) run against a coordinator on PostgreSQL. PostgreSQL is stopped
(``pg_ctl stop -m fast``; also ``-m immediate`` = a crash, and "hang": the postmaster and the
coordinator's backend are SIGSTOPped, so nothing answers and only the store's timeouts help,
then SIGCONTinued): within a bounded time every committer
gets retriable per-partition errors (COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR, nothing
else), answered promptly, while the coordinator stays up and keeps serving reads. PostgreSQL is
started again: commits succeed again on the same coordinator process. Nothing acknowledged is
lost (read back from the running server, then again after a restart, i.e. from PostgreSQL), and
the incident is logged once, not once per failed write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time

import asyncpg
import pytest

from tests.durability.support import (
    NONE,
    REQUEST_TIMED_OUT,
    RETRIABLE_COMMIT_ERRORS,
    Committer,
    CommitterSpec,
    Servers,
    check_read_back,
    commit,
    create_topics,
    fetch_stored,
    keys_of,
    start_committers,
    wait_for,
)
from tests.storage.pg_server import PgServer
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.timeout(180)]

FAILED_LINE = "storage write failed"  # coordinator/runtime.py, once per incident
RECOVERED_LINE = "storage writes succeed again"
ERRORS_WITHIN_S = 15  # every committer sees a retriable error this soon after the stop (or freeze)
RECOVERS_WITHIN_S = 30  # every committer succeeds again this soon after the start
DOWN_FOR_S = 2.0
# PostgresStore's command_timeout and connect_timeout (5 s each): a batch that hangs fails after
# one, the next batch's connection attempt after the other.
HANG_ANSWER_WITHIN_S = 12


class Outage:
    """Takes PostgreSQL away and brings it back; "hang" freezes it by PID instead of stopping it."""

    def __init__(self, pg: PgServer, mode: str) -> None:
        self.pg = pg
        self.mode = mode
        self.frozen: list[int] = []

    def begin(self) -> None:
        if self.mode != "hang":
            self.pg.stop(self.mode)
            return
        backends = asyncio.run(_coordinator_backends(self.pg))
        assert backends, "the coordinator has no PostgreSQL session to freeze"
        postmaster = self.pg.pid
        assert postmaster is not None
        for pid in [postmaster, *backends]:  # the postmaster first: no new session meanwhile
            os.kill(pid, signal.SIGSTOP)
            self.frozen.append(pid)

    def end(self) -> None:
        if self.mode != "hang":
            if self.pg.pid is None:
                self.pg.start()
            return
        while self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.frozen.pop(), signal.SIGCONT)


async def _coordinator_backends(pg: PgServer) -> list[int]:
    conn = await asyncpg.connect(pg.dsn(), timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'kafka-group-coordinator'"
        )
    finally:
        await conn.close()
    return [int(r["pid"]) for r in rows]


def specs() -> list[CommitterSpec]:
    singles = [CommitterSpec(f"single{k}", "out-single", "out", tuple(range(k, 40, 4))) for k in range(4)]
    return [
        *singles,
        CommitterSpec("pipelined", "out-pipe", "out", tuple(range(8)), pipeline=4),
        CommitterSpec("bulk", "out-bulk", "out-bulk", tuple(range(100)), bulk=True),
    ]


def progress(committers: list[Committer], since: float) -> str:
    """Per committer: its outcomes since ``since`` (for failure messages)."""
    lines = []
    for c in committers:
        recent = [o for o in list(c.outcomes) if o.answered_at >= since]
        lines.append(
            f"{c.spec.name}: {len(recent)} answers since, last: "
            + ", ".join(
                f"sent {o.sent_at - since:+.2f}s took {o.answered_at - o.sent_at:.2f}s {sorted(o.codes)}"
                for o in recent[-3:]
            )
        )
    return "\n".join(lines)


def timeline(committers: list[Committer], stopped: float, started: float) -> str:
    """Slow or failed answers around the outage, relative to its start (for failure messages)."""
    lines = [f"outage ended at {started - stopped:+.2f}s"]
    lines.extend(
        f"{c.spec.name}: sent {o.sent_at - stopped:+.2f}s answered {o.answered_at - stopped:+.2f}s "
        f"(service {o.service_s:.2f}s) {sorted(o.codes)}"
        for c in committers
        for o in c.outcomes
        if o.answered_at >= stopped - 1 and (NONE not in o.codes or o.service_s > 1)
    )
    return "\n".join(lines[:80])


def failed_since(c: Committer, since: float) -> bool:
    """Has ``c`` had a request answered with errors only after ``since``?"""
    return any(o.answered_at >= since and NONE not in o.codes for o in list(c.outcomes))


def answered_since(c: Committer, since: float, ok: bool) -> bool:
    """Has ``c`` had a request sent after ``since`` answered entirely OK (``ok``) / entirely failed?"""
    return any(
        o.sent_at >= since and ((o.codes == {NONE}) if ok else (NONE not in o.codes))
        for o in list(c.outcomes)
    )


@pytest.mark.parametrize("mode", ["fast", "immediate", "hang"])
def test_postgres_outage_gives_retriable_errors_then_commits_resume(
    coordinators: Servers, durability_pg: PgServer, pg_url: str, mode: str
) -> None:
    # Reads are served from memory while the node's shard leases hold (docs/multinode.md); the
    # frozen outage outlasts the default lease, after which a node steps down from its shards.
    server = coordinators.start(pg_url, {"group-coordinator-lease-ms": "120000"})
    create_topics(server.bootstrap, {"out": 40, "out-bulk": 100})
    stop = threading.Event()
    outage = Outage(durability_pg, mode)
    committers = start_committers(server.bootstrap, specs(), stop, max_seconds=120)
    try:
        wait_for(lambda: all(c.requests_acked >= 5 for c in committers), 20, "commits flowing")

        outage.begin()
        stopped = time.monotonic()
        try:
            # Every committer gets a retriable error soon (in a hang: once the store times out) ...
            wait_for(
                lambda: all(failed_since(c, stopped) for c in committers),
                ERRORS_WITHIN_S,
                "every committer to get retriable errors",
            )
            errors_after = time.monotonic() - stopped
            # ... and so do requests sent after the outage began (not just the ones in flight).
            # (In a hang each request takes up to two store timeouts; the pipelined committer's
            # later requests queue behind its four in flight, so it is left out there.)
            wait_for(
                lambda: all(
                    answered_since(c, stopped, ok=False)
                    for c in committers
                    if mode != "hang" or c.spec.pipeline == 1
                ),
                ERRORS_WITHIN_S + (HANG_ANSWER_WITHIN_S if mode == "hang" else 0),
                "requests sent during the outage to get retriable errors",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{progress(committers, stopped)}\n{server.log_text()}") from None
        time.sleep(DOWN_FOR_S)  # keep failing for a while
        assert server.process.poll() is None, f"the coordinator died:\n{server.log_text()}"
        # Reads do not need storage: the last acknowledged offsets are served meanwhile.
        during = fetch_stored(server.bootstrap, keys_of(committers))
        assert not check_read_back(committers, during).problems

        outage.end()
        started = time.monotonic()
        wait_for(
            lambda: all(answered_since(c, started, ok=True) for c in committers),
            RECOVERS_WITHIN_S,
            "every committer to succeed again",
        )
        recovered_after = time.monotonic() - started
        time.sleep(0.5)  # and keep succeeding
    finally:
        outage.end()  # also when the test failed: PostgreSQL must not stay down or frozen
        stop.set()
        for c in committers:
            c.join()

    problems = [
        f"{c.spec.name}: {c.connection_lost or c.crashed}"
        for c in committers
        if c.connection_lost or c.crashed
    ]
    assert not problems, f"a committer lost its connection or failed: {problems}"
    assert server.process.poll() is None, "the coordinator did not survive the outage"
    codes = sum((c.error_codes for c in committers), start=type(committers[0].error_codes)())
    assert codes and set(codes) <= RETRIABLE_COMMIT_ERRORS, f"non-retriable errors: {codes}"
    failed = [o for c in committers for o in c.outcomes if NONE not in o.codes]
    slowest_failure = max(o.service_s for o in failed)
    limit = HANG_ANSWER_WITHIN_S if mode == "hang" else 5
    assert slowest_failure < limit, (
        f"the server took {slowest_failure:.1f}s to answer a failing commit\n"
        f"{timeline(committers, stopped, started)}\n{server.log_text()}"
    )

    # Nothing acknowledged is lost: in the running server, then in PostgreSQL after a restart.
    keys = keys_of(committers)
    live = check_read_back(committers, fetch_stored(server.bootstrap, keys))
    assert not live.problems, live.problems[:20]
    log = server.log_text()
    incident_lines = [line for line in log.splitlines() if FAILED_LINE in line]
    assert len(incident_lines) == 1, f"the incident was logged {len(incident_lines)} times:\n{log}"
    assert log.count(RECOVERED_LINE) == 1, log
    warnings = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
    assert len(warnings) <= 5, f"{len(warnings)} warning/error lines for one incident:\n{log}"

    server = coordinators.restart(server)
    durable = check_read_back(committers, fetch_stored(server.bootstrap, keys))
    assert not durable.problems, durable.problems[:20]
    server.stop()
    acked = sum(c.requests_acked for c in committers)
    print(
        f"\n{mode}: retriable errors everywhere {errors_after:.2f}s after the stop, commits everywhere "
        f"{recovered_after:.2f}s after the start; {acked} requests acked, {len(failed)} failed "
        f"({dict(codes)}), slowest failure (server time) {slowest_failure:.2f}s; {len(warnings)} warning/error lines:\n  "
        + "\n  ".join(warnings)
    )


def test_commit_is_answered_within_offsets_commit_timeout_during_a_hang(
    coordinators: Servers, durability_pg: PgServer, pg_url: str
) -> None:
    """offsets.commit.timeout.ms bounds the wait for a durable commit; on
    timeout Kafka answers REQUEST_TIMED_OUT (the Scala coordinator, which we follow:
    docs/groups.md#write-errors) or COORDINATOR_NOT_AVAILABLE (the Java one)."""
    timeout_s = 1.0
    server = coordinators.start(pg_url, {"offsets-commit-timeout-ms": str(int(timeout_s * 1000))})
    create_topics(server.bootstrap, {"out": 1})
    outage = Outage(durability_pg, "hang")
    with WireClient(server.bootstrap, "hang-probe", timeout=30) as client:
        assert commit(client, "hang-g", {("out", 0): 1}) == {("out", 0): NONE}
        outage.begin()
        try:
            sent = time.monotonic()
            errors = commit(client, "hang-g", {("out", 0): 2})
            took = time.monotonic() - sent
        finally:
            outage.end()
        assert errors[("out", 0)] in {REQUEST_TIMED_OUT, *RETRIABLE_COMMIT_ERRORS}, errors
        assert took < timeout_s + 1.5, (
            f"answered after {took:.1f}s with offsets.commit.timeout.ms={timeout_s:.0f}s"
        )
    server.stop()
