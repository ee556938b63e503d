"""The alert rules and the Grafana dashboard under ops/: they parse, and name only metrics that a
running coordinator exports."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.observe_support import (
    Observed,
    create_topic,
    form_group,
    join_without_sync,
    observed,
    scrape,
)

__all__ = ["observed"]  # the fixture

OPS = Path(__file__).resolve().parents[2] / "ops"
RULES = OPS / "prometheus" / "coordinator-alerts.yml"
DASHBOARD = OPS / "grafana" / "coordinator-groups.json"
_METRIC = re.compile(r"\bcoordinator_[a-z0-9_]+\b")


def _promtool() -> str:
    found = shutil.which("promtool")
    assert found, "promtool is missing: .ci/setup installs Debian's prometheus package"
    return found


def test_rules_and_config_pass_promtool() -> None:
    rules = subprocess.run(
        [_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 9 rules found" in rules.stdout
    config = subprocess.run(
        [_promtool(), "check", "config", str(OPS / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert config.returncode == 0, config.stdout + config.stderr


def test_alert_rules_pass_their_unit_tests() -> None:
    """ops/prometheus/coordinator-alerts.test.yml: among others, a stalled group whose lag in
    seconds is unknown (no sample) is caught by an alert, and ConsumerGroupLagHigh fires."""
    tested = subprocess.run(
        [_promtool(), "test", "rules", str(RULES.with_suffix(".test.yml"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def _rule_metrics() -> set[str]:
    return set(_METRIC.findall(RULES.read_text()))


def _dashboard_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    return {name for expr in exprs for name in _METRIC.findall(expr)}


def test_dashboard_is_importable_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}


@pytest.mark.integration
@pytest.mark.asyncio
async def test_every_metric_named_exists_in_a_live_scrape(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    await asyncio.to_thread(join_without_sync, observed.bootstrap, "stuck")  # rebalancing now
    for p in range(4):  # the log end passes the committed offsets: lag in seconds is known
        observed.server.lag.observe("orders", "t", p, 0, 10 * p, 10 * p, commit_time_ms=0)
        observed.server.lag.observe("orders", "t", p, 1_000, 10 * p, 50 + 10 * p, commit_time_ms=0)
    samples, _declared = await scrape(observed)
    exported = {key.split("{", 1)[0] for key in samples}
    named = _rule_metrics() | _dashboard_metrics()
    assert len(named) >= 15
    assert named - exported == set(), f"named but not exported: {sorted(named - exported)}"
