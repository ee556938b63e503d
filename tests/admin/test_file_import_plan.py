"""`offsets import GROUP FILE` and `--groups-file` plan first, as every offset change does (and
Kafka's --reset-offsets --from-file): nothing is committed, and no topic created, without --execute."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.admin.support import cli, commit, committed, create_topics, table_rows
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration

DRY_RUN = "Dry run: nothing was changed. Run again with --execute to commit these offsets."


def test_a_file_import_prints_its_plan_and_commits_only_with_execute(
    ours: ServerProcess, tmp_path: Path
) -> None:
    b = ours.bootstrap
    create_topics(b, plan_t=2)
    commit(b, "plan-g", {("plan_t", 0): 3})
    path = tmp_path / "plan.csv"
    path.write_text("plan_t,0,10\nplan_t,1,11\n")
    expected_plan = [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        ["plan-g", "plan_t", "0", "3", "10"],
        ["plan-g", "plan_t", "1", "-", "11"],
    ]
    for mode in ((), ("--dry-run",)):  # the default is the dry run
        planned = cli(b, "offsets", "import", "plan-g", str(path), *mode)
        assert planned.code == 0, planned
        assert table_rows(planned.out) == expected_plan
        assert planned.err.strip() == DRY_RUN
        assert committed(b, "plan-g") == {("plan_t", 0): (3, "")}
    as_json = cli(b, "offsets", "import", "plan-g", str(path), "--format", "json").json()
    assert as_json["executed"] is False and "error" not in as_json["partitions"][0]

    executed = cli(b, "offsets", "import", "plan-g", str(path), "--execute")
    assert executed.code == 0, executed
    assert table_rows(executed.out)[1:] == [
        ["plan-g", "plan_t", "0", "3", "10", "committed"],
        ["plan-g", "plan_t", "1", "-", "11", "committed"],
    ]
    assert DRY_RUN not in executed.err
    assert committed(b, "plan-g") == {("plan_t", 0): (10, ""), ("plan_t", 1): (11, "")}


def test_a_planned_import_names_the_topics_it_would_create_without_creating_them(
    ours: ServerProcess, tmp_path: Path
) -> None:
    b = ours.bootstrap
    path = tmp_path / "new.csv"
    path.write_text("plan_new,1,5\n")
    planned = cli(b, "offsets", "import", "plan-new-g", str(path), "--missing-topics", "create")
    assert planned.code == 0 and "would create: plan_new (missing)" in planned.err, planned
    assert cli(b, "topics", "describe", "plan_new").code == 1
    assert committed(b, "plan-new-g") == {}


def test_a_groups_file_import_plans_first_too(ours: ServerProcess, tmp_path: Path) -> None:
    b = ours.bootstrap
    create_topics(b, plan_many_t=1)
    path = tmp_path / "groups.csv"
    path.write_text("plan-many-a,plan_many_t,0,7\nplan-many-b,plan_many_t,0,8\n")
    planned = cli(b, "offsets", "import", "--groups-file", str(path))
    assert planned.code == 0, planned
    assert table_rows(planned.out) == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        ["plan-many-a", "plan_many_t", "0", "7"],
        ["plan-many-b", "plan_many_t", "0", "8"],
    ]
    assert planned.err.strip() == DRY_RUN
    assert committed(b, "plan-many-a") == committed(b, "plan-many-b") == {}
    executed = cli(b, "offsets", "import", "--groups-file", str(path), "--execute", "--format", "json")
    assert executed.code == 0 and executed.json()[0]["error"] is None, executed
    assert committed(b, "plan-many-b") == {("plan_many_t", 0): (8, "")}


def test_help_says_the_import_plans_unless_execute() -> None:
    helped = cli("127.0.0.1:1", "offsets", "import", "--help")
    assert helped.code == 0
    text = " ".join(helped.out.split())
    assert "--dry-run print the plan only (the default)" in text
    assert "--execute commit the planned offsets" in text
