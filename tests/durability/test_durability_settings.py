"""The SQLite durability setting, as the server takes it (issue 4: "Durability settings").

Both spellings must work or be refused with a clear message: ``--sqlite-synchronous`` (the
setting) and ``?synchronous=`` in the storage URL (documented in storage/url.py).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.server import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def serve(storage: str, *args: str) -> tuple[bool, int | None, str]:
    """Run ``coordinator serve``; (listened?, exit code if it exited, stderr). Stopped by PID."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    argv = [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", "0"]
    process = subprocess.Popen(
        [*argv, "--storage", storage, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    stderr = process.stderr
    assert stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    seen: list[str] = []
    listened = False
    deadline = time.monotonic() + 20
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:  # the process exited
                break
            seen.append(line)
            if " offsets from " in line:  # listening, and the store is open and loaded
                listened = True
                break
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        reader.join(10)
        stderr.close()
    return listened, None if listened else process.returncode, "".join(seen)


def test_sqlite_synchronous_normal_flag_starts(tmp_path: Path) -> None:
    listened, _, log = serve(f"sqlite:///{tmp_path / 'a.db'}", "--sqlite-synchronous", "NORMAL")
    assert listened, log


def test_synchronous_in_the_sqlite_url_is_honoured(tmp_path: Path) -> None:
    listened, code, log = serve(f"sqlite:///{tmp_path / 'b.db'}?synchronous=NORMAL")
    assert listened, f"exit code {code}:\n{log}"


def test_a_synchronous_mode_other_than_full_or_normal_is_refused_with_a_message(tmp_path: Path) -> None:
    listened, code, log = serve(f"sqlite:///{tmp_path / 'c.db'}", "--sqlite-synchronous", "EXTRA")
    assert not listened and code not in (0, None), f"exit code {code}:\n{log}"
    assert "Traceback" not in log and "sqlite-synchronous must be FULL or NORMAL" in log, log


def test_a_synchronous_mode_in_the_url_other_than_full_or_normal_is_refused(tmp_path: Path) -> None:
    listened, code, log = serve(f"sqlite:///{tmp_path / 'd.db'}?synchronous=EXTRA")
    assert not listened and code not in (0, None), f"exit code {code}:\n{log}"
    assert "Traceback" not in log and "synchronous must be 'FULL' or 'NORMAL'" in log, log
