"""`coordinator groups history`: argument handling and failures, without a server."""

from __future__ import annotations

import pytest

from coordinator.cli.admin.history_cmd import parse_since
from coordinator.cli.main import main
from tests.support.ports import free_port


def test_since_takes_a_date_time_or_a_duration_back_from_now() -> None:
    assert parse_since("2024-05-01T12:00:00Z", 0) == 1_714_564_800_000
    assert parse_since("PT10M", 1_000_000_000) == 1_000_000_000 - 600_000
    assert parse_since("p1d", 100_000_000) == 100_000_000 - 86_400_000
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_since("yesterday", 0)


def test_usage_errors_exit_2_with_a_readable_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["groups", "history", "g", "--since", "yesterday"])
    assert exited.value.code == 2
    assert "invalid ISO 8601 date-time 'yesterday'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["groups", "history", "g", "--http", "nohost"])
    assert exited.value.code == 2
    assert "expected HOST:PORT" in capsys.readouterr().err


def test_unreachable_http_port_is_explained(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there
    assert main(["groups", "history", "g", "--http", f"127.0.0.1:{port}", "--timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert f"cannot reach the coordinator's HTTP port at 127.0.0.1:{port}" in err
    assert "--metrics-port" in err


def test_help_says_it_reads_the_http_port(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["groups", "history", "--help"])
    out = capsys.readouterr().out
    assert "--http HOST:PORT" in out and "COORDINATOR_HTTP" in out and "--since WHEN" in out
