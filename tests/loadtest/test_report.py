"""The report page from a recorded run's summary and timeline (no Spark): its content, and that
it renders in headless Chromium."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import browser_missing, image_stats, render

pd = pytest.importorskip("pandas", reason="the loadtest extra is not installed")
report = pytest.importorskip("loadtest.report", reason="the loadtest extra is not installed")

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]


def _recorded() -> tuple[dict[str, Any], Any]:
    summary = json.loads((DATA / "classic_summary.json").read_text())
    return summary, pd.read_csv(DATA / "classic_timeline.csv")


def _slower_baseline(summary: dict[str, Any]) -> dict[str, Any]:
    baseline = copy.deepcopy(summary)
    baseline["run_id"] = "earlier-run"
    baseline["operations"]["heartbeat"]["p99"] = summary["operations"]["heartbeat"]["p99"] * 4
    return baseline


def _write(tmp_path: Path, baseline: dict[str, Any] | None = None) -> Path:
    summary, frame = _recorded()
    report.plot([(summary, frame)], tmp_path / "report.png")
    report.write_html(tmp_path / "report.html", tmp_path / "report.png", [summary], baseline)
    return tmp_path / "report.html"


def test_page_has_group_timeline_errors_by_code_placement_and_baseline_ratios(tmp_path: Path) -> None:
    summary, _ = _recorded()
    page = _write(tmp_path, _slower_baseline(summary)).read_text()
    assert "<h3>Per group (generations" in page
    for group in summary["rebalances"]["by_group"]:
        assert f"<td>{group['group']}</td><td>{group['generations']}</td>" in page
    assert "<h3>Non-zero codes</h3>" in page and "<td>join_group</td><td>MEMBER_ID_REQUIRED (79)</td>" in page
    assert "<h3>Where the tasks ran (Spark executors)</h3>" in page
    assert "ours compared with baseline earlier-run" in page
    # heartbeat p99 was 4x higher in the baseline: this run is 0.25x of it; the rest 1.00x.
    compared = page.split("compared with baseline", 1)[1]
    heartbeat = compared.split("<td>heartbeat</td>", 1)[1].split("</tr>")[0]
    assert "<td>0.25x</td>" in heartbeat and "<td>1.00x</td>" in heartbeat


def test_baseline_of_the_other_group_protocol_is_not_compared(tmp_path: Path) -> None:
    summary, _ = _recorded()
    other = {**_slower_baseline(summary), "reconciliation": {}}
    page = _write(tmp_path, other).read_text()
    assert "the baseline ran the other group protocol; not compared" in page


@pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    rendered = render(_write(tmp_path))
    width, height, colours = image_stats(rendered.png)
    assert rendered.images and all(w > 1000 and h > 1000 for w, h in rendered.images), rendered.images
    assert width >= 1400 and height > 2000, (width, height)  # the figure and the tables below it
    assert colours > 200, colours  # a blank or failed page has a handful of colours


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--baseline", "/nonexistent/summary.json"], "--baseline /nonexistent/summary.json: cannot read"),
        (["--spark-conf", "executor.memory=1g"], "expected spark.KEY=VALUE"),
    ],
)
def test_bad_report_and_spark_flags_are_usage_errors(tmp_path: Path, flags: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "loadtest", "--bootstrap", "127.0.0.1:9", "--master", "local[1]",
         "--out", str(tmp_path / "out"), *flags],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result
    assert message in result.stderr, result.stderr
