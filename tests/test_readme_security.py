"""The README's security example, run as written from an empty directory: the openssl lines make
the certificates, the users are added, the server starts with its two listeners, and the admin
commands add and list an ACL through the SASL_SSL listener."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from tests.support.ports import free_port
from tests.support.server import REPO
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

README = (REPO / "README.md").read_text()
BINARY = ".venv/bin/coordinator"


def security_block() -> str:
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        if "openssl req -x509" in block and "acls add" in block:
            return str(block)
    raise AssertionError("the README has no security example")


def split_at_serve(block: str) -> tuple[str, str, str]:
    """(the lines before `serve`, the serve command with its continuation lines joined, after)."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{BINARY} serve "))
    end = start
    while lines[end].endswith("\\"):
        end += 1
    serve = " ".join(line.rstrip("\\").strip() for line in lines[start : end + 1])
    return "\n".join(lines[:start]) + "\n", serve, "\n".join(lines[end + 1 :]) + "\n"


def test_the_security_example_runs_as_written(tmp_path: Path) -> None:
    before, serve, after = split_at_serve(security_block())
    plaintext, sasl_ssl = free_port(), free_port()

    def local(text: str) -> str:
        """The README's ports, moved to free ones."""
        return text.replace("127.0.0.1:9092", f"127.0.0.1:{plaintext}").replace(
            "127.0.0.1:9093", f"127.0.0.1:{sasl_ssl}"
        )

    # .venv/bin/coordinator is this checkout's CLI, run by the tests' interpreter.
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    wrapper = tmp_path / BINARY
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m coordinator "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    def run(script: str) -> str:
        done = subprocess.run(
            ["sh", "-e", "-c", local(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run(before)
    assert {"ca.pem", "server.pem", "server.key", "coordinator.db"} <= {p.name for p in tmp_path.iterdir()}
    argv = shlex.split(local(serve))
    assert argv[:2] == [BINARY, "serve"]
    server = subprocess.Popen(
        [str(wrapper), *argv[1:]], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # serving: ApiVersions on the plaintext listener answers
            try:
                with WireClient(f"127.0.0.1:{plaintext}", timeout=2) as client:
                    answer = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("readme", "1"))
                    if answer.error_code == 0:
                        break
            except OSError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "the README's server did not start"
            time.sleep(0.1)
        listed = run(after)
    finally:
        server.terminate()
        _out, err = server.communicate(timeout=15)
    assert server.returncode == 0, err.decode()[-2000:]
    assert "GROUP\tbilling\tLITERAL\tUser:alice\t*\tREAD\tALLOW" in listed.splitlines(), listed
