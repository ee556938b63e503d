"""`coordinator groups history` with real clients: a SIGKILLed kafka-python member, a KIP-848
confluent-kafka group gaining a member, and a member changing its subscription."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.clients import (
    CONFLUENT,
    KAFKA_PYTHON,
    SESSION_TIMEOUT_MS,
    TOPIC,
    Worker,
    create_topic,
    pool,
    wait_until,
)
from tests.support.ports import free_port
from tests.support.server import ServerProcess, running_server

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerProcess, str]]:
    port = free_port()
    settings = {
        "metrics-port": str(port),
        "group-consumer-heartbeat-interval-ms": "500",
        "group-consumer-session-timeout-ms": "6000",
    }
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", settings) as proc:
        create_topic(proc.bootstrap, TOPIC)
        yield proc, f"127.0.0.1:{port}"


def history(http: str, group: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "groups", "history", group, "--http", http, *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )


def events(http: str, group: str) -> list[dict[str, Any]]:
    result = history(http, group, "--format", "json")
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["events"]
    return found


def test_sigkilled_kafka_python_member_shows_its_session_timeout(server: tuple[ServerProcess, str]) -> None:
    proc, http = server
    with pool(KAFKA_PYTHON, proc.bootstrap, "crash", TOPIC) as workers:
        survivor, victim = workers.spawn("survivor"), workers.spawn("victim")
        workers.wait_split([survivor, victim])
        victim_id = victim.member_id
        assert victim_id is not None
        victim.kill()
        wait_until(
            lambda: any(e["kind"] == "session_timeout" for e in events(http, "crash")),
            timeout=SESSION_TIMEOUT_MS / 1000 + 15,
            interval=0.5,
            what="the session timeout event",
        )
    table = history(http, "crash")
    assert table.returncode == 0, table.stderr
    assert f"session timeout of member {victim_id}" in table.stdout
    timeline = events(http, "crash")
    timeout = next(e for e in timeline if e["kind"] == "session_timeout")
    started = next(e for e in timeline if e["seq"] > timeout["seq"] and e["kind"] == "rebalance_started")
    assert started["details"]["reason"] == "session_timeout"
    assert f"session timeout of member {victim_id}" in started["message"]
    since = history(http, "crash", "--since", "PT10M")
    assert since.returncode == 0 and f"session timeout of member {victim_id}" in since.stdout


def test_kip848_group_gaining_a_member_shows_the_epoch_bump_and_its_reason(
    server: tuple[ServerProcess, str],
) -> None:
    proc, http = server
    first = Worker(CONFLUENT, proc.bootstrap, "kip848", TOPIC, "first", protocol="consumer")
    second: Worker | None = None
    try:
        first.wait_event("assigned")
        second = Worker(CONFLUENT, proc.bootstrap, "kip848", TOPIC, "second", protocol="consumer")
        second.wait_event("assigned")

        def bump_for_second() -> dict[str, Any] | None:
            timeline = events(http, "kip848")
            joined = next(
                (e for e in timeline if e["kind"] == "member_joined" and "(client second)" in e["message"]),
                None,
            )
            if joined is None:
                return None
            return next(
                (
                    e
                    for e in timeline
                    if e["seq"] > joined["seq"]
                    and e["kind"] == "epoch_bumped"
                    and e["message"].endswith(f"(reason: member {joined['member_id']} joined)")
                ),
                None,
            )

        bump = wait_until(bump_for_second, interval=0.3, what="the epoch bump of the second member")
        assert bump["details"]["reason"] == "member_joined"
        assert bump["generation"] == 2 and bump["protocol"] == "consumer"
        assert bump["message"].startswith("group epoch bumped to 2 (reason: member ")
        assert str(second.member_id) in bump["message"]
        kinds = [e["kind"] for e in events(http, "kip848")]
        assert kinds.count("member_joined") == 2 and "target_computed" in kinds
        reconciled = wait_until(
            lambda: [
                e
                for e in events(http, "kip848")
                if e["kind"] == "assignment_reconciled" and e["generation"] >= 2
            ],
            interval=0.3,
            what="the reconciliation of epoch 2",
        )
        assert reconciled[0]["details"]["members"] == 2
    finally:
        first.kill()
        if second is not None:
            second.kill()


def test_subscription_change_is_the_reason_of_the_rebalance(server: tuple[ServerProcess, str]) -> None:
    from kafka import KafkaConsumer

    proc, http = server
    create_topic(proc.bootstrap, "audit", 2)
    consumer = KafkaConsumer(
        bootstrap_servers=proc.bootstrap,
        group_id="resubscribe",
        client_id="resubscriber",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=1000,
        enable_auto_commit=False,
    )
    try:
        consumer.subscribe([TOPIC])
        wait_until(
            lambda: consumer.poll(100) is not None and consumer.assignment(), what="the first assignment"
        )
        member_id = consumer._coordinator.group_metadata().member_id
        consumer.subscribe([TOPIC, "audit"])
        wait_until(
            lambda: (
                consumer.poll(100) is not None and any(tp.topic == "audit" for tp in consumer.assignment())
            ),
            what="the new assignment",
        )
    finally:
        consumer.close()
    timeline = events(http, "resubscribe")
    changed = next(e for e in timeline if e["kind"] == "subscription_changed")
    assert changed["member_id"] == member_id
    started = next(e for e in timeline if e["seq"] > changed["seq"] and e["kind"] == "rebalance_started")
    assert started["details"]["reason"] == "subscription_changed"
    assert time.time() * 1000 - started["time_ms"] < 60_000
