"""At start the server names its data's absolute location and the settings in force, secrets hidden."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.server.config import load_config
from coordinator.server.startup_report import settings_block, sqlite_path, storage_location
from tests.support.server import REPO


def test_a_relative_sqlite_path_is_named_absolutely(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert sqlite_path("sqlite:///data/c.db?synchronous=NORMAL") == tmp_path / "data" / "c.db"
    assert sqlite_path("sqlite:////var/lib/c.db") == Path("/var/lib/c.db")
    assert storage_location("sqlite:///c.db") == str(tmp_path / "c.db")
    assert storage_location("postgresql://u:pw@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert storage_location("memory://") == "memory://"


def test_the_settings_block_hides_secrets() -> None:
    config = load_config(
        cli={
            "storage": "postgresql://admin:topsecret@db/x",
            "ssl_keyfile_password": "hunter2",
            "num_partitions": 3,
        },
        env={},
    )
    block = settings_block(config)
    assert "\tnum.partitions = 3" in block.splitlines()
    assert "\tstorage = postgresql://admin:***@db/x" in block.splitlines()
    assert "\tssl.keyfile.password = [hidden]" in block.splitlines()
    assert "topsecret" not in block and "hunter2" not in block


@pytest.mark.integration
def test_serve_logs_where_its_data_is_and_its_settings(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    env["PYTHONPATH"] = str(REPO)
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--port", "0", "--storage", "sqlite:///state.db",
         "--ssl-keyfile-password", "hunter2"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if "loaded " in line and " topics" in line:
                break
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stderr is not None:
            process.stderr.close()
    text = "".join(lines)
    database = tmp_path / "state.db"
    assert f"SQLite file {database} does not exist: starting with a new, empty database" in text
    assert f"offsets from {database} in" in text
    # One count per registered kind, by its name (coordinator/core/kinds.py).
    assert "0 classic groups, 0 consumer groups, 0 share groups, 0 streams groups and 0 offsets" in text
    assert "effective configuration:" in text and "\tport = 0\n" in text
    assert "ssl.keyfile.password = [hidden]" in text and "hunter2" not in text
    assert sum(" offsets" in line and "loaded " in line for line in lines) == 1  # one count, not two


def _serve_json(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", "--log-format", "json", *argv],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.integration
def test_startup_errors_follow_the_json_log_format() -> None:
    usage = _serve_json("--num-partitions", "x")
    assert usage.returncode == 2
    entry = json.loads(usage.stderr.strip().splitlines()[-1])
    assert entry["level"] == "ERROR" and "num.partitions" in entry["message"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        failed = _serve_json("--host", "127.0.0.1", "--port", str(port), "--storage", "memory://")
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert all(json.loads(line) for line in lines)  # every line, the settings block included, is JSON
    assert json.loads(lines[-1])["message"].startswith("cannot start: ")
