"""docker/docker-compose.yml for real: each profile's images build, its containers become
healthy, kafka-python joins and commits through the published port, offsets survive restarts
and the stack stops cleanly. One function per profile."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.docker.base_images import available, service_image
from tests.docker.clients import committed, consume_and_commit, join_and_commit, produce
from tests.docker.compose import ComposeProject
from tests.docker.conftest import Stack
from tests.support.ports import free_port
from tests.support.server import REPO
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(1800)]

# Characters that break a password put into a URL unescaped.
AWKWARD_PASSWORD = "p@ss:w/rd%?#"


def _bootstrap(project: ComposeProject, port_variable: str) -> str:
    return f"127.0.0.1:{project.variables[port_variable]}"


def _files_belong_to_10001(project: ComposeProject, service: str, path: str) -> None:
    assert project.exec(service, "stat", "-c", "%u:%g", path).split() == ["10001:10001"]


def _only_named_volumes(project: ComposeProject, expected: set[tuple[str, str]]) -> None:
    """No anonymous volume: each volume mount is one of the project's named volumes."""
    mounts = {
        (name.removeprefix(f"{project.name}_"), destination)
        for _, name, destination in project.volume_mounts()
    }
    assert mounts == expected


def _recreate(project: ComposeProject, *services: str) -> None:
    """New containers on the same volumes, as after an image upgrade."""
    project.compose("up", "--detach", "--no-build", "--force-recreate", *services, timeout=180)
    for service in services:
        project.wait_healthy(service)


def _http_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _eventually(check: str, probe: object, timeout: float = 90) -> object:
    """Call ``probe`` until it answers something true (HTTP and connection errors count as not
    yet); answers that."""
    assert callable(probe)
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OSError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(1)
    raise AssertionError(f"{check}: not after {timeout} s (last answer: {last!r})")


def _stop_cleanly(project: ComposeProject) -> None:
    project.compose("stop", timeout=120)
    assert set(project.stopped_exit_codes().values()) <= {0}


def test_default_profile(stack: Stack) -> None:
    project = stack.project()
    try:
        project.compose("up", "--detach", "--no-build")
        project.wait_healthy("coordinator")
        bootstrap = _bootstrap(project, "COORDINATOR_KAFKA_PORT")
        offsets = join_and_commit(bootstrap, "billing", "orders", partitions=3, first_offset=40)
        assert committed(bootstrap, "billing", "orders") == offsets

        project.compose("restart", "coordinator", timeout=120)
        project.wait_healthy("coordinator")
        assert committed(bootstrap, "billing", "orders") == offsets
        _files_belong_to_10001(project, "coordinator", "/data/coordinator.db")
        _only_named_volumes(project, {("coordinator-data", "/data")})
        _recreate(project, "coordinator")
        assert committed(bootstrap, "billing", "orders") == offsets
        _stop_cleanly(project)
    finally:
        project.down()


def test_postgres_profile(stack: Stack) -> None:
    project = stack.project("postgres", POSTGRES_PASSWORD=AWKWARD_PASSWORD)
    try:
        project.compose("up", "--detach", "--no-build", "coordinator-postgres")
        project.wait_healthy("postgres")
        project.wait_healthy("coordinator-postgres")
        bootstrap = _bootstrap(project, "COORDINATOR_POSTGRES_KAFKA_PORT")
        offsets = join_and_commit(bootstrap, "billing", "orders", partitions=3, first_offset=70)
        assert committed(bootstrap, "billing", "orders") == offsets
        _only_named_volumes(project, {("postgres-data", "/var/lib/postgresql/data")})

        project.compose("restart", "coordinator-postgres", timeout=120)
        project.wait_healthy("coordinator-postgres")
        assert committed(bootstrap, "billing", "orders") == offsets

        # PostgreSQL restarts under the running coordinator, which reconnects by itself.
        project.compose("restart", "postgres", timeout=120)
        project.wait_healthy("postgres")
        project.wait_healthy("coordinator-postgres")
        more = join_and_commit(bootstrap, "shipping", "orders", partitions=3, first_offset=90)
        assert committed(bootstrap, "shipping", "orders") == more
        assert committed(bootstrap, "billing", "orders") == offsets
        _recreate(project, "postgres", "coordinator-postgres")
        assert committed(bootstrap, "billing", "orders") == offsets
        assert committed(bootstrap, "shipping", "orders") == more
        _stop_cleanly(project)
    finally:
        project.down()


