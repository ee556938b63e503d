"""`offsets history`: the commit audit history a server keeps with
offset.commit.history.retention.ms, read from its storage."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from coordinator.cli.admin.cli import main
from tests.admin.support import CliResult, commit, create_topics, table_rows
from tests.support.server import running_server

pytestmark = pytest.mark.integration


def _history(*argv: str) -> CliResult:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["offsets", "history", *argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return CliResult(code, out.getvalue(), err.getvalue())


def test_commits_are_recorded_and_read_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    with running_server(url, {"offset-commit-history-retention-ms": "3600000"}) as server:
        create_topics(server.bootstrap, audit_a=2, audit_b=1)
        commit(server.bootstrap, "audited", {("audit_a", 0): 5, ("audit_b", 0): 1}, metadata="first")
        commit(server.bootstrap, "audited", {("audit_a", 0): 9})
        commit(server.bootstrap, "other", {("audit_a", 1): 3})

        shown = _history("audited", "--storage", url)  # next to the running server
        assert shown.code == 0, shown
        rows = table_rows(shown.out)
        assert rows[0] == ["TIME", "TOPIC", "PARTITION", "OFFSET", "LEADER-EPOCH", "METADATA"]
        assert [r[1:5] for r in rows[1:]] == [
            ["audit_a", "0", "5", "-1"], ["audit_b", "0", "1", "-1"], ["audit_a", "0", "9", "-1"],
        ]  # fmt: skip
        assert rows[1][5] == "first" and rows[1][0].endswith("Z")

        doc = _history("audited", "--storage", url, "--topic", "audit_a", "--format", "json").json()
        assert [(c["partition"], c["offset"]) for c in doc["commits"]] == [(0, 5), (0, 9)]
        assert _history("audited", "--storage", url, "--since", "2999-01-01T00:00:00Z", "--format", "json").json() == {
            "group": "audited", "commits": [],
        }  # fmt: skip
        recent = _history("audited", "--storage", url, "--since", "PT1H")
        assert len(table_rows(recent.out)) == 4


def test_without_the_setting_nothing_is_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    with running_server(url) as server:
        create_topics(server.bootstrap, plain_t=1)
        commit(server.bootstrap, "plain", {("plain_t", 0): 5})
        result = _history("plain", "--storage", url)
    assert result.code == 0 and result.out == "" and "no recorded commits for group plain" in result.err


def test_usage_and_storage_errors(tmp_path: Path) -> None:
    assert _history("g", "--storage", "memory://").code == 1
    bad_since = _history("g", "--storage", f"sqlite:///{tmp_path / 'x.db'}", "--since", "yesterday")
    assert bad_since.code == 2
    missing_dir = _history("g", "--storage", f"sqlite:///{tmp_path / 'no' / 'x.db'}")
    assert missing_dir.code == 1 and missing_dir.err
