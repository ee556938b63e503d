"""`coordinator loadtest --master spark://…` on a Spark standalone cluster: one master and two
one-core workers on loopback, started from the pyspark package's own launcher classes."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from loadtest.scenario import Scenario
from tests.loadtest.test_loadtest import JAVA_MISSING, PERCENTILE_ORDER, REPO, SPARK_MISSING
from tests.support.browser import browser_missing, image_stats, render
from tests.support.phased_run import Phase, run_in_phases
from tests.support.server import running_server

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(SPARK_MISSING, reason="pyspark is not installed (pip install -e '.[loadtest]')"),
    pytest.mark.skipif(JAVA_MISSING, reason="no java on PATH (Debian: openjdk-17-jre-headless)"),
]


TASKS = 2
DURATION_S = 8
# How long a Spark step that starts JVMs or runs a job may take: the driver starting and
# registering with the master, the workers launching the executors, or the summary's jobs. Seconds
# on an idle machine, a minute or more with a load average of 20-30 on two cores.
SPARK_STEP_S = 120.0
# The cluster's own start (spark_cluster waits up to 60 s for its workers), the server's, the stops.
CLUSTER_START_S = 60.0 + 60.0


def load_phases(out: Path) -> list[Phase]:
    """Where `loadtest --master spark://…` is: the driver's session up, every task running on an
    executor, the load done (its raw rows written), the summary and report written."""
    raw_written = out / "raw.parquet" / "_SUCCESS"
    # A task ends by itself at the latest this long after it starts (loadtest.task.run_task).
    stop_timeout_s = next(f.default for f in dataclasses.fields(Scenario) if f.name == "stop_timeout_s")
    task_limit_s = DURATION_S + float(stop_timeout_s) + 30  # type: ignore[arg-type]
    return [
        Phase("the driver's Spark session starting", SPARK_STEP_S, lambda o: " ready in " in o.stderr),
        Phase(
            "the executors starting the tasks",
            SPARK_STEP_S,
            lambda o: f"tasks {TASKS}/{TASKS}" in o.stderr or raw_written.exists(),
        ),
        Phase("the tasks running the load", task_limit_s + SPARK_STEP_S, lambda _o: raw_written.exists()),
        Phase("the summary and report", SPARK_STEP_S),
    ]


@pytest.mark.timeout(CLUSTER_START_S + sum(phase.bound_s for phase in load_phases(Path())))
def test_load_runs_on_both_workers_of_a_standalone_cluster(tmp_path: Path) -> None:
    from tests.support.spark_cluster import spark_standalone

    out = tmp_path / "report"
    started = time.monotonic()
    with running_server("memory://") as srv, spark_standalone(tmp_path / "cluster", workers=2) as cluster:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_HOSTNAME": "localhost"}
        result = run_in_phases(
            [sys.executable, "-m", "loadtest", "--bootstrap", srv.bootstrap, "--label", "ours",
             "--master", cluster.master_url, "--driver-host", "127.0.0.1", "--tasks", str(TASKS),
             "--spark-conf", "spark.executor.memory=512m", "--spark-conf", "spark.executor.cores=1",
             "--members", "40", "--groups", "4", "--partitions", "8", "--duration", str(DURATION_S),
             "--ramp-up", "1", "--heartbeat-interval-ms", "500", "--commit-interval-ms", "1000",
             "--session-timeout-ms", "10000", "--rebalance-timeout-ms", "15000", "--progress-interval", "5",
             "--strict", "--out", str(out)],
            load_phases(out),
            cwd=REPO,
            env=env,
        )  # fmt: skip
        assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}\n{cluster.logs()}"
    elapsed = time.monotonic() - started

    summary = json.loads((out / "summary.json").read_text())
    assert summary["members"] == {
        "started": 40, "joined": 40, "not_joined": 0, "aborted_before_join": 0, "killed": 0, "churned": 0,
    }  # fmt: skip
    assert summary["requests"]["unexpected_errors"] == 0, summary["requests"]
    for op, stats in [("join", summary["join"]), *summary["operations"].items()]:
        values = [stats[name] for name in PERCENTILE_ORDER]
        assert all(v is not None for v in values) and values == sorted(values), (op, stats)
    assert summary["operations"]["leave_group"]["count"] == 40
    rebalances = summary["rebalances"]
    assert rebalances["generations"] >= 4
    assert len(rebalances["by_group"]) == 4
    assert sum(g["generations"] for g in rebalances["by_group"]) == rebalances["generations"]
    assert all(r["start_s"] >= 0 for r in rebalances["by_generation"])
    for name in ("raw.parquet", "timeline.parquet", "report.png", "report.html"):
        assert (out / name).exists(), name

    import pyarrow.parquet as pq

    raw = pq.read_table(out / "raw.parquet", columns=["task", "executor"]).to_pydict()
    executor_of_task = dict(Counter(zip(raw["task"], raw["executor"], strict=True)))
    assert {task for task, _ in executor_of_task} == {0, 1}
    executors = {executor for _, executor in executor_of_task}
    assert len(executors) == 2 and "driver" not in executors, executor_of_task  # one per worker
    placed = {(p["task"], p["executor"]) for p in summary["placement"]}
    assert placed == set(executor_of_task)
    # Each one-core worker ran one executor: its work dir holds APP_ID/EXECUTOR_ID.
    ran = {d.name for w in ("worker-0", "worker-1") for d in (tmp_path / "cluster" / w).glob("app-*/*")}
    assert ran == executors, (ran, executors)
    assert "tasks ran on 2 executor(s)" in result.stdout
    if browser_missing() is None:
        rendered = render(out / "report.html")
        assert rendered.images and rendered.images[0][0] > 1000
        assert image_stats(rendered.png)[2] > 200  # distinct colours: not a blank page
    print(f"cluster run: {elapsed:.1f} s")
