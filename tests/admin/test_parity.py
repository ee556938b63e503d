"""Parity with rpk and kafka-consumer-groups.sh: copying offsets between groups, several groups in one file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.admin.support import cli, commit, committed, create_topics, live_consumer, table_rows
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


def test_several_groups_in_one_file_export_and_import(ours: ServerProcess, tmp_path: Path) -> None:
    b = ours.bootstrap
    create_topics(b, many_t=2)
    commit(b, "many-a", {("many_t", 0): 4, ("many_t", 1): 5})
    commit(b, "many-b", {("many_t", 0): 7})
    exported = cli(b, "offsets", "export", "--all-groups")
    assert exported.code == 0, exported
    assert {"many-a,many_t,0,4", "many-a,many_t,1,5", "many-b,many_t,0,7"} <= set(exported.out.splitlines())

    plan = tmp_path / "groups.csv"
    plan.write_text(
        "group,topic,partition,offset\nmany-c,many_t,0,40\nmany-c,many_t,1,41\nmany-live,many_t,0,1\nmany-d,many_t,1,9\n"
    )
    with live_consumer(b, "many-live", ["many_t"], "busy"):
        imported = cli(b, "offsets", "import", "--groups-file", str(plan), "--execute")
    # The group with members is refused and named; the others are imported (exit 1).
    assert imported.code == 1 and "NON_EMPTY_GROUP" in imported.err and "many-live" in imported.err
    assert table_rows(imported.out)[1:] == [
        ["many-c", "many_t", "0", "40", "committed"],
        ["many-c", "many_t", "1", "41", "committed"],
        ["many-d", "many_t", "1", "9", "committed"],
    ]
    assert offsets_of(b, "many-c") == {("many_t", 0): 40, ("many_t", 1): 41}
    assert offsets_of(b, "many-d") == {("many_t", 1): 9}

    bad = tmp_path / "bad.csv"
    bad.write_text("many-e,many_t,0\n")
    refused = cli(b, "offsets", "import", "--groups-file", str(bad))
    assert refused.code == 2 and "expected group,topic,partition,offset" in refused.err
    both = cli(b, "offsets", "import", "many-e", str(plan), "--groups-file", str(plan))
    assert both.code == 2


def test_import_into_a_fresh_cluster_creates_or_skips_missing_topics(
    ours: ServerProcess, tmp_path: Path
) -> None:
    b = ours.bootstrap
    create_topics(b, fresh_have=1)
    plan = tmp_path / "fresh.csv"
    plan.write_text("fresh_new,0,10\nfresh_new,2,12\nfresh_have,0,3\nfresh_have,1,4\n")

    refused = cli(b, "offsets", "import", "fresh-g", str(plan))
    assert refused.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in refused.err, refused
    assert "fresh_have (has 1 partitions, needs 2), fresh_new (missing)" in refused.err
    assert offsets_of(b, "fresh-g") == {}  # nothing was imported

    skipped = cli(b, "offsets", "import", "fresh-g", str(plan), "--missing-topics", "skip", "--execute")
    assert skipped.code == 0 and "skipped 3 partition(s)" in skipped.err, skipped
    assert offsets_of(b, "fresh-g") == {("fresh_have", 0): 3}

    created = cli(b, "offsets", "import", "fresh-g", str(plan), "--missing-topics", "create", "--execute")
    assert created.code == 0 and "created: " in created.err, created
    assert offsets_of(b, "fresh-g") == {
        ("fresh_new", 0): 10, ("fresh_new", 2): 12, ("fresh_have", 0): 3, ("fresh_have", 1): 4,
    }  # fmt: skip
    (new_topic,) = cli(b, "topics", "describe", "fresh_new", "--format", "json").json()
    assert len(new_topic["partitions"]) == 3

    groups = tmp_path / "fresh-groups.csv"
    groups.write_text("fresh-h,fresh_more,1,5\n")
    many = cli(
        b, "offsets", "import", "--groups-file", str(groups), "--missing-topics", "create", "--execute"
    )
    assert many.code == 0 and offsets_of(b, "fresh-h") == {("fresh_more", 1): 5}, many
