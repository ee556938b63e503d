"""SIGKILL the coordinator under a commit load: no acknowledged commit may be lost (issue 4).

Per iteration: nine committers (one connection each; simple-consumer commits, generation -1,
increasing offsets; six commit one partition per request, one pipelines four requests, two
commit 100 partitions per request) run against the server; once every committer has had a
commit acknowledged, the server is SIGKILLed after a random delay (seeded: the seed is printed,
DURABILITY_SEED replays it) and restarted on the same storage. Every key is read back with OffsetFetch: the
stored offset is >= the last acknowledged one and was actually sent, and a 100-partition commit
is never torn. Iterations share the storage, so the final read-back also checks that no crash
damaged what earlier iterations stored.

Also run with SQLite synchronous=NORMAL (process-crash safe by design) and with SIGTERM (a
graceful stop under load must exit cleanly and keep the same guarantee).

Repetitions: DURABILITY_REPEATS (SQLite, default 10); DURABILITY_PG_REPEATS (PostgreSQL, default
half of it), DURABILITY_NORMAL_REPEATS and DURABILITY_SIGTERM_REPEATS (default a third); the
count is part of the test id.
"""

from __future__ import annotations

import math
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.durability.support import (
    Committer,
    CommitterSpec,
    Servers,
    base_seed,
    check_read_back,
    create_topics,
    env_int,
    fetch_stored,
    keys_of,
    start_committers,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SQLITE_REPEATS = env_int("DURABILITY_REPEATS", 10)
PG_REPEATS = env_int("DURABILITY_PG_REPEATS", max(1, math.ceil(SQLITE_REPEATS / 2)))
SIGTERM_REPEATS = env_int("DURABILITY_SIGTERM_REPEATS", max(1, math.ceil(SQLITE_REPEATS / 3)))
NORMAL_REPEATS = env_int("DURABILITY_NORMAL_REPEATS", max(1, math.ceil(SQLITE_REPEATS / 3)))

TOPICS = {"crash": 60, "bulk": 100}
MAX_KILL_DELAY_S = 1.0


def committer_specs(iteration: int) -> list[CommitterSpec]:
    singles = [
        CommitterSpec(f"single{k}", f"it{iteration}-single", "crash", tuple(range(k, 60, 6)))
        for k in range(6)
    ]
    pipelined = CommitterSpec("pipelined", f"it{iteration}-pipe", "crash", tuple(range(10)), pipeline=4)
    bulk = [
        CommitterSpec(f"bulk{k}", f"it{iteration}-bulk{k}", "bulk", tuple(range(100)), bulk=True)
        for k in range(2)
    ]
    return [*singles, pipelined, *bulk]


def run_crash_iterations(
    coordinators: Servers,
    storage: str,
    repeats: int,
    extra: dict[str, str] | None = None,
    sig: signal.Signals = signal.SIGKILL,
) -> None:
    seed = base_seed()
    print(f"\n{sig.name} test on {storage.split(':', 1)[0]}: seed {seed} (DURABILITY_SEED={seed} replays it)")
    rng = random.Random(seed)
    server = coordinators.start(storage, extra)
    create_topics(server.bootstrap, TOPICS)
    everything: list[Committer] = []
    totals = {
        "requests acked": 0,
        "partition commits acked": 0,
        "keys checked": 0,
        "unanswered at the stop": 0,
    }
    landed_unacked = 0
    for iteration in range(repeats):
        context = f"seed {seed}, iteration {iteration}"
        stop = threading.Event()
        committers = start_committers(server.bootstrap, committer_specs(iteration), stop, max_seconds=60)
        try:
            # Every committer is under way (a thread not started yet would miss the kill).
            wait_for(lambda cs=committers: all(c.acked for c in cs), 20, f"every committer acked ({context})")
            delay = rng.uniform(0.0, MAX_KILL_DELAY_S)
            time.sleep(delay)
            returncode = server.stop(sig)  # by PID
        finally:
            stop.set()
            for c in committers:
                c.join()
        crashed = [f"{c.spec.name}: {c.crashed}" for c in committers if c.crashed]
        assert not crashed, f"{context}: committer failed: {crashed}"
        if sig == signal.SIGTERM:
            assert returncode == 0 and "coordinator stopped" in server.log_text(), server.log_text()

        server = coordinators.start(storage, extra)  # same storage, after the crash
        stored = fetch_stored(server.bootstrap, keys_of(committers))
        result = check_read_back(committers, stored)
        acked = sum(c.requests_acked for c in committers)
        assert not result.problems, (
            f"{context} ({sig.name} {delay:.3f}s after every committer's first ack, {acked} requests acked): "
            f"{len(result.problems)} problems: {result.problems[:20]}"
        )
        in_flight = sum(c.unanswered for c in committers)
        landed = sum(1 for c in committers for k, v in c.acked.items() if stored[k] > v)
        landed_unacked += landed
        totals["requests acked"] += acked
        totals["partition commits acked"] += sum(c.partitions_acked for c in committers)
        totals["keys checked"] += result.keys_checked
        totals["unanswered at the stop"] += in_flight
        print(
            f"  iteration {iteration}: {sig.name} {delay:.3f}s after every committer's first ack; {acked} requests "
            f"acked, {in_flight} unanswered at the stop, {result.acked_keys} acked keys checked, "
            f"{landed} keys newer than their last ack (landed, reply lost)"
        )
        everything.extend(committers)

    # Later crashes did not damage what earlier iterations stored.
    final = check_read_back(everything, fetch_stored(server.bootstrap, keys_of(everything)))
    assert not final.problems, f"seed {seed}, final read-back: {final.problems[:20]}"
    server.stop()
    print(f"  total over {repeats} iterations: {totals}, {landed_unacked} landed-unacked keys")


@pytest.mark.parametrize("repeats", [SQLITE_REPEATS], ids=[f"sqlite-x{SQLITE_REPEATS}"])
def test_sigkill_loses_no_acknowledged_commit(coordinators: Servers, tmp_path: Path, repeats: int) -> None:
    run_crash_iterations(coordinators, f"sqlite:///{tmp_path / 'crash.db'}", repeats)


@pytest.mark.parametrize("repeats", [NORMAL_REPEATS], ids=[f"sqlite-normal-x{NORMAL_REPEATS}"])
def test_sigkill_loses_no_acknowledged_commit_with_synchronous_normal(
    coordinators: Servers, tmp_path: Path, repeats: int
) -> None:
    """synchronous=NORMAL gives up power-loss durability, not process-crash durability."""
    extra = {"sqlite-synchronous": "NORMAL"}
    run_crash_iterations(coordinators, f"sqlite:///{tmp_path / 'crash.db'}", repeats, extra)


@pytest.mark.parametrize("repeats", [SIGTERM_REPEATS], ids=[f"sqlite-x{SIGTERM_REPEATS}"])
def test_sigterm_under_load_loses_no_acknowledged_commit(
    coordinators: Servers, tmp_path: Path, repeats: int
) -> None:
    """A graceful stop in the middle of the load: the same guarantee, and a clean exit."""
    run_crash_iterations(coordinators, f"sqlite:///{tmp_path / 'crash.db'}", repeats, sig=signal.SIGTERM)


@pytest.mark.postgres
@pytest.mark.parametrize("repeats", [PG_REPEATS], ids=[f"postgres-x{PG_REPEATS}"])
def test_sigkill_loses_no_acknowledged_commit_postgres(
    coordinators: Servers, pg_url: str, repeats: int
) -> None:
    run_crash_iterations(coordinators, pg_url, repeats)
