"""Parity with rpk and kafka-consumer-groups.sh: copying offsets between groups, lag per topic."""

from __future__ import annotations

import pytest

from tests.admin.support import cli, commit, committed, create_topics, table_rows
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration


def offsets_of(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return {tp: offset for tp, (offset, _metadata) in committed(bootstrap, group).items()}


def test_reset_to_group_copies_the_other_groups_offsets(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, copy_a=3, copy_b=1)
    commit(b, "copy-src", {("copy_a", 0): 11, ("copy_a", 2): 13, ("copy_b", 0): 20})
    commit(b, "copy-dst", {("copy_a", 0): 1, ("copy_a", 1): 2})

    plan = cli(b, "offsets", "reset", "copy-dst", "--all-topics", "--to-group", "copy-src")
    assert plan.code == 0, plan
    assert table_rows(plan.out)[1:] == [
        ["copy-dst", "copy_a", "0", "1", "11"],
        ["copy-dst", "copy_a", "2", "-", "13"],
        ["copy-dst", "copy_b", "0", "-", "20"],
    ]
    assert offsets_of(b, "copy-dst") == {("copy_a", 0): 1, ("copy_a", 1): 2}  # a dry run

    done = cli(
        b, "offsets", "reset", "copy-dst", "--topic", "copy_a:2", "--to-group", "copy-src", "--execute"
    )
    assert done.code == 0, done
    assert offsets_of(b, "copy-dst") == {("copy_a", 0): 1, ("copy_a", 1): 2, ("copy_a", 2): 13}

    everything = cli(b, "offsets", "reset", "copy-dst", "--all-topics", "--to-group", "copy-src", "--execute")
    assert everything.code == 0, everything
    # A copy moves the source's partitions; the destination's others are left as they were.
    assert offsets_of(b, "copy-dst") == {
        ("copy_a", 0): 11,
        ("copy_a", 1): 2,
        ("copy_a", 2): 13,
        ("copy_b", 0): 20,
    }


def test_reset_to_group_errors(ours: ServerProcess) -> None:
    b = ours.bootstrap
    create_topics(b, copy_err=2)
    commit(b, "copy-err-src", {("copy_err", 0): 5})
    missing = cli(b, "offsets", "reset", "copy-err", "--topic", "copy_err", "--to-group", "copy-err-src")
    assert missing.code == 2 and "no committed offset for copy_err-1" in missing.err, missing
    empty = cli(b, "offsets", "reset", "copy-err", "--all-topics", "--to-group", "copy-nobody")
    assert empty.code == 1 and "GROUP_ID_NOT_FOUND" in empty.err and "copy-nobody" in empty.err, empty
    fresh = cli(b, "offsets", "reset", "copy-new", "--all-topics", "--to-group", "copy-err-src", "--execute")
    assert fresh.code == 0 and offsets_of(b, "copy-new") == {("copy_err", 0): 5}, fresh
    itself = cli(b, "offsets", "reset", "copy-err-src", "--all-topics", "--to-group", "copy-err-src")
    assert itself.code == 2 and "not itself" in itself.err, itself
    every = cli(b, "offsets", "reset", "--all-groups", "--all-topics", "--to-group", "copy-err-src")
    assert every.code == 2, every
