"""Fast checks of the load test's pieces (no Spark, no server)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadtest.member import decode_assignment, encode_assignment, encode_subscription, range_assign
from loadtest.scenario import Scenario, local_slots, registered_slots
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
    sc = _scenario(static_share=0.25, members=20)
    assert Scenario.from_dict(sc.to_dict()) == sc
    groups = {sc.group_of_slot(t, s) for t in range(2) for s in range(sc.members_of(t))}
    assert groups == {0, 1, 2}
    assert sc.group_of_slot(1, 0) == 10 % 3  # groups span tasks
    assert sum(sc.is_static_slot(t, s) for t in range(2) for s in range(sc.members_of(t))) == 5
    assert sc.group_name(0).startswith("loadtest-r1-")
    assert sc.topic_of_group(3) == "t1"


def test_members_is_the_total_split_over_the_tasks() -> None:
    sc = _scenario(tasks=3, members=500)
    assert [sc.members_of(t) for t in range(3)] == [167, 167, 166]  # README: --members 500 runs 500
    assert [sc.first_member(t) for t in range(3)] == [0, 167, 334]
    # Every member of the run has its own index: groups and static slots are spread over them all.
    indexes = [sc.first_member(t) + s for t in range(3) for s in range(sc.members_of(t))]
    assert indexes == list(range(500))


def test_loadtest_refuses_fewer_members_than_tasks(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "loadtest", "--bootstrap", "127.0.0.1:9", "--master", "local[2]",
         "--tasks", "2", "--members", "1", "--out", str(tmp_path / "r")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and "--members 1 is fewer than the 2 tasks" in result.stderr, result


class _Backend:
    def __init__(self, cores: int) -> None:
        self.cores = cores

    def totalCoreCount(self) -> int:  # Spark's name, through py4j
        return self.cores


class _Context:
    """What registered_slots reads of a SparkContext on a cluster master."""

    def __init__(self, cores: int | None, default_parallelism: int) -> None:
        self.defaultParallelism = default_parallelism
        backend = _Backend(cores) if cores is not None else object()
        self._jsc = SimpleNamespace(sc=lambda: SimpleNamespace(schedulerBackend=lambda: backend))


def test_slots_are_the_registered_executor_cores_not_default_parallelism() -> None:
    one_core_worker = SimpleNamespace(sparkContext=_Context(cores=1, default_parallelism=2))
    assert registered_slots(one_core_worker, "spark://127.0.0.1:7077") == 1
    no_core_count = SimpleNamespace(sparkContext=_Context(cores=None, default_parallelism=4))
    assert registered_slots(no_core_count, "spark://127.0.0.1:7077") == 4
    assert registered_slots(one_core_worker, "local[3]") == 3


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


class _Rows:
    """The part of TaskRuntime a GroupTracker uses."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, str, float, float, int, int]] = []
        self.notes: list[str] = []

    def record_row(
        self, number: int, group: str, op: str, start: float, end: float, code: int, gen: int
    ) -> None:
        self.rows.append((number, group, op, start, end, code, gen))

    def note(self, message: str, code: int) -> None:
        self.notes.append(message)

    def ops(self, op: str) -> list[tuple[float, float, int, int]]:
        return [(r[3], r[4], r[5], r[6]) for r in self.rows if r[2] == op]


class _FakeMember:
    def __init__(self, number: int) -> None:
        self.number = number
        self.generation = 0
        self.member_id = f"m{number}"
        self.converged_at: float | None = None

    def converged(self, now: float) -> None:
        self.converged_at = self.converged_at if self.converged_at is not None else now


def test_tracker_measures_reconciliation_per_group_epoch() -> None:
    from loadtest.consumer import GroupTracker
    from loadtest.scenario import INSTANT, NOT_CONVERGED, SUPERSEDED

    rt = _Rows()
    tracker = GroupTracker(rt, "g", 4)  # type: ignore[arg-type]
    a, b = _FakeMember(1), _FakeMember(2)
    tracker.update(a, 1, frozenset({0, 1, 2, 3}), 1.0)  # a joins alone: reconciled at once
    assert rt.ops("reconciliation") == [(1.0, 1.0, INSTANT, 1)] and a.converged_at == 1.0
    assert not rt.ops("handover")
    tracker.update(b, 2, frozenset(), 2.0)  # b joins: epoch 2 starts, b waits for partitions
    tracker.update(a, 1, frozenset({0, 1}), 2.5)  # a revokes 2, 3 (still at epoch 1)
    tracker.update(a, 2, frozenset({0, 1}), 2.6)  # a acknowledges, moves to epoch 2
    assert not tracker.converged and b.converged_at is None
    tracker.update(b, 2, frozenset({2, 3}), 2.9)  # b gets the released partitions
    assert tracker.converged and b.converged_at == 2.9
    assert rt.ops("reconciliation")[-1] == (2.0, 2.9, 0, 2)
    assert rt.ops("handover")[-1] == (2.0, 2.9, 0, 2)
    # b leaves: a learns epoch 3 later; epoch 4 comes before a has b's partitions: superseded.
    tracker.remove(b, 5.0)
    tracker.update(a, 3, frozenset({0, 1}), 5.5)
    tracker.update(a, 4, frozenset({0, 1}), 5.7)
    assert rt.ops("reconciliation")[-1] == (5.5, 5.7, SUPERSEDED, 3)
    assert tracker.double_ownership == 0 and not rt.ops("double_ownership")
    tracker.finish(6.0)
    assert rt.ops("group_end") == [(6.0, 6.0, NOT_CONVERGED, 4)]
    assert "not reconciled" in rt.notes[-1]


def test_tracker_flags_two_owners_of_a_partition() -> None:
    from loadtest.consumer import GroupTracker
    from loadtest.scenario import DOUBLE_OWNERSHIP

    rt = _Rows()
    tracker = GroupTracker(rt, "g", 2)  # type: ignore[arg-type]
    a, b = _FakeMember(1), _FakeMember(2)
    tracker.update(a, 1, frozenset({0, 1}), 1.0)
    tracker.update(b, 2, frozenset({1}), 2.0)  # a still owns 1
    assert rt.ops("double_ownership") == [(2.0, 2.0, DOUBLE_OWNERSHIP, 2)]
    assert tracker.shared == 1 and not tracker.converged
    assert "took partition 1 still owned by member 1" in rt.notes[0]
    tracker.update(a, 2, frozenset({0}), 2.5)  # a gives it up: one owner each, complete
    assert tracker.shared == 0 and tracker.converged
    tracker.remove(a, 3.0)
    tracker.update(b, 3, frozenset({0, 1}), 3.5)  # a partition freed first is no double ownership
    assert len(rt.ops("double_ownership")) == 1 and tracker.converged


def test_consumer_groups_are_task_local_and_codes_depend_on_the_protocol() -> None:
    from loadtest.scenario import ABORTED, expected_codes

    sc = _scenario(group_protocol="consumer", groups=5)
    assert Scenario.from_dict(sc.to_dict()) == sc
    for task in range(2):
        groups = {sc.group_of_slot(task, s) for s in range(10)}
        assert groups == set(range(task, 5, 2))
    assert _scenario().group_of_slot(1, 0) == 5 % 3  # classic: groups still span tasks (5 per task)
    assert expected_codes(False) == {0, 79, 27, 22, ABORTED}
    assert 113 in expected_codes(False, "consumer") and 110 not in expected_codes(False, "consumer")
    assert {25, 110, 111} <= expected_codes(True, "consumer")
