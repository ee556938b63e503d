"""`coordinator serve` starts inside a pod of a Kubernetes Service named `coordinator`."""

from __future__ import annotations

import pytest

from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from tests.support.server import start_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

SERVICE_VARIABLES = {
    "COORDINATOR_SERVICE_HOST": "10.96.0.12",
    "COORDINATOR_SERVICE_PORT": "9092",
    "COORDINATOR_SERVICE_PORT_KAFKA": "9092",
    "COORDINATOR_PORT": "tcp://10.96.0.12:9092",
    "COORDINATOR_PORT_9092_TCP": "tcp://10.96.0.12:9092",
    "COORDINATOR_PORT_9092_TCP_PROTO": "tcp",
    "COORDINATOR_PORT_9092_TCP_PORT": "9092",
    "COORDINATOR_PORT_9092_TCP_ADDR": "10.96.0.12",
}


def test_serve_starts_with_the_service_variables_set() -> None:
    server = start_server("memory://", environment=SERVICE_VARIABLES, timeout=20)
    try:
        with WireClient(server.bootstrap) as client:
            answer = client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            assert answer.error_code == 0 and answer.api_keys
    finally:
        assert server.stop() == 0
    assert "unknown setting" not in server.log_text()
