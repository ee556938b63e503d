"""Connection and group limits (issue 9): max.connections, max.connections.per.ip,
connections.max.idle.ms (idle and slow-loris), queued.max.requests, socket.request.max.bytes and
group.max.groups."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from pathlib import Path

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.server.limits import ConnectionLimits
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.coordinator.harness import Harness, classic_group_of
from tests.support.server import running_server
from tests.support.wire_client import WireClient


# ---- group.max.groups (pure core) ----------------------------------------------------------
def test_group_max_groups_refuses_new_groups_but_serves_existing() -> None:
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_max_groups=2))
    h.join("a", version=3)
    h.join("b", version=3)
    assert h.join("c", version=3).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert classic_group_of(h.coordinator, "a") is not None
    assert classic_group_of(h.coordinator, "c") is None
    # A simple-consumer commit would create a group too.
    reply = h.commit("d", {("t", 0): 5})
    assert {p.error_code for t in reply.response.topics for p in t.partitions} == {
        ErrorCode.GROUP_MAX_SIZE_REACHED
    }
    assert classic_group_of(h.coordinator, "d") is None
    # Existing groups keep accepting members and commits.
    h.join("a", version=3)
    assert len(h.group("a").members) == 2
    reply = h.commit("b", {("t", 0): 5})
    assert reply.answered


# ---- ConnectionLimits (unit, fake clock) -------------------------------------------------------
class _FakeSplitter:
    buffered = 0


class _FakeConn:
    def __init__(self, host: str) -> None:
        self.client_host = host
        self.peer = f"{host}:1"
        self.seen = False
        self.idle_since = 0.0
        self.frames_received = 0
        self.partial_frames_mark = 0
        self.partial_since: float | None = None
        self.in_flight: object | None = None
        self.splitter = _FakeSplitter()
        self.aborted: str | None = None

    def abort(self, reason: str) -> None:
        self.aborted = reason


def test_admission_counts_total_and_per_ip() -> None:
    now = [0.0]
    limits = ConnectionLimits(3, 2, 1000, clock=lambda: now[0])
    a1, a2, a3, b1, c1 = (_FakeConn(h) for h in ("a", "a", "a", "b", "c"))
    assert limits.admit(a1) and limits.admit(a2)  # type: ignore[arg-type]
    assert not limits.admit(a3)  # type: ignore[arg-type]
    assert limits.admit(b1)  # type: ignore[arg-type]
    assert not limits.admit(c1)  # type: ignore[arg-type]
    assert limits.refused == 2
    limits.release(a1)  # type: ignore[arg-type]
    limits.release(a1)  # type: ignore[arg-type]  # releasing twice is harmless
    assert limits.admit(c1)  # type: ignore[arg-type]
    assert limits.per_ip == {"a": 1, "b": 1, "c": 1}


def test_sweep_closes_idle_and_slow_loris_but_not_active_or_parked() -> None:
    now = [0.0]
    limits = ConnectionLimits(100, 100, 1000, clock=lambda: now[0])
    idle, active, parked, loris, busy = (_FakeConn("h") for _ in range(5))
    for conn in (idle, active, parked, loris, busy):
        assert limits.admit(conn)  # type: ignore[arg-type]
    parked.in_flight = object()
    loris.splitter = _FakeSplitter()
    loris.splitter.buffered = 3
    busy.splitter = _FakeSplitter()
    busy.splitter.buffered = 3
    for step in range(1, 6):
        now[0] = step * 0.3
        active.seen = True
        loris.seen = True  # trickles a byte now and then, but never completes a frame
        busy.seen = True
        busy.frames_received += 1  # completes frames all the time, always has a partial one
        limits.sweep()
    assert idle.aborted is not None and "idle" in idle.aborted
    assert loris.aborted is not None and "partial request frame" in loris.aborted
    assert active.aborted is None
    assert parked.aborted is None
    assert busy.aborted is None


# ---- the real server ---------------------------------------------------------------------------
def _api_versions(client: WireClient) -> int:
    response = client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    return int(response.error_code)


def _refused(bootstrap: str) -> bool:
    """True when the server closes a new connection without answering."""
    try:
        with WireClient(bootstrap, timeout=5) as client:
            client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
    except (ConnectionError, OSError):
        return True
    return False


@pytest.mark.integration
def test_connections_past_the_limit_are_refused_while_others_keep_working(tmp_path: Path) -> None:
    extra = {"max-connections": "20", "max-connections-per-ip": "5"}
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", extra) as server:
        clients = [WireClient(server.bootstrap) for _ in range(5)]
        try:
            for client in clients:
                assert _api_versions(client) == 0
            # Load: many more connection attempts than the per-IP limit allows.
            refused = sum(_refused(server.bootstrap) for _ in range(30))
            assert refused == 30
            for client in clients:  # the existing ones are untouched
                assert _api_versions(client) == 0
                response = client.request(ApiKey.FIND_COORDINATOR, 1, FindCoordinatorRequest(key="g"))
                assert response.error_code == 0
            clients.pop().close()
            deadline = time.monotonic() + 5
            while _refused(server.bootstrap) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _refused(server.bootstrap)
        finally:
            for client in clients:
                client.close()
        assert "max.connections.per.ip (5) reached" in server.log_text()


@pytest.mark.integration
def test_slow_loris_and_idle_connections_are_closed(tmp_path: Path) -> None:
    extra = {"connections-max-idle-ms": "500"}
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", extra) as server:
        host, port = server.bootstrap.split(":")
        loris = socket.create_connection((host, int(port)), timeout=10)
        loris.sendall(struct.pack(">i", 100) + b"\x00\x12")  # a length prefix and 2 of 100 bytes
        idle = socket.create_connection((host, int(port)), timeout=10)
        with WireClient(server.bootstrap) as active:
            started = time.monotonic()
            # The active client keeps talking; the other two go silent.
            while time.monotonic() - started < 1.5:
                assert _api_versions(active) == 0
                time.sleep(0.1)
            for sock in (loris, idle):
                sock.settimeout(5)
                with contextlib.suppress(ConnectionResetError):
                    assert sock.recv(1) == b""
                sock.close()
            assert _api_versions(active) == 0
        log = server.log_text()
        assert "partial request frame not completed" in log
        assert "idle for longer than connections.max.idle.ms (500 ms)" in log


@pytest.mark.integration
def test_oversized_request_is_a_logged_close(tmp_path: Path) -> None:
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", {"socket-request-max-bytes": "2048"}) as server:
        with WireClient(server.bootstrap) as client:
            client.send_raw(struct.pack(">i", 4096) + b"\x00" * 16)
            assert client.is_closed_by_peer()
        with WireClient(server.bootstrap) as client:
            assert _api_versions(client) == 0
        assert "socket.request.max.bytes" in server.log_text()
