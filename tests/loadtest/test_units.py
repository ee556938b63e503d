"""Fast checks of the load test's pieces (no Spark, no server)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.member import decode_assignment, encode_assignment, encode_subscription, range_assign
from loadtest.scenario import Scenario, local_slots
from protocol.messages.consumer_protocol import decode_consumer_protocol_subscription_v0

REPO = Path(__file__).resolve().parents[2]


def _scenario(**overrides: object) -> Scenario:
    base: dict[str, object] = dict(
        run_id="r1", target="a", bootstrap="127.0.0.1:9092", tasks=2, members=10, groups=3,
        topic_names=("t0", "t1"), partitions=8, duration_s=5.0, ramp_up_s=1.0,
        heartbeat_interval_ms=1000, commit_interval_ms=2000, session_timeout_ms=10000,
        rebalance_timeout_ms=20000, request_timeout_ms=5000, churn_rate=0.0, kill_rate=0.0,
        restart_delay_s=1.0, static_share=0.0, versions={11: 9, 14: 5},
    )  # fmt: skip
    base.update(overrides)
    return Scenario(**base)  # type: ignore[arg-type]


def test_range_assign_matches_kafka_range_assignor() -> None:
    plan = range_assign(["m-c", "m-a", "m-b"], 8)
    assert plan == {"m-a": [0, 1, 2], "m-b": [3, 4, 5], "m-c": [6, 7]}
    assert range_assign(["x", "y"], 1) == {"x": [0], "y": []}
    assert range_assign([], 4) == {}


def test_assignment_and_subscription_carry_a_version_prefix() -> None:
    data = encode_assignment("orders", [3, 4])
    assert data[:2] == b"\x00\x00"
    assert decode_assignment(data, "orders") == [3, 4]
    assert decode_assignment(encode_assignment("orders", []), "orders") == []
    assert decode_assignment(b"", "orders") == []
    subscription = encode_subscription("orders")
    decoded, end = decode_consumer_protocol_subscription_v0(subscription, 2)
    assert decoded.topics == ["orders"] and end == len(subscription)


def test_scenario_round_trips_and_spreads_members() -> None:
    sc = _scenario(static_share=0.25)
    assert Scenario.from_dict(sc.to_dict()) == sc
    groups = {sc.group_of_slot(t, s) for t in range(2) for s in range(10)}
    assert groups == {0, 1, 2}
    assert sc.group_of_slot(1, 0) == 10 % 3  # groups span tasks
    assert sum(sc.is_static_slot(t, s) for t in range(2) for s in range(10)) == 5
    assert sc.group_name(0).startswith("loadtest-r1-")
    assert sc.topic_of_group(3) == "t1"


def test_local_slots() -> None:
    assert local_slots("local") == 1
    assert local_slots("local[3]") == 3
    assert local_slots("local[2,1]") == 2
    assert local_slots("spark://h:7077") is None
    with pytest.raises(ValueError, match="retries"):
        local_slots("local[2,3]")


def test_local_master_refuses_a_non_loopback_target(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadtest",
            "--bootstrap",
            "10.1.2.3:9092",
            "--master",
            "local[1]",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "not a loopback address" in result.stderr
