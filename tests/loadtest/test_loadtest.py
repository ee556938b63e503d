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
from loadtest.scenario import RESULT_COLUMNS, Scenario, new_run_id
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
             "--master", "local[2]", "--tasks", "2", "--members", "50", "--duration", "20",
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
    assert tuple(raw.column_names) == RESULT_COLUMNS
    ops_in_raw = Counter(raw.column("op").to_pylist())
    assert ops_in_raw["heartbeat"] == ops["heartbeat"]["count"]
    assert set(raw.column("target").to_pylist()) == {"ours"}
    per_second = pq.read_table(out / "timeline.parquet").to_pydict()
    assert {"second", "op", "count", "p99_ms"} <= set(per_second)
    assert max(per_second["second"]) >= 15
