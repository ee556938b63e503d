"""Kafka 4.4's Java consumer against the Kafka 4.4 versions we serve.

With its defaults (metadata.recovery.strategy=rebootstrap and
metadata.cluster.check.enable=true: it sends KIP-1242's expected cluster and node in
ApiVersions v5), joins its group here and through the gateway: our check never refuses the
identity we present (docs/protocol.md#kip-1242-the-cluster-and-node-a-client-expects)."""

from __future__ import annotations

import subprocess
import urllib.request

import pytest

from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from tests.support.kafka_broker import KafkaCluster, java_command
from tests.support.ports import free_port
from tests.support.server import running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka


def _console_consumer(bootstrap: str, group: str, *properties: str) -> subprocess.CompletedProcess[str]:
    command = java_command(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server", bootstrap,
        "--topic", "kip1242-events",
        "--group", group,
        "--timeout-ms", "4000",
        *[arg for prop in properties for arg in ("--consumer-property", prop)],
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


def test_java_consumer_protocol_commits_by_topic_id() -> None:
    """The KIP-848 consumer commits and fetches with v10 (topic ids) once we advertise it; the
    offsets land under the topic's name."""
    metrics_port = free_port()
    with running_server("memory://", {"metrics-port": str(metrics_port)}) as server:
        with WireClient(server.bootstrap) as client:
            created = client.request(
                ApiKey.CREATE_TOPICS,
                7,
                CreateTopicsRequest([CreatableTopic("kip1242-events", 2, 1)], timeout_ms=5000),
            )
            assert created.topics[0].error_code == 0
        ran = _console_consumer(
            server.bootstrap, "v10-commits", "group.protocol=consumer", "auto.commit.interval.ms=200"
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
        with WireClient(server.bootstrap) as client:
            fetched = client.request(
                ApiKey.OFFSET_FETCH,
                9,
                OffsetFetchRequest(groups=[OffsetFetchRequestGroup("v10-commits", topics=None)]),
            )
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
    # The client used the Kafka 4.4 versions: ApiVersions v5 (KIP-1242), OffsetCommit and
    # OffsetFetch v10 (topic ids), and every one was answered without a top-level error.
    for api, version in (("api_versions", 5), ("offset_commit", 10), ("offset_fetch", 10)):
        counted = f'coordinator_requests_total{{api="{api}",result="ok",version="{version}"}}'
        assert counted in metrics, (
            counted,
            [line for line in metrics.splitlines() if "requests_total" in line],
        )
    assert [(t.name, sorted((p.partition_index, p.committed_offset) for p in t.partitions))
            for t in fetched.groups[0].topics] == [("kip1242-events", [(0, 0), (1, 0)])]  # fmt: skip
