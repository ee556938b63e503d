"""Lag in records and seconds, and the Burrow-style status rules, with explicit sample times."""

from __future__ import annotations

import pytest

from coordinator.core.lag_status import ERR, OK, STALL, STOP, WARNING, LagTracker, LogEndTable

MINUTE = 60_000


def test_lag_seconds_interpolates_the_log_end_offsets_advance() -> None:
    table = LogEndTable()
    table.add(0, 100)
    table.add(10_000, 200)  # 10 records per second
    table.add(20_000, 400)  # 20 records per second
    assert table.lag_seconds(400, 20_000) == 0.0
    assert table.lag_seconds(150, 20_000) == pytest.approx(15.0)  # reached 150 at t=5 s
    assert table.lag_seconds(300, 20_000) == pytest.approx(5.0)  # reached 300 at t=15 s
    # Older than the table: extrapolated at the table's average rate (300 records in 20 s).
    assert table.lag_seconds(40, 20_000) == pytest.approx(24.0)


def test_lag_seconds_uses_the_first_time_a_log_end_was_seen() -> None:
    table = LogEndTable()
    table.add(0, 100)
    table.add(1_000, 110)
    table.add(60_000, 110)  # nothing produced for a minute: the point keeps its first time
    assert table.lag_seconds(100, 60_000) == pytest.approx(60.0)
    assert table.lag_seconds(105, 60_000) == pytest.approx(59.5)


def test_lag_seconds_is_unknown_from_one_point_and_restarts_after_truncation() -> None:
    table = LogEndTable()
    table.add(0, 100)
    assert table.lag_seconds(50, 1_000) is None
    table.add(1_000, 200)
    table.add(2_000, 10)  # recreated topic
    assert list(table.points) == [(10, 2_000)]
    with pytest.raises(ValueError, match="at least 2"):
        LogEndTable(1)


def test_idle_consumer_with_zero_lag_is_ok() -> None:
    tracker = LagTracker(window_ms=10 * MINUTE)
    for minute in range(20):
        tracker.observe("idle", "t", 0, minute * MINUTE, 500, 500, commit_time_ms=0)
    status = tracker.status("idle")
    assert status is not None
    assert status.status == OK and status.total_lag == 0
    assert status.max_lag_seconds == 0.0


def test_consumer_that_stops_committing_is_stop() -> None:
    tracker = LagTracker(window_ms=5 * MINUTE)
    committed = 0
    for minute in range(12):
        now = minute * MINUTE
        if minute <= 3:  # the consumer keeps up, then dies
            committed = minute * 600
            last_commit = now
        tracker.observe("g", "t", 0, now, committed, minute * 600, commit_time_ms=last_commit)
        if minute == 3:
            assert tracker.status("g") is not None
            assert tracker.status("g").status == OK  # type: ignore[union-attr]
    status = tracker.status("g")
    assert status is not None
    assert status.status == STOP
    assert status.total_lag == 11 * 600 - 3 * 600
    # Its last committed record (1800) was produced at minute 3: 8 minutes ago.
    assert status.max_lag_seconds == pytest.approx(8 * 60.0)


def test_consumer_that_commits_the_same_offset_is_stall() -> None:
    tracker = LagTracker(window_ms=5 * MINUTE)
    for minute in range(6):
        now = minute * MINUTE
        tracker.observe("g", "t", 0, now, 1_000, 1_000 + minute * 100, commit_time_ms=now)
    partition = tracker.partition("g", "t", 0)
    assert partition is not None
    assert partition.status == STALL and partition.lag == 500


def test_consumer_falling_behind_slowly_is_warning_and_recovering_is_ok() -> None:
    tracker = LagTracker(window_ms=10 * MINUTE)
    for minute in range(10):
        now = minute * MINUTE
        # Produced: 100 records a minute; consumed: 90.
        tracker.observe("slow", "t", 0, now, minute * 90, minute * 100, commit_time_ms=now)
    assert tracker.status("slow").status == WARNING  # type: ignore[union-attr]
    tracker.observe("slow", "t", 0, 10 * MINUTE, 995, 1_000, commit_time_ms=10 * MINUTE)
    assert tracker.status("slow").status == OK  # type: ignore[union-attr]


def test_offsets_past_the_log_end_or_going_back_are_err() -> None:
    tracker = LagTracker()
    tracker.observe("past", "t", 0, 0, 200, 100)
    assert tracker.status("past").status == ERR  # type: ignore[union-attr]
    tracker.observe("back", "t", 1, 0, 50, 100)
    tracker.observe("back", "t", 1, MINUTE, 40, 100)
    assert tracker.status("back").status == ERR  # type: ignore[union-attr]


def test_group_status_is_its_worst_partition_and_samples_leave_the_window() -> None:
    tracker = LagTracker(window_ms=2 * MINUTE)
    for minute in range(5):
        now = minute * MINUTE
        tracker.observe("g", "t", 0, now, minute * 10, minute * 10, commit_time_ms=now)
        tracker.observe("g", "t", 1, now, 7, 7 + minute, commit_time_ms=now)
    status = tracker.status("g")
    assert status is not None
    assert [p.status for p in status.partitions] == [OK, STALL]
    assert status.status == STALL
    assert status.to_json()["total_lag"] == 4
    assert tracker.status("unknown") is None
    tracker.forget_group("g")
    assert tracker.status("g") is None
    assert tracker.groups() == []
