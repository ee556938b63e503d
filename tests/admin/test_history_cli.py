"""`coordinator groups history`: argument handling and failures without a server; with one, the
note that a restart loses the history unless it is persisted."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli.admin.history_cmd import NOT_PERSISTED, parse_since
from coordinator.cli.main import main
from tests.admin.support import create_topics
from tests.integration.observe_support import form_group
from tests.support.ports import free_port, wait_http_ok
from tests.support.server import running_server


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


@pytest.mark.integration
@pytest.mark.parametrize("persist", [False, True])
def test_history_says_when_a_restart_loses_it(
    persist: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    http_port = free_port()
    settings = {"metrics-port": str(http_port), "group-events-persist": str(persist).lower()}
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", settings) as server:
        # The start-up log names the console beside the metrics.
        console = f"the console on http://127.0.0.1:{http_port}/"
        assert f"http://127.0.0.1:{http_port}/metrics, {console}" in server.log_text()
        wait_http_ok(f"http://127.0.0.1:{http_port}/readyz")
        create_topics(server.bootstrap, hist_t=1)
        form_group(server.bootstrap, "hist", "historian", partitions=1, topic="hist_t")
        for extra in ((), ("--format", "json")):
            argv = ["groups", "history", "hist", "--http", f"127.0.0.1:{http_port}", "--timeout", "30"]
            assert main([*argv, *extra]) == 0
            captured = capsys.readouterr()
            assert "member_joined" in captured.out
            assert (NOT_PERSISTED in captured.err) is not persist, captured.err
    assert "group.events.persist=false, the default" in NOT_PERSISTED


def test_help_says_a_restart_loses_the_history_unless_persisted(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["groups", "history", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Unless the server runs with --group-events-persist true, events live in its memory only" in out
