"""The README's snippets do what their comments say: the kafka-python client, the admin CLI
block and the --command-config properties, run against a server started for the test."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.cli.admin.command_config import Security, load_security
from coordinator.cli.main import main
from tests.admin.support import committed as committed_with_metadata
from tests.support.server import REPO, ServerProcess, start_server

pytestmark = pytest.mark.integration

README = (REPO / "README.md").read_text()
README_BOOTSTRAP = "127.0.0.1:9092"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def admin_block() -> list[str]:
    """The shell block of the admin CLI: the one whose lines all start with `coordinator groups|offsets`."""
    for block in blocks("sh"):
        lines = [line for line in block.splitlines() if line.strip()]
        if lines and all(re.match(r"coordinator (groups|offsets) ", line) for line in lines):
            return lines
    raise AssertionError("the README has no admin CLI block")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # The default initial rebalance delay (3 s), as a reader's server has it.
    process = start_server("memory://", {"group-initial-rebalance-delay-ms": "3000"})
    try:
        yield process
    finally:
        process.stop()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    return {tp: offset for tp, (offset, _metadata) in committed_with_metadata(bootstrap, group).items()}


def test_the_python_snippet_then_the_admin_cli_block(server: ServerProcess, tmp_path: Path) -> None:
    snippet = blocks("python")[0]  # the share-groups one runs in tests/gateway/test_share_readme.py
    script = tmp_path / "snippet.py"
    script.write_text(snippet.replace(README_BOOTSTRAP, server.bootstrap))
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    for _run in range(2):  # a reader runs it again: the topic exists by then
        ran = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == "[0, 1, 2, 3, 4, 5]\n"  # as its comment says: all six partitions
    assert committed(server.bootstrap, "billing") == {("orders", p): 0 for p in range(6)}

    outputs: dict[str, str] = {}
    for line in admin_block():
        command, _, _comment = line.partition("#")
        argv = shlex.split(command)[1:]
        target = None
        if ">" in argv:
            argv, target = argv[: argv.index(">")], argv[argv.index(">") + 1]
        argv = [str(tmp_path / a) if a.endswith(".csv") else a for a in argv]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*argv, "--bootstrap", server.bootstrap])
        assert code == 0, (line, err.getvalue())
        if target is not None:
            (tmp_path / target).write_text(out.getvalue())
        outputs[" ".join(argv[:2])] = out.getvalue()
    assert "billing" in outputs["groups list"]
    assert (tmp_path / "billing.csv").read_text() == "".join(f"orders,{p},10\n" for p in range(6))
    # The import put back what the delete removed; then the group itself was deleted.
    assert committed(server.bootstrap, "billing") == {}


def test_the_command_config_example(tmp_path: Path) -> None:
    (properties,) = blocks("properties")
    config = tmp_path / "admin.properties"
    config.write_text(properties)
    assert load_security(str(config), {}) == Security(
        "SASL_SSL", "SCRAM-SHA-512", "admin", "s3cret", "/etc/kafka/ca.pem"
    )
