"""The load test against a coordinator subprocess: the member engine alone, then the Spark job."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from loadtest.admin import prepare_target
from loadtest.scenario import RAW_COLUMNS, RESULT_COLUMNS, Scenario, new_run_id
from loadtest.task import run_task
from tests.support.server import running_server

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

SPARK_MISSING = importlib.util.find_spec("pyspark") is None
JAVA_MISSING = shutil.which("java") is None
PERCENTILE_ORDER = ("p50", "p90", "p99", "p99_9", "max")


def test_members_join_heartbeat_commit_and_leave_without_spark() -> None:
    with running_server("memory://") as srv:
        run_id = new_run_id()
        topics = (f"loadtest-{run_id}-t0",)
        target = prepare_target(srv.bootstrap, list(topics), 8, True, f"loadtest-{run_id}-probe")
        scenario = Scenario(
            run_id=run_id, target="ours", bootstrap=srv.bootstrap, tasks=1, members=12, groups=2,
            topic_names=topics, partitions=8, duration_s=4.0, ramp_up_s=0.5, heartbeat_interval_ms=300,
            commit_interval_ms=600, session_timeout_ms=6000, rebalance_timeout_ms=10000,
            request_timeout_ms=5000, churn_rate=0.0, kill_rate=0.0, restart_delay_s=0.5,
            static_share=0.25, versions=target.versions,
        )  # fmt: skip
        rows = run_task(scenario, 0)
    assert all(len(row) == len(RESULT_COLUMNS) for row in rows)
    codes = Counter((row[4], row[7]) for row in rows)
    assert codes[("join", 0)] == 12, codes
    assert codes[("leave_group", 0)] == 12, codes
    assert codes[("join_group", 79)] == 9, codes  # dynamic members only (KIP-394); 3 are static
    assert codes[("heartbeat", 0)] > 12 and codes[("offset_commit", 0)] > 0, codes
    unexpected = {k: v for k, v in codes.items() if k[1] not in (0, 79, 27, 22)}
    assert not unexpected, unexpected


@pytest.mark.skipif(SPARK_MISSING, reason="pyspark is not installed (pip install -e '.[loadtest]')")
@pytest.mark.skipif(JAVA_MISSING, reason="no java on PATH (Debian: openjdk-17-jre-headless)")
def test_spark_job_reports_two_tasks_of_fifty_members(tmp_path: Path) -> None:
    out = tmp_path / "report"
    with running_server("memory://") as srv:
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "loadtest", "--bootstrap", srv.bootstrap, "--label", "ours",
             "--master", "local[2]", "--tasks", "2", "--members", "100", "--duration", "20",
             "--ramp-up", "2", "--groups", "4", "--partitions", "16", "--heartbeat-interval-ms", "1000",
             "--commit-interval-ms", "2000", "--session-timeout-ms", "10000",
             "--rebalance-timeout-ms", "20000", "--progress-interval", "5", "--strict", "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert elapsed < 90, elapsed
    assert "[ours]" in result.stderr  # progress lines

    for name in ("raw.parquet", "timeline.parquet", "summary.json", "report.png", "report.html"):
        assert (out / name).exists(), name
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "report.html").read_text()
    assert "data:image/png;base64," in page and "<table>" in page

    summary = json.loads((out / "summary.json").read_text())
    assert summary["members"] == {
        "started": 100, "joined": 100, "not_joined": 0, "aborted_before_join": 0, "killed": 0, "churned": 0,
    }  # fmt: skip
    assert summary["requests"]["unexpected_errors"] == 0, summary["requests"]
    assert not summary["client_saturated"]
    ops = summary["operations"]
    assert ops["leave_group"]["count"] == 100 and ops["leave_group"]["errors"] == 0
    assert ops["join_group"]["errors_by_code"].get("MEMBER_ID_REQUIRED (79)") == 100
    assert ops["sync_group"]["count"] >= 100
    assert ops["heartbeat"]["count"] > 100 and ops["offset_commit"]["count"] > 0
    assert ops["heartbeat"]["rate_per_s"] > 0
    for op, stats in [("join", summary["join"]), *ops.items()]:
        values = [stats[name] for name in PERCENTILE_ORDER]
        assert all(v is not None and v >= 0 for v in values), (op, stats)
        assert values == sorted(values), (op, stats)
    assert summary["rebalances"]["generations"] >= 4
    assert len(summary["loop_lag"]["tasks"]) == 2

    import pyarrow.parquet as pq

    raw = pq.read_table(out / "raw.parquet")
    assert tuple(raw.column_names) == RAW_COLUMNS
    assert set(raw.column("executor").to_pylist()) == {"driver"}  # local mode: tasks run in the driver
    assert [p["executor"] for p in summary["placement"]] == ["driver", "driver"]
    ops_in_raw = Counter(raw.column("op").to_pylist())
    assert ops_in_raw["heartbeat"] == ops["heartbeat"]["count"]
    assert set(raw.column("target").to_pylist()) == {"ours"}
    per_second = pq.read_table(out / "timeline.parquet").to_pydict()
    assert {"second", "op", "count", "p99_ms"} <= set(per_second)
    assert max(per_second["second"]) >= 15


# KIP-848 members: the server tells them to heartbeat every 300 ms (500 ms in the Spark run).
CONSUMER_SERVER = {"group-consumer-heartbeat-interval-ms": "300", "group-consumer-session-timeout-ms": "6000"}


def test_consumer_protocol_members_without_spark() -> None:
    from loadtest.scenario import ABORTED, INSTANT, NOT_CONVERGED, SUPERSEDED

    with running_server("memory://", CONSUMER_SERVER) as srv:
        run_id = new_run_id()
        topics = (f"loadtest-{run_id}-t0",)
        target = prepare_target(srv.bootstrap, list(topics), 8, True, f"loadtest-{run_id}-probe", "consumer")
        assert target.versions[68] == 1 and target.versions[8] == 9
        scenario = Scenario(
            run_id=run_id, target="ours", bootstrap=srv.bootstrap, tasks=1, members=12, groups=2,
            topic_names=topics, partitions=8, duration_s=5.0, ramp_up_s=0.5, heartbeat_interval_ms=300,
            commit_interval_ms=400, session_timeout_ms=6000, rebalance_timeout_ms=10000,
            request_timeout_ms=5000, churn_rate=1.0, kill_rate=0.0, restart_delay_s=0.3,
            static_share=0.25, versions=target.versions, group_protocol="consumer",
        )  # fmt: skip
        rows = run_task(scenario, 0)
    codes = Counter((row[4], row[7]) for row in rows)
    churned = codes[("churn", 0)]
    assert churned >= 1, codes
    started = {row[2] for row in rows if row[2] >= 0}  # replacements get new member numbers
    assert len(started) > 12 and codes[("join", 0)] >= 12, codes
    assert Counter(row[2] for row in rows if row[4] == "join") == dict.fromkeys(started, 1)
    assert codes[("consumer_group_heartbeat", 0)] > 12 and codes[("offset_commit", 0)] > 0, codes
    assert codes[("offset_fetch", 0)] >= 1 and codes[("metadata", 0)] >= 12, codes
    joined = {row[2] for row in rows if row[4] == "consumer_group_join" and row[7] == 0}
    leaves = Counter(row[8] for row in rows if row[4] == "consumer_group_leave" and row[7] == 0)
    assert leaves[-1] + leaves[-2] == codes[("consumer_group_leave", 0)] == len(joined), leaves
    assert leaves[-2] >= 3, leaves  # the static members leave with epoch -2
    assert codes[("reconciliation", 0)] >= 2, codes  # at least one reconciled epoch per group
    assert codes[("group_end", 0)] + codes[("group_end", NOT_CONVERGED)] == 2, codes  # churn: either
    unexpected = {
        k: v for k, v in codes.items() if k[1] not in (0, ABORTED, SUPERSEDED, INSTANT, NOT_CONVERGED)
    }
    assert not unexpected, unexpected  # no double ownership (-105), no server errors


@pytest.mark.skipif(SPARK_MISSING, reason="pyspark is not installed (pip install -e '.[loadtest]')")
@pytest.mark.skipif(JAVA_MISSING, reason="no java on PATH (Debian: openjdk-17-jre-headless)")
def test_spark_job_with_consumer_protocol_members(tmp_path: Path) -> None:
    out = tmp_path / "report"
    server = {**CONSUMER_SERVER, "group-consumer-heartbeat-interval-ms": "500"}
    with running_server("memory://", server) as srv:
        result = subprocess.run(
            [sys.executable, "-m", "loadtest", "--bootstrap", srv.bootstrap, "--label", "ours",
             "--master", "local[2]", "--tasks", "2", "--members", "40", "--duration", "12",
             "--ramp-up", "2", "--groups", "4", "--partitions", "16", "--commit-interval-ms", "1000",
             "--static-share", "0.25", "--group-protocol", "consumer", "--progress-interval", "5",
             "--strict", "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "group epochs reconciled" in result.stdout and "consumer_group_heartbeat" in result.stdout

    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["group_protocol"] == "consumer"
    assert summary["members"] == {
        "started": 40, "joined": 40, "not_joined": 0, "aborted_before_join": 0, "killed": 0, "churned": 0,
    }  # fmt: skip
    assert summary["requests"]["unexpected_errors"] == 0, summary["requests"]
    ops = summary["operations"]
    assert ops["consumer_group_join"]["count"] >= 40 and ops["consumer_group_leave"]["count"] == 40
    assert ops["consumer_group_leave"]["errors"] == 0
    assert ops["consumer_group_heartbeat"]["count"] > 200 and ops["offset_commit"]["count"] > 40
    assert ops["offset_fetch"]["count"] >= 40
    assert not {"join_group", "sync_group", "heartbeat", "leave_group"} & set(ops)
    reconciliation = summary["reconciliation"]
    assert reconciliation["double_ownership"] == 0
    assert reconciliation["groups"] == 4 and reconciliation["groups_converged"] == 4, reconciliation
    assert (
        reconciliation["epochs_reconciled"]
        >= 4
        == len({r["group"] for r in summary["rebalances"]["by_generation"]})
    )
    stats = reconciliation["duration_ms"]
    assert all(stats[n] is not None for n in PERCENTILE_ORDER) and stats["p50"] <= stats["max"]
    assert "Reconciliation (KIP-848" in (out / "report.html").read_text()

    import pyarrow.parquet as pq

    raw = pq.read_table(out / "raw.parquet").to_pydict()
    tasks_of_group: dict[str, set[int]] = {}
    for task, group, op in zip(raw["task"], raw["group"], raw["op"], strict=True):
        if op == "consumer_group_heartbeat":
            tasks_of_group.setdefault(group, set()).add(task)
    assert len(tasks_of_group) == 4 and all(len(t) == 1 for t in tasks_of_group.values())  # task-local
    ends = [
        (g, c)
        for g, op, c in zip(raw["group"], raw["op"], raw["error_code"], strict=True)
        if op == "group_end"
    ]
    assert sorted(ends) == sorted((g, 0) for g in tasks_of_group)  # complete disjoint split at the end
    timeline = pq.read_table(out / "timeline.parquet").to_pydict()
    assert {"consumer_group_heartbeat", "reconciliation"} <= set(timeline["op"])