def _coordinator_node(bootstrap: str, group: str) -> int | None:
    """The node id FindCoordinator answers for ``group`` (None while its shard has no owner)."""
    with WireClient(bootstrap, client_id="compose-check") as client:
        response = client.request(
            ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
        )
    [answer] = response.coordinators
    return answer.node_id if answer.error_code == 0 else None


def _coordinators(bootstrap: str, groups: list[str], timeout: float = 120) -> dict[str, int]:
    """Each group's coordinator, asked until every group has one and all three nodes have shards."""
    deadline = time.monotonic() + timeout
    while True:
        found = {group: _coordinator_node(bootstrap, group) for group in groups}
        if None not in found.values() and set(found.values()) == {1, 2, 3}:
            return {group: node for group, node in found.items() if node is not None}
        assert time.monotonic() < deadline, f"the three nodes did not split the shards: {found}"
        time.sleep(1)


def _partitions_known(bootstrap: str, topic: str) -> int:
    """How many partitions of ``topic`` a node's Metadata lists (0: unknown there)."""
    request = MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    with WireClient(bootstrap, client_id="compose-check") as client:
        [answer] = client.request(ApiKey.METADATA, 12, request).topics
    return len(answer.partitions) if answer.error_code == 0 else 0


def _create_topic_everywhere(bootstraps: list[str], topic: str, partitions: int, timeout: float = 60) -> None:
    """Create ``topic`` through the first node and wait until every node lists it. Nodes learn
    other nodes' topics from the database at each lease renewal; consuming before that would let a
    node that has not seen the topic yet auto-create it anew."""
    admin = KafkaAdminClient(bootstrap_servers=bootstraps[0], request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    deadline = time.monotonic() + timeout
    while [_partitions_known(b, topic) for b in bootstraps] != [partitions] * len(bootstraps):
        assert time.monotonic() < deadline, f"not every node learnt topic {topic}"
        time.sleep(0.5)


def test_cluster_profile(stack: Stack) -> None:
    ports = {
        f"COORDINATOR_NODE{n}_{kind}": str(free_port())
        for n in (1, 2, 3)
        for kind in ("KAFKA_PORT", "METRICS_HOST_PORT")
    }
    project = stack.project("cluster", COORDINATOR_LEASE_MS="3000", **ports)
    nodes = [f"coordinator-node-{n}" for n in (1, 2, 3)]
    bootstraps = [_bootstrap(project, f"COORDINATOR_NODE{n}_KAFKA_PORT") for n in (1, 2, 3)]
    try:
        project.compose("up", "--detach", "--no-build", *nodes)
        project.wait_healthy("postgres")
        for node in nodes:
            project.wait_healthy(node)
        # FindCoordinator on any node names the owner of the group's shard: all three own some.
        coordinators = _coordinators(bootstraps[0], [f"group-{i}" for i in range(30)])
        assert _coordinators(bootstraps[2], list(coordinators)) == coordinators
        _create_topic_everywhere(bootstraps, "orders", 3)
        # One group per node: the client bootstraps on node 1 and follows FindCoordinator.
        chosen = {node: next(g for g, n in coordinators.items() if n == node) for node in (1, 2, 3)}
        offsets = {
            group: join_and_commit(bootstraps[0], group, "orders", partitions=3, first_offset=10 * node)
            for node, group in chosen.items()
        }
        for group, expected in offsets.items():
            assert committed(bootstraps[1], group, "orders") == expected
        _stop_cleanly(project)
    finally:
        project.down()


def test_gateway_profile(stack: Stack) -> None:
    """Records go through the gateway to the upstream broker and back; the group and its offsets
    live in the coordinator, not upstream."""
    project = stack.project("gateway")
    try:
        project.compose("up", "--detach", "--no-build", "coordinator-gateway")
        project.wait_healthy("coordinator-gateway")
        bootstrap = _bootstrap(project, "COORDINATOR_GATEWAY_KAFKA_PORT")
        sent = produce(bootstrap, "payments", partitions=3, count=600)
        received, offsets = consume_and_commit(bootstrap, "ledger", "payments", count=len(sent))
        assert sorted(received) == sorted(sent)
        assert sum(offsets.values()) == len(sent)
        assert committed(bootstrap, "ledger", "payments") == offsets

        # Upstream's own coordinator never saw the group: nothing there to import.
        upstream = project.compose(
            "exec", "-T", "coordinator-gateway", "coordinator", "offsets", "import",
            "--from-kafka", "upstream:9092", "--group", "ledger",
            "--bootstrap", f"127.0.0.1:{project.variables['COORDINATOR_GATEWAY_KAFKA_PORT']}",
            timeout=60, check=False,
        )  # fmt: skip
        assert "'ledger' has no committed offsets on upstream:9092" in upstream.stderr, upstream.stderr

        project.compose("restart", "coordinator-gateway", timeout=120)
        project.wait_healthy("coordinator-gateway")
        assert committed(bootstrap, "ledger", "payments") == offsets
        _only_named_volumes(project, {("coordinator-gateway-data", "/data")})
        _stop_cleanly(project)
    finally:
        project.down()


def test_monitoring_profile(stack: Stack) -> None:
    """Prometheus scrapes the coordinator with the alert rules of ops/prometheus loaded; Grafana
    serves the ops/grafana dashboard where its image can be had."""
    project = stack.project("monitoring")
    grafana = available(stack.docker, service_image(project.compose("config").stdout, "grafana"))
    if grafana:
        project.profiles.append("grafana")
    try:
        project.compose("up", "--detach", "--no-build", *(["grafana"] if grafana else ["prometheus"]))
        project.wait_healthy("coordinator")
        bootstrap = _bootstrap(project, "COORDINATOR_KAFKA_PORT")
        join_and_commit(bootstrap, "billing", "orders", partitions=3, first_offset=10)

        prometheus = f"http://127.0.0.1:{project.variables['PROMETHEUS_HOST_PORT']}"

        def target_health() -> list[str]:
            found = _http_json(f"{prometheus}/api/v1/targets")
            assert isinstance(found, dict)
            return [t["health"] for t in found["data"]["activeTargets"] if t["health"] == "up"]

        _eventually("the coordinator is a healthy Prometheus target", target_health)
        rules = _http_json(f"{prometheus}/api/v1/rules")
        assert isinstance(rules, dict)
        loaded = {rule["name"] for group in rules["data"]["groups"] for rule in group["rules"]}
        rules_file = (REPO / "ops" / "prometheus" / "coordinator-alerts.yml").read_text()
        expected = set(re.findall(r"^\s*- (?:alert|record):\s*(\S+)", rules_file, re.MULTILINE))
        assert expected and loaded == expected

        query = urllib.parse.quote("sum(coordinator_offset_commits_total)")

        def commits() -> float:
            found = _http_json(f"{prometheus}/api/v1/query?query={query}")
            assert isinstance(found, dict)
            result = found["data"]["result"]
            return float(result[0]["value"][1]) if result else 0.0

        assert _eventually("the commits reach Prometheus", lambda: commits() >= 3)
        if grafana:
            grafana_url = f"http://127.0.0.1:{project.variables['GRAFANA_HOST_PORT']}"
            _eventually("Grafana is up", lambda: _http_json(f"{grafana_url}/api/health"))
            dashboards = _eventually(
                "Grafana has the dashboard", lambda: _http_json(f"{grafana_url}/api/search?type=dash-db")
            )
            assert isinstance(dashboards, list) and dashboards, dashboards
        _stop_cleanly(project)
    finally:
        project.down()


@pytest.mark.slow
def test_loadtest_profile(stack: Stack, tmp_path: Path) -> None:
    out = tmp_path / "out"  # missing, so Docker creates it, owned by root
    project = stack.project(
        "loadtest", LOADTEST_OUT=str(out), LOADTEST_DURATION_S=os.environ.get("LOADTEST_DURATION_S", "20")
    )
    try:
        project.compose("up", "--no-build", "--exit-code-from", "loadtest", "loadtest", timeout=900)
        summary = json.loads((out / "summary.json").read_text())
        assert summary, "the load test wrote an empty summary"
        assert (out / "report.html").is_file()
    finally:
        project.down()
