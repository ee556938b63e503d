"""The README's two set-up commands stay true: CI runs the second; this runs the first's server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.server import REPO

README = (REPO / "README.md").read_text()


def setup_commands() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block is not None, "the README starts with a shell block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_starts_with_serve_and_test_commands() -> None:
    serve, test = setup_commands()[:2]
    assert serve == "bash .ci/setup && .venv/bin/coordinator serve"
    assert test == "bash .ci/setup && .venv/bin/python -m pytest"
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash .ci/setup" in ci and ".venv/bin/python -m pytest" in ci


@pytest.mark.integration
def test_quick_start_server_runs_on_sqlite_in_the_working_directory(tmp_path: Path) -> None:
    serve = setup_commands()[0].split("&&")[1].split()
    binary = str(Path(sys.executable).parent / Path(serve[0]).name)
    # The README's command exactly, moved to an ephemeral port through the environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")} | {
        "COORDINATOR_PORT": "0"
    }
    process = subprocess.Popen([binary, *serve[1:]], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 30
        for line in process.stderr:
            if "listening on 127.0.0.1:" in line:
                break
            assert time.monotonic() < deadline
        assert (tmp_path / "coordinator.db").exists()
    finally:
        process.terminate()
        assert process.wait(15) == 0
        if process.stderr is not None:
            process.stderr.close()


def test_supported_apis_table_lists_every_served_api() -> None:
    from protocol.apis import SERVED_VERSIONS

    section = README.split("## Supported APIs", 1)[1].split("\n## ", 1)[0]
    table = {
        int(key): (int(low), int(high))
        for key, low, high in re.findall(r"^\| [^|]+ \| (\d+) \| (\d+)(?:\u2013(\d+))? \|$", section, re.M)
        for low, high in [(low, high or low)]
    }
    assert table == {int(api): versions for api, versions in SERVED_VERSIONS.items()}
