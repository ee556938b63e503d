"""Every admin verb against our coordinator (a server subprocess), checked with kafka-python."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.admin.support import cli, commit, committed, create_topics, live_consumer, table_rows
from tests.support.server import REPO, ServerProcess

pytestmark = pytest.mark.integration


def _wait_for_state(bootstrap: str, group: str, state: str) -> None:
    deadline = time.monotonic() + 15
    while (
        cli(bootstrap, "groups", "describe", group, "--state", "--format", "json").json()[0]["state"] != state
    ):
        assert time.monotonic() < deadline, f"group {group} never became {state}"
        time.sleep(0.1)


def test_groups_list_table_json_and_filters(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, list_t=2)
    commit(b, "list-empty", {("list_t", 0): 1})
    with live_consumer(b, "list-live", ["list_t"], "lister"):
        result = cli(b, "groups", "list")
        assert result.code == 0, result
        rows = table_rows(result.out)
        assert rows[0] == ["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"]
        assert ["list-live", "Stable", "classic", "consumer"] in rows
        assert ["list-empty", "Empty", "classic", "-"] in rows

        listed = {g["group"]: g for g in cli(b, "groups", "list", "--format", "json").json()}
        assert listed["list-live"] == {
            "group": "list-live", "state": "Stable", "type": "classic", "protocol_type": "consumer", "broker": 0,
        }  # fmt: skip
        stable = cli(b, "groups", "list", "--state", "Stable", "--format", "json").json()
        assert "list-live" in {g["group"] for g in stable} and "list-empty" not in {
            g["group"] for g in stable
        }
        empty = cli(b, "groups", "list", "--state", "empty,dead", "--format", "json").json()
        assert "list-empty" in {g["group"] for g in empty} and "list-live" not in {g["group"] for g in empty}
        assert {"list-live", "list-empty"} <= {
            g["group"] for g in cli(b, "groups", "list", "--type", "classic", "--format", "json").json()
        }
        none = cli(b, "groups", "list", "--type", "share")
        assert (none.code, none.out, none.err.strip()) == (0, "", "no groups match the filters")


def test_groups_describe_members_state_and_offsets(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, d_orders=3, d_pay=2)
    commit(b, "describe-g", {("d_orders", 0): 5, ("d_orders", 1): 6, ("d_orders", 2): 7})
    with live_consumer(b, "describe-g", ["d_orders", "d_pay"], "describer") as consumer:
        assert len(consumer.assignment()) == 5
        members = cli(b, "groups", "describe", "describe-g", "--members")
        assert members.code == 0, members
        rows = table_rows(members.out)
        assert rows[0] == [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ]
        assert rows[1][0] == "describe-g" and rows[1][1].startswith("describer-")
        assert rows[1][2:] == ["-", "/127.0.0.1", "describer", "5", "d_orders:0,1,2;d_pay:0,1"]

        state = cli(b, "groups", "describe", "describe-g", "--state")
        assert table_rows(state.out)[1] == [
            "describe-g",
            f"127.0.0.1:{ours.port}",
            "(0)",
            "range",
            "Stable",
            "1",
        ]

        offsets = cli(b, "groups", "describe", "describe-g")  # the default view, as kafka-consumer-groups
        rows = table_rows(offsets.out)
        assert rows[0] == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
        ]  # fmt: skip
        assert [r[1:6] for r in rows[1:]] == [
            # This server holds no records: ListOffsets answers 0 for every log. A log end before
            # the committed offset is not the end of the log it was read from: unknown, not -5.
            ["d_orders", "0", "5", "-", "-"],
            ["d_orders", "1", "6", "-", "-"],
            ["d_orders", "2", "7", "-", "-"],
            ["d_pay", "0", "-", "0", "-"],
            ["d_pay", "1", "-", "0", "-"],
        ]
        assert (
            "log end unknown for 3 partitions: the broker reports a log end (0) before the committed offset"
            in offsets.err
        )
        assert all(r[7:] == ["/127.0.0.1", "describer"] for r in rows[1:])

        doc = cli(
            b, "groups", "describe", "describe-g", "--members", "--offsets", "--state", "--format", "json"
        ).json()
        (group,) = doc
        assert group["state"] == "Stable" and group["member_count"] == 1
        assert group["coordinator"] == {"node_id": 0, "host": "127.0.0.1", "port": ours.port}
        (member,) = group["members"]
        assert member["client_id"] == "describer" and member["group_instance_id"] is None
        assert member["assignment"][0] == {"topic": "d_orders", "partition": 0}
        assert group["offsets"][0] == {
            "topic": "d_orders", "partition": 0, "current_offset": 5, "log_end_offset": None, "lag": None,
            "member_id": member["member_id"], "host": "/127.0.0.1", "client_id": "describer",
        }  # fmt: skip


def test_describe_unknown_group_is_a_named_error(ours: ServerProcess) -> None:
    result = cli(ours.bootstrap, "groups", "describe", "no-such-group")
    assert result.code == 1
    assert result.err.startswith("GROUP_ID_NOT_FOUND: group 'no-such-group' does not exist")


def test_describe_prints_the_groups_that_exist_and_reports_the_others(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, part_t=1)
    commit(b, "part-g1", {("part_t", 0): 3})
    for output in ("json", "table"):
        result = cli(b, "groups", "describe", "part-g1", "nosuch", "--format", output)
        assert result.code == 1, result
        assert result.err.strip().splitlines()[-1] == (
            "GROUP_ID_NOT_FOUND: group 'nosuch' does not exist (The group id does not exist)"
        )
        if output == "json":
            assert [g["group"] for g in result.json()] == ["part-g1"]
        else:
            assert table_rows(result.out)[1][:4] == ["part-g1", "part_t", "0", "3"]


def test_reset_of_a_group_that_does_not_exist(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, new_g_t=2)
    result = cli(b, "offsets", "reset", "nosuchgroup", "--all-topics", "--to-offset", "5", "--execute")
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("GROUP_ID_NOT_FOUND: group 'nosuchgroup' does not exist, so --all-topics")
    # Naming the partitions gives a new group its first offsets, as kafka-consumer-groups does.
    created = cli(b, "offsets", "reset", "new-group", "--topic", "new_g_t", "--to-offset", "5", "--execute")
    assert created.code == 0, created
    assert {tp: o for tp, (o, _m) in committed(b, "new-group").items()} == {
        ("new_g_t", 0): 5,
        ("new_g_t", 1): 5,
    }


def test_groups_delete(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, del_t=1)
    commit(b, "del-a", {("del_t", 0): 3})
    commit(b, "del-b", {("del_t", 0): 3})
    with live_consumer(b, "del-live", ["del_t"], "deleter"):
        result = cli(b, "groups", "delete", "del-a", "del-live", "del-nope")
    assert result.code == 1
    assert table_rows(result.out) == [
        ["GROUP", "STATUS"], ["del-a", "deleted"], ["del-live", "NON_EMPTY_GROUP"], ["del-nope", "GROUP_ID_NOT_FOUND"],
    ]  # fmt: skip
    assert "NON_EMPTY_GROUP: cannot delete group 'del-live'" in result.err
    assert "GROUP_ID_NOT_FOUND: cannot delete group 'del-nope'" in result.err
    assert cli(b, "groups", "describe", "del-a").code == 1
    assert committed(b, "del-a") == {}
    as_json = cli(b, "groups", "delete", "del-b", "--format", "json")
    assert (as_json.code, as_json.json()) == (0, [{"group": "del-b", "deleted": True, "error": None}])


def test_reset_dry_run_changes_nothing(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, dry_t=4)
    before = {("dry_t", p): 5 + p for p in range(4)}
    commit(b, "reset-dry", before)
    methods = [["--to-offset", "3"], ["--to-offset", "3", "--no-clamp"], ["--shift-by", "-1"]]
    for method in methods:
        result = cli(b, "offsets", "reset", "reset-dry", "--topic", "dry_t:1,3", *method)
        assert result.code == 0, (method, result)
        assert "Dry run: nothing was changed" in result.err
        assert [r[:3] for r in table_rows(result.out)] == [
            ["GROUP", "TOPIC", "PARTITION"], ["reset-dry", "dry_t", "1"], ["reset-dry", "dry_t", "3"],
        ]  # fmt: skip
    plan = cli(b, "offsets", "reset", "reset-dry", "--all-topics", "--shift-by", "2", "--no-clamp", "--dry-run",
               "--format", "json").json()  # fmt: skip
    assert plan["executed"] is False
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in plan["partitions"]] == [
        (0, 5, 7), (1, 6, 8), (2, 7, 9), (3, 8, 10),
    ]  # fmt: skip
    assert {tp: o for tp, (o, _m) in committed(b, "reset-dry").items()} == before


def test_reset_execute_changes_exactly_the_planned_partitions(ours: ServerProcess, tmp_path: Path) -> None:
    b = ours.bootstrap
    create_topics(b, ex_t=4)
    commit(b, "reset-ex", {("ex_t", p): 5 + p for p in range(4)})

    def offsets() -> dict[int, int]:
        return {p: o for (_t, p), (o, _m) in committed(b, "reset-ex").items()}

    result = cli(b, "offsets", "reset", "reset-ex", "--topic", "ex_t:1,3", "--to-offset", "42", "--no-clamp",
                 "--execute", "--format", "json")  # fmt: skip
    assert result.code == 0, result
    assert result.json() == {
        "group": "reset-ex",
        "executed": True,
        "partitions": [
            {"topic": "ex_t", "partition": 1, "current_offset": 6, "new_offset": 42, "error": None},
            {"topic": "ex_t", "partition": 3, "current_offset": 8, "new_offset": 42, "error": None},
        ],
    }
    assert offsets() == {0: 5, 1: 42, 2: 7, 3: 42}

    table = cli(b, "offsets", "reset", "reset-ex", "--topic", "ex_t:0", "--to-offset", "0", "--execute")
    assert table_rows(table.out) == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "STATUS"],
        ["reset-ex", "ex_t", "0", "5", "0", "committed"],
    ]
    assert offsets() == {0: 0, 1: 42, 2: 7, 3: 42}

    assert (
        cli(
            b, "offsets", "reset", "reset-ex", "--all-topics", "--shift-by", "10", "--no-clamp", "--execute"
        ).code
        == 0
    )
    assert offsets() == {0: 10, 1: 52, 2: 17, 3: 52}

    # Ours holds no records, so there is no log to clamp against: the offset is taken as given.
    unclamped = cli(b, "offsets", "reset", "reset-ex", "--topic", "ex_t:2", "--to-offset", "0", "--execute")
    assert (unclamped.code, unclamped.err) == (0, "")
    assert offsets() == {0: 10, 1: 52, 2: 0, 3: 52}

    plan = tmp_path / "plan.csv"
    plan.write_text("ex_t,0,11\nex_t,3,12\n")
    assert (
        cli(b, "offsets", "reset", "reset-ex", "--from-file", str(plan), "--no-clamp", "--execute").code == 0
    )
    assert offsets() == {0: 11, 1: 52, 2: 0, 3: 12}
    scoped = cli(b, "offsets", "reset", "reset-ex", "--topic", "ex_t:3", "--from-file", str(plan), "--no-clamp",
                 "--format", "json")  # fmt: skip
    assert [p["partition"] for p in scoped.json()["partitions"]] == [3]


def test_resets_on_a_broker_without_records_keep_the_offsets(ours: ServerProcess) -> None:
    """Ours holds no records: nothing is clamped to its empty logs, log-based methods are refused."""
    b = ours.bootstrap
    create_topics(b, keep_t=6)
    before = {("keep_t", p): 38 + 102 * p for p in range(6)}  # 38 ... 548
    commit(b, "reset-keep", before)

    shifted = cli(b, "offsets", "reset", "reset-keep", "--all-topics", "--shift-by", "-4", "--execute")
    assert (shifted.code, shifted.err) == (0, ""), shifted
    after = {tp: o - 4 for tp, o in before.items()}
    assert {tp: o for tp, (o, _m) in committed(b, "reset-keep").items()} == after

    planned = cli(b, "offsets", "reset", "reset-keep", "--topic", "keep_t:0,2", "--to-offset", "42",
                  "--format", "json")  # fmt: skip
    assert [(p["partition"], p["new_offset"]) for p in planned.json()["partitions"]] == [(0, 42), (2, 42)]

    for method in (["--to-earliest"], ["--to-latest"], ["--to-datetime", "2024-01-01T00:00:00Z"],
                   ["--by-duration", "PT1H"]):  # fmt: skip
        for extra in ([], ["--no-clamp"]):
            refused = cli(b, "offsets", "reset", "reset-keep", "--all-topics", *method, *extra, "--execute")
            assert (refused.code, refused.out) == (2, ""), (method, refused)
            assert f"{method[0]} needs the partitions' log" in refused.err
            assert "standalone group coordinator that holds no records" in refused.err
    assert {tp: o for tp, (o, _m) in committed(b, "reset-keep").items()} == after


def test_reset_is_refused_while_the_group_has_members(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, act_t=2)
    commit(b, "reset-live", {("act_t", 0): 5, ("act_t", 1): 6})
    with live_consumer(b, "reset-live", ["act_t"], "busy"):
        for mode in ("--dry-run", "--execute"):
            result = cli(b, "offsets", "reset", "reset-live", "--all-topics", "--to-offset", "0", mode)
            assert result.code == 1
            assert result.out == ""
            assert result.err.strip() == (
                "NON_EMPTY_GROUP: cannot reset the offsets of group 'reset-live' while it has active members "
                "(state Stable, 1 member); stop its consumers first"
            )
        assert {tp: o for tp, (o, _m) in committed(b, "reset-live").items()} == {
            ("act_t", 0): 5,
            ("act_t", 1): 6,
        }
    _wait_for_state(b, "reset-live", "Empty")
    assert cli(b, "offsets", "reset", "reset-live", "--all-topics", "--to-offset", "0", "--execute").code == 0
    assert {tp: o for tp, (o, _m) in committed(b, "reset-live").items()} == {("act_t", 0): 0, ("act_t", 1): 0}


def test_reset_errors_are_named(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, err_t=2)
    commit(b, "reset-err", {("err_t", 0): 5})
    unknown = cli(b, "offsets", "reset", "reset-err", "--topic", "no_such_topic", "--to-offset", "0")
    assert (unknown.code, unknown.err.split(":")[0]) == (1, "UNKNOWN_TOPIC_OR_PARTITION")
    assert "topic 'no_such_topic' does not exist" in unknown.err
    missing = cli(b, "offsets", "reset", "reset-err", "--topic", "err_t:0,7", "--to-offset", "0")
    assert missing.code == 1
    assert missing.err.strip() == "UNKNOWN_TOPIC_OR_PARTITION: topic 'err_t' has 2 partitions; no partition 7"
    shift = cli(b, "offsets", "reset", "reset-err", "--topic", "err_t", "--shift-by", "1")
    assert shift.code == 2
    assert "cannot shift err_t-1: the group has no committed offset there" in shift.err


def test_offsets_delete(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, od_t=3, od_u=1)
    commit(b, "odel", {("od_t", 0): 1, ("od_t", 1): 2, ("od_t", 2): 3, ("od_u", 0): 4})
    one = cli(b, "offsets", "delete", "odel", "--topic", "od_t:1")
    assert one.code == 0, one
    assert table_rows(one.out) == [["TOPIC", "PARTITION", "STATUS"], ["od_t", "1", "deleted"]]
    assert set(committed(b, "odel")) == {("od_t", 0), ("od_t", 2), ("od_u", 0)}
    whole = cli(b, "offsets", "delete", "odel", "--topic", "od_u", "--format", "json")
    assert whole.json() == {"group": "odel", "partitions": [{"topic": "od_u", "partition": 0, "error": None}]}
    assert set(committed(b, "odel")) == {("od_t", 0), ("od_t", 2)}

    commit(b, "odel-live", {("od_t", 0): 1})
    with live_consumer(b, "odel-live", ["od_t"], "subscriber"):
        busy = cli(b, "offsets", "delete", "odel-live", "--topic", "od_t:0")
    assert busy.code == 1
    assert "GROUP_SUBSCRIBED_TO_TOPIC: cannot delete the offset of od_t-0 in group 'odel-live'" in busy.err
    nope = cli(b, "offsets", "delete", "odel-nope", "--topic", "od_t:0")
    assert (nope.code, nope.err.split(":")[0]) == (1, "GROUP_ID_NOT_FOUND")


def test_export_delete_import_round_trip(ours: ServerProcess, tmp_path: Path) -> None:
    b = ours.bootstrap
    create_topics(b, rt_t=3)
    original = {("rt_t", 0): 10, ("rt_t", 1): 20, ("rt_t", 2): 30}
    commit(b, "rt", original, metadata="meta,x")
    plain = cli(b, "offsets", "export", "rt")
    assert (plain.code, plain.out) == (0, "rt_t,0,10\nrt_t,1,20\nrt_t,2,30\n")
    as_json = cli(b, "offsets", "export", "rt", "--format", "json").json()
    assert as_json["offsets"][0] == {"topic": "rt_t", "partition": 0, "offset": 10, "metadata": "meta,x"}
    exported = cli(b, "offsets", "export", "rt", "--with-metadata")
    assert exported.out.splitlines()[0] == 'rt_t,0,10,"meta,x"'
    path = tmp_path / "rt.csv"
    path.write_text(exported.out)

    assert cli(b, "groups", "delete", "rt").code == 0
    assert committed(b, "rt") == {}
    assert cli(b, "offsets", "export", "rt").code == 1  # GROUP_ID_NOT_FOUND, not an empty file

    imported = cli(b, "offsets", "import", "rt", str(path), "--execute")
    assert imported.code == 0, imported
    assert table_rows(imported.out)[:2] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "STATUS"],
        ["rt", "rt_t", "0", "-", "10", "committed"],
    ]  # fmt: skip
    assert committed(b, "rt") == {tp: (o, "meta,x") for tp, o in original.items()}

    # Kafka's three-column reset file imports too (into another group here), with empty metadata.
    copy = tmp_path / "copy.csv"
    copy.write_text(plain.out)
    as_json = cli(b, "offsets", "import", "rt-copy", str(copy), "--format", "json", "--execute").json()
    assert as_json["executed"] is True
    assert committed(b, "rt-copy") == {tp: (o, "") for tp, o in original.items()}


def test_import_is_refused_while_the_group_has_members(ours: ServerProcess, tmp_path: Path) -> None:
    b = ours.bootstrap
    create_topics(b, imp_t=1)
    path = tmp_path / "imp.csv"
    path.write_text("imp_t,0,9\n")
    with live_consumer(b, "imp-live", ["imp_t"], "importer"):
        result = cli(b, "offsets", "import", "imp-live", str(path))  # refused at the plan already
        assert result.code == 1
        assert result.err.startswith("NON_EMPTY_GROUP: cannot import offsets into group 'imp-live'")
        assert committed(b, "imp-live") == {}


def test_module_entry_point(ours: ServerProcess) -> None:
    commit(ours.bootstrap, "entry", {("entry_t", 0): 1})
    result = subprocess.run(
        [sys.executable, "-m", "coordinator.cli.admin", "groups", "list", "--bootstrap", ours.bootstrap, "--format", "json"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "entry" in {g["group"] for g in json.loads(result.stdout)}
