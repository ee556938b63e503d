"""Lag per topic (`groups describe --lag-per-topic`) and the HTTP API's lag view, without a server."""

from __future__ import annotations

from coordinator.cli.admin.client import TP
from coordinator.cli.admin.groups_cmd import OffsetLine
from coordinator.cli.admin.lag_summary import TopicLag, lag_per_topic
from coordinator.cli.admin.lag_time import GroupTime, PartitionTime, _from_view, seconds_cell


def _line(
    topic: str, partition: int, current: int | None, end: int | None, seconds: float | None = None
) -> OffsetLine:
    line = OffsetLine(TP(topic, partition), current, end, None, end)
    line.lag_seconds = seconds
    return line


def test_lag_is_summed_per_topic_and_unknown_when_a_partition_is_unknown() -> None:
    lines = [
        _line("orders", 0, 10, 15, 2.5),
        _line("orders", 1, 20, 20, 0.0),
        _line("audit", 0, 3, None),
        _line("audit", 1, 1, 4, 9.0),
        _line("new", 0, None, 8),  # assigned, nothing committed: no lag, as kafka-consumer-groups
    ]
    assert lag_per_topic(lines) == [
        TopicLag("audit", 2, None, 1, 9.0),
        TopicLag("new", 1, None, 1, None),
        TopicLag("orders", 2, 5, 0, 2.5),
    ]
    assert lag_per_topic([]) == []


def test_the_http_view_becomes_times_per_partition() -> None:
    view = {
        "lag": {"group_id": "g", "status": "STALL", "total_lag": 7, "max_lag_seconds": 31.25},
        "lag_unavailable_reason": None,
        "offsets": [
            {"topic": "t", "partition": 0, "lag_seconds": 31.25, "status": "STALL"},
            {"topic": "t", "partition": 1, "lag_seconds": None, "status": None},  # not sampled yet
        ],
    }
    assert _from_view(view) == GroupTime("STALL", 31.25, {TP("t", 0): PartitionTime(31.25, "STALL")})
    standalone = _from_view({"lag": None, "lag_unavailable_reason": "runs standalone", "offsets": []})
    assert standalone == GroupTime(unavailable="runs standalone")
    assert seconds_cell(None) is None and seconds_cell(0.04) == "0.0" and seconds_cell(12.345) == "12.3"
