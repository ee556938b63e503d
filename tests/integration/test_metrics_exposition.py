"""What /metrics exposes besides the request counters: process and Python series, build info,
loading, every group state, no `_created` series, OpenMetrics on request, long-poll waits kept out
of request latency, per-group gauges, failed authentications and refused connections."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.core.consumer.group import CONSUMER_GROUP_STATES
from coordinator.core.state import GroupState
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.integration.test_metrics import delta, join_and_sync, scrape, wait_for_sample
from tests.support.ports import free_port, wait_http_ok
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture
def metered(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    port = free_port()
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", {"metrics-port": str(port)}) as server:
        # The Kafka listener opens before the groups are loaded: what these tests read is the
        # state after loading (/readyz turns 200 once loading has ended).
        wait_http_ok(f"http://127.0.0.1:{port}/readyz")
        yield server, port


def _get(port: int, accept: str | None = None) -> tuple[str, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if accept is not None:
        request.add_header("Accept", accept)
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def test_process_build_loading_and_every_group_state(metered: tuple[ServerProcess, int]) -> None:
    _server, port = metered
    # Loading ends in the background after the listener opens: polled for, never assumed.
    wait_for_sample(port, "coordinator_loading", 0)
    content_type, text = _get(port)
    assert content_type.startswith("text/plain; version=0.0.4")
    samples = scrape(port)
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"):
        assert samples[name] > 0
    assert any(key.startswith("python_info{") for key in samples)
    assert any(key.startswith("python_gc_collections_total{") for key in samples)
    build = [key for key in samples if key.startswith("coordinator_build_info{")]
    assert len(build) == 1 and 'version="' in build[0] and 'python="3.' in build[0]
    assert samples[build[0]] == 1
    states = {*(state.value for state in GroupState), *CONSUMER_GROUP_STATES}
    for state in states:
        assert samples[f'coordinator_groups{{state="{state}"}}'] == 0
    assert "_created" not in text
    assert "NONE" not in text and 'error="' not in text  # one label for outcomes: result


def test_openmetrics_is_negotiated(metered: tuple[ServerProcess, int]) -> None:
    _server, port = metered
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    content_type, text = _get(port, accept)
    assert content_type.startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n")
    assert "# TYPE coordinator_requests counter" in text
    assert "_created" not in text


def test_long_poll_waits_are_not_request_latency(metered: tuple[ServerProcess, int]) -> None:
    server, port = metered
    fetch = FetchRequest(replica_id=-1, max_wait_ms=600, min_bytes=1, topics=[])
    wait_http_ok(f"http://127.0.0.1:{port}/readyz")
    with WireClient(server.bootstrap) as client:
        before = scrape(port)
        started = time.monotonic()
        assert client.request(ApiKey.FETCH, 4, fetch).error_code == 0
        assert time.monotonic() - started >= 0.5  # the standalone broker did wait
        after = scrape(port)
    assert delta(after, before, 'coordinator_request_latency_seconds_count{api="fetch",version="4"}') == 1
    assert delta(after, before, 'coordinator_request_latency_seconds_sum{api="fetch",version="4"}') < 0.3
    assert delta(after, before, 'coordinator_request_parked_seconds_count{api="fetch"}') == 1
    assert delta(after, before, 'coordinator_request_parked_seconds_sum{api="fetch"}') >= 0.5


def test_per_group_gauges(tmp_path: Path) -> None:
    port = free_port()
    # Retention checks would remove the emptied group "h" (no offsets) before it is scraped.
    extra = {"metrics-port": str(port), "offsets-retention-check-interval-ms": "600000"}
    with (
        running_server(f"sqlite:///{tmp_path / 'c.db'}", extra) as server,
        WireClient(server.bootstrap) as client,
    ):
        wait_http_ok(f"http://127.0.0.1:{port}/readyz")
        client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic("t", 1, 1)]))
        member_id, generation = join_and_sync(client, "")
        committed_at = time.time()
        commit = OffsetCommitRequest(
            "g",
            generation,
            member_id,
            topics=[OffsetCommitRequestTopic("t", partitions=[OffsetCommitRequestPartition(0, 5)])],
        )
        assert client.request(ApiKey.OFFSET_COMMIT, 7, commit).topics[0].partitions[0].error_code == 0
        # A second member with the shortest session joins, then never heartbeats: it expires.
        protocols = [JoinGroupRequestProtocol("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00")]
        samples = scrape(port)
        with WireClient(server.bootstrap) as other:
            request = JoinGroupRequest("h", 1000, 30000, "", None, "consumer", protocols)
            assert other.request(ApiKey.JOIN_GROUP, 3, request).error_code == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            samples = scrape(port)
            if samples.get('coordinator_group_session_expiries{group="h"}', 0) >= 1:
                break
            time.sleep(0.2)
    assert samples['coordinator_group_members{group="g"}'] == 1
    assert samples['coordinator_group_state{group="g",state="Stable"}'] == 1
    assert abs(samples['coordinator_group_last_commit_timestamp_seconds{group="g"}'] - committed_at) < 5
    assert samples['coordinator_group_session_expiries{group="h"}'] == 1
    assert samples['coordinator_group_members{group="h"}'] == 0


def test_failed_authentications_and_refused_connections(tmp_path: Path) -> None:
    port = free_port()
    extra = {
        "metrics-port": str(port),
        "security-protocol": "SASL_PLAINTEXT",
        "max-connections-per-ip": "2",
        "connection-failed-authentication-delay-ms": "0",
    }
    with running_server("memory://", extra) as server:
        wait_http_ok(f"http://127.0.0.1:{port}/readyz")
        before = scrape(port)
        assert before['coordinator_failed_authentications_total{reason="bad_credentials"}'] == 0
        assert before['coordinator_connection_rejections_total{reason="max_connections_per_ip"}'] == 0
        with WireClient(server.bootstrap) as client:
            handshake = SaslHandshakeRequest(mechanism="PLAIN")
            assert client.request(ApiKey.SASL_HANDSHAKE, 1, handshake).error_code == 0
            login = SaslAuthenticateRequest(auth_bytes=b"\0nobody\0wrong")
            answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, login)
            assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        deadline = time.monotonic() + 5
        while scrape(port)["coordinator_connections"] and time.monotonic() < deadline:
            time.sleep(0.05)  # the login's connection is gone; two more fill the quota of two
        with (
            WireClient(server.bootstrap),
            WireClient(server.bootstrap),
            WireClient(server.bootstrap) as third,
        ):
            assert third.is_closed_by_peer()
        after = scrape(port)
    assert delta(after, before, 'coordinator_failed_authentications_total{reason="bad_credentials"}') == 1
    assert (
        delta(after, before, 'coordinator_connection_rejections_total{reason="max_connections_per_ip"}') == 1
    )
