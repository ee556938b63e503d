"""Parity with kafka-consumer-groups.sh: --all-groups for describe, delete and reset; --to-current."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.admin.support import cli, commit, committed, create_topics, live_consumer, table_rows
from tests.support.server import ServerProcess, running_server

pytestmark = pytest.mark.integration


@pytest.fixture
def own() -> Iterator[ServerProcess]:
    """A server of this test's own: --all-groups touches every group on it."""
    with running_server("memory://") as server:
        yield server


def offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return {tp: o for tp, (o, _m) in committed(bootstrap, group).items()}


def test_all_groups_describe_reset_and_delete(own: ServerProcess) -> None:
    b = own.bootstrap
    create_topics(b, ag_t=2)
    commit(b, "ag-a", {("ag_t", 0): 10, ("ag_t", 1): 11})
    commit(b, "ag-b", {("ag_t", 0): 20})
    with live_consumer(b, "ag-live", ["ag_t"], "busy"):
        described = cli(b, "groups", "describe", "--all-groups", "--state", "--format", "json")
        assert described.code == 0, described
        assert [g["group"] for g in described.json()] == ["ag-a", "ag-b", "ag-live"]

        reset = cli(b, "offsets", "reset", "--all-groups", "--all-topics", "--shift-by", "-5", "--execute",
                    "--format", "json")  # fmt: skip
        assert reset.code == 1  # the live group cannot be reset; the others are
        assert [(d["group"], [p["new_offset"] for p in d["partitions"]]) for d in reset.json()] == [
            ("ag-a", [5, 6]), ("ag-b", [15]),
        ]  # fmt: skip
        assert "NON_EMPTY_GROUP: cannot reset the offsets of group 'ag-live'" in reset.err
        assert offsets(b, "ag-a") == {("ag_t", 0): 5, ("ag_t", 1): 6}

        deleted = cli(b, "groups", "delete", "--all-groups")
        assert deleted.code == 1
        assert table_rows(deleted.out) == [
            ["GROUP", "STATUS"], ["ag-a", "deleted"], ["ag-b", "deleted"], ["ag-live", "NON_EMPTY_GROUP"],
        ]  # fmt: skip
    assert offsets(b, "ag-a") == {}


def test_groups_or_all_groups_is_required(own: ServerProcess) -> None:
    for argv in (["groups", "describe"], ["groups", "delete", "g", "--all-groups"],
                 ["offsets", "reset", "--all-topics", "--to-offset", "0"]):  # fmt: skip
        result = cli(own.bootstrap, *argv)
        assert result.code == 2, (argv, result)
        assert "--all-groups (one of them)" in result.err


def test_to_current(own: ServerProcess) -> None:
    b = own.bootstrap
    create_topics(b, cur_t=3)
    commit(b, "cur", {("cur_t", 0): 7, ("cur_t", 2): 9})
    plan = cli(b, "offsets", "reset", "cur", "--all-topics", "--to-current", "--format", "json")
    assert plan.code == 0, plan
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in plan.json()["partitions"]] == [
        (0, 7, 7), (2, 9, 9),
    ]  # fmt: skip
    # A partition without a committed offset would take the log end, which this broker does not have.
    refused = cli(b, "offsets", "reset", "cur", "--topic", "cur_t", "--to-current")
    assert refused.code == 2
    assert "cur_t-1: the group has no committed offset there, and this broker holds no records" in refused.err


def test_all_groups_delete_offsets(own: ServerProcess) -> None:
    b = own.bootstrap
    create_topics(b, do_t=2, do_u=1)
    commit(b, "do-a", {("do_t", 0): 1, ("do_t", 1): 2, ("do_u", 0): 3})
    commit(b, "do-b", {("do_t", 1): 4})
    commit(b, "do-c", {("do_u", 0): 5})
    result = cli(b, "offsets", "delete", "--all-groups", "--topic", "do_t")
    assert result.code == 0, result
    assert table_rows(result.out) == [
        ["GROUP", "TOPIC", "PARTITION", "STATUS"],
        ["do-a", "do_t", "0", "deleted"], ["do-a", "do_t", "1", "deleted"], ["do-b", "do_t", "1", "deleted"],
    ]  # fmt: skip
    assert (offsets(b, "do-a"), offsets(b, "do-b"), offsets(b, "do-c")) == (
        {("do_u", 0): 3}, {}, {("do_u", 0): 5},
    )  # fmt: skip
