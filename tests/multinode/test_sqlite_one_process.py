"""SQLite serves one process: a second ``coordinator serve`` on the same file refuses to start,
and a SIGKILLed first one leaves no lock behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import REPO, start_server

pytestmark = pytest.mark.integration


def _serve_once(storage: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", "0",
         "--storage", storage],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_second_server_on_one_sqlite_file_is_refused(tmp_path: Path) -> None:
    database = tmp_path / "coordinator.db"
    storage = f"sqlite:///{database}"
    first = start_server(storage)
    try:
        second = _serve_once(storage)
        assert second.returncode == 1, second.stderr
        refusal = second.stderr.strip().splitlines()[-1]
        assert refusal.startswith("coordinator: cannot start: SQLite database"), second.stderr
        assert str(database) in refusal and f"pid {first.process.pid} " in refusal, refusal
        assert "use PostgreSQL to run several nodes" in refusal
        assert first.process.poll() is None, "the refused start disturbed the running server"
    finally:
        first.stop(signal.SIGKILL)
    # The kernel dropped the killed server's lock: the next one starts on the same file.
    successor = start_server(storage)
    try:
        assert successor.port
    finally:
        assert successor.stop(signal.SIGTERM) == 0
