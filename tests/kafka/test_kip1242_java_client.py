"""Kafka 4.4's Java consumer, with its defaults (metadata.recovery.strategy=rebootstrap and
metadata.cluster.check.enable=true: it sends KIP-1242's expected cluster and node in
ApiVersions v5), joins its group here and through the gateway: our check never refuses the
identity we present (docs/protocol.md#kip-1242-the-cluster-and-node-a-client-expects)."""

from __future__ import annotations

import subprocess

import pytest

from protocol.apis import ApiKey
from protocol.messages.list_groups import ListGroupsRequest
from tests.support.kafka_broker import KafkaCluster, java_command
from tests.support.server import running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka


def _console_consumer(bootstrap: str, group: str) -> subprocess.CompletedProcess[str]:
    command = java_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server", bootstrap,
        "--topic", "kip1242-events",
        "--group", group,
        "--timeout-ms", "4000",
    )  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _groups(bootstrap: str) -> dict[str, str]:
    with WireClient(bootstrap) as client:
        listed = client.request(ApiKey.LIST_GROUPS, 5, ListGroupsRequest())
    return {g.group_id: g.group_state for g in listed.groups}


def test_java_consumer_with_cluster_check_joins_a_standalone_coordinator() -> None:
    with running_server("memory://", {"node-id": "3"}) as server:
        ran = _console_consumer(server.bootstrap, "kip1242-standalone")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "REBOOTSTRAP" not in ran.stderr.upper(), ran.stderr[-3000:]
        assert _groups(server.bootstrap).get("kip1242-standalone") == "Empty", server.log_text()[-3000:]
        assert "kip1242-standalone: generation 1 formed" in server.log_text()


def test_java_consumer_with_cluster_check_joins_through_the_gateway(kafka_broker: KafkaCluster) -> None:
    settings = {"upstream-bootstrap-servers": kafka_broker.bootstrap, "upstream-metadata-refresh-ms": "500"}
    with running_server("memory://", settings) as gateway:
        ran = _console_consumer(gateway.bootstrap, "kip1242-gateway")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "REBOOTSTRAP" not in ran.stderr.upper(), ran.stderr[-3000:]
        assert _groups(gateway.bootstrap).get("kip1242-gateway") == "Empty", gateway.log_text()[-3000:]
        assert "kip1242-gateway: generation 1 formed" in gateway.log_text()
