"""The pipeline mode against a real broker, Tansu: records produced at a rate and consumed by
classic groups (Tansu coordinates them), and by KIP-848 groups of our coordinator with Tansu
holding the records (--data-bootstrap)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from loadtest.admin import prepare_target
from loadtest.pipeline import decode_value, encode_value, record_id
from loadtest.scenario import CONSUMED_OP, PRODUCED_OP, Scenario, new_run_id
from loadtest.task import run_task
from tests.loadtest.test_loadtest import JAVA_MISSING, REPO, SPARK_MISSING
from tests.support.server import running_server

pytestmark = pytest.mark.integration


def test_record_values_carry_their_id_and_produce_time() -> None:
    value = encode_value(3, 41, 1_700_000_000_123.5, 100)
    assert len(value) == 100
    assert decode_value(value) == (record_id(3, 41), 1_700_000_000_123.5)
    assert decode_value(b"other") is None and decode_value(None) is None
    assert decode_value(b"XXXX" + value[4:]) is None


def test_classic_groups_lose_no_record_when_members_are_killed(tansu: str) -> None:
    run_id = new_run_id()
    topics = (f"loadtest-{run_id}-t0",)
    target = prepare_target(tansu, list(topics), 4, True, f"loadtest-{run_id}-probe", pipeline=True)
    assert target.data_broker == tansu
    scenario = Scenario(
        run_id=run_id, target="tansu", bootstrap=tansu, tasks=1, members=6, groups=2, topic_names=topics,
        partitions=4, duration_s=22.0, ramp_up_s=0.5, heartbeat_interval_ms=500, commit_interval_ms=500,
        session_timeout_ms=6000, rebalance_timeout_ms=10000, request_timeout_ms=5000, churn_rate=0.0,
        kill_rate=0.3, restart_delay_s=0.5, static_share=0.0, versions=target.versions, produce_rate=100,
        drain_s=11, data_broker=target.data_broker,
    )  # fmt: skip
    rows = run_task(scenario, 0)
    codes = Counter((row[4], row[7]) for row in rows)
    assert codes[("kill", 0)] >= 1, codes
    assert not {k: v for k, v in codes.items() if k[0] in ("produce", "fetch") and k[1] != 0}, codes
    produced = {row[9] for row in rows if row[4] == PRODUCED_OP}
    assert 900 <= len(produced) <= 1100, len(produced)  # 100/s for 11 s
    for group in (scenario.group_name(0), scenario.group_name(1)):
        consumed = Counter(row[9] for row in rows if row[4] == CONSUMED_OP and row[3] == group)
        assert produced <= set(consumed), f"{group} lost {len(produced - set(consumed))} records"
        latencies = [row[6] for row in rows if row[4] == CONSUMED_OP and row[3] == group]
        assert all(latency >= 0 for latency in latencies)


@pytest.mark.skipif(SPARK_MISSING, reason="pyspark is not installed (pip install -e '.[loadtest]')")
@pytest.mark.skipif(JAVA_MISSING, reason="no java on PATH (Debian: openjdk-17-jre-headless)")
def test_kip848_groups_of_our_coordinator_consume_records_held_by_tansu(tansu: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    server = {"group-consumer-heartbeat-interval-ms": "500", "group-consumer-session-timeout-ms": "6000"}
    with running_server("memory://", server) as srv:
        result = subprocess.run(
            [sys.executable, "-m", "loadtest", "--bootstrap", srv.bootstrap, "--data-bootstrap", tansu,
             "--label", "ours", "--master", "local[2]", "--tasks", "2", "--members", "12", "--groups", "2",
             "--partitions", "4", "--duration", "16", "--ramp-up", "1", "--commit-interval-ms", "500",
             "--group-protocol", "consumer", "--kill-rate", "0.2", "--restart-delay", "0.5",
             "--produce-rate", "50", "--drain", "8", "--progress-interval", "5", "--strict", "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=200,
        )  # fmt: skip
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    pipeline = summary["pipeline"]
    assert pipeline["lost"] == 0 and pipeline["final_lag"] == 0, pipeline
    assert 700 <= pipeline["acknowledged"] <= 900, pipeline  # 2 tasks x 50/s for 8 s
    assert pipeline["consumed"] == pipeline["consumed_unique"] + pipeline["duplicated"]
    assert pipeline["consumed_unique"] == pipeline["acknowledged"] * 2  # each group read every record
    assert pipeline["end_to_end_ms"]["p50"] is not None and pipeline["lag_by_second"]
    assert summary["reconciliation"]["double_ownership"] == 0
    ops = summary["operations"]
    assert ops["produce"]["errors"] == 0 and ops["fetch"]["errors"] == 0, ops
    assert "records:" in result.stdout and "lost 0" in result.stdout
    page = (out / "report.html").read_text()
    assert "<h3>Pipeline (records produced" in page
