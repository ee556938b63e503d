"""Apache Kafka 4.4 itself, for the tests that compare with it or run on it: a KRaft cluster of one
or more combined broker/controller nodes on free loopback ports, its log dirs in a temporary
directory, stopped by PID.

The jars come from ``tests/java/target/lib`` (``.ci/setup`` resolves them with Maven). Share groups
(``share.version``) and streams groups (``streams.version``) are on, as on any new 4.4 cluster; the
timeouts are the small ones a test wants. Readiness is polled: every node answers Metadata with the
whole cluster, and the group coordinator answers FindCoordinator without an error.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from protocol.apis import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from tests.support.ports import free_port
from tests.support.wire_client import WireClient

REPO = Path(__file__).resolve().parents[2]
KAFKA_LIB = REPO / "tests" / "java" / "target" / "lib"
KAFKA_VERSION = "4.4.0"


class KafkaUnavailable(Exception):
    """The Kafka jars or a Java runtime are missing here (``bash .ci/setup`` resolves them)."""


def kafka_classpath() -> str:
    if not (KAFKA_LIB / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise KafkaUnavailable(f"no Kafka {KAFKA_VERSION} jars in {KAFKA_LIB}: run `bash .ci/setup`")
    if shutil.which("java") is None:
        raise KafkaUnavailable("no java on PATH")
    return f"{KAFKA_LIB}/*"


def java_command(main_class: str, *args: str, heap: str = "-Xmx512m") -> list[str]:
    """A command line that runs one of Kafka's main classes (the broker, a tool) on the 4.4 jars."""
    return [
        "java",
        heap,
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        kafka_classpath(),
        main_class,
        *args,
    ]


@dataclass
class KafkaNode:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    # With users: a SASL_PLAINTEXT listener (PLAIN, these users) beside PLAINTEXT, and the
    # StandardAuthorizer on (see running_kafka).
    sasl_users: dict[str, str] = field(default_factory=dict)
    sasl_port: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.directory / "kafka.out"


@dataclass
class KafkaCluster:
    """A running KRaft cluster; ``bootstrap`` lists every node."""

    nodes: list[KafkaNode]
    cluster_id: str
    extra_properties: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> KafkaNode:
        return next(node for node in self.nodes if node.node_id == node_id)

    def stop_node(self, node_id: int) -> None:
        _stop(self.node(node_id))

    def start_node(self, node_id: int) -> None:
        node = self.node(node_id)
        _launch(node)
        _wait_ready(self, [node])

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for node in self.nodes:
            text = node.log_file.read_text(errors="replace").splitlines() if node.log_file.exists() else []
            parts.append(f"--- node {node.node_id} ---\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)


def _properties(node: KafkaNode, nodes: list[KafkaNode], extra: dict[str, str]) -> str:
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes)
    replication = str(min(3, len(nodes)))
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.directory / "logs"),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "5",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        **{
            f"group.{kind}.{key}": value
            for kind in ("consumer", "share", "streams")
            for key, value in (
                ("min.heartbeat.interval.ms", "500"),
                ("heartbeat.interval.ms", "500"),
                ("min.session.timeout.ms", "1000"),
            )
        },
        "log.flush.interval.messages": str(2**62),
        "auto.create.topics.enable": "true",
        "unstable.api.versions.enable": "false",
    }
    if node.sasl_users:
        users = " ".join(f'user_{user}="{password}"' for user, password in node.sasl_users.items())
        settings |= {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{node.sasl_port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            ),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # The PLAINTEXT listener (readiness, inter-broker, the tests' set-up) is a super user.
            "super.users": "User:ANONYMOUS;User:admin",
        }
    settings.update(extra)
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _launch(node: KafkaNode) -> None:
    log = node.log_file.open("ab")
    node.process = subprocess.Popen(
        java_command("kafka.Kafka", str(node.properties_file), heap="-Xmx768m"),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()


def _stop(node: KafkaNode) -> None:
    process = node.process
    node.process = None
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def _answers(node: KafkaNode, cluster_size: int) -> bool:
    try:
        with WireClient(node.bootstrap, timeout=5) as client:
            metadata = client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
            if len(metadata.brokers) != cluster_size or metadata.controller_id < 0:
                return False
            found = client.request(
                ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["readiness"])
            )
            return all(c.error_code == 0 for c in found.coordinators)
    except (OSError, ConnectionError):
        return False


def _wait_ready(cluster: KafkaCluster, nodes: list[KafkaNode], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(nodes)
    while waiting:
        for node in list(waiting):
            if node.process is None or node.process.poll() is not None:
                raise RuntimeError(f"Kafka node {node.node_id} exited:\n{cluster.log_tail()}")
            if _answers(node, len(cluster.nodes)):
                waiting.remove(node)
        if waiting and time.monotonic() > deadline:
            raise TimeoutError(f"Kafka did not become ready in {timeout_s} s:\n{cluster.log_tail()}")
        if waiting:
            time.sleep(0.2)


@contextmanager
def running_kafka(
    size: int = 1, extra_properties: dict[str, str] | None = None, sasl_users: dict[str, str] | None = None
) -> Iterator[KafkaCluster]:
    """Start a KRaft cluster of ``size`` combined nodes; stop every node by PID on exit. With
    ``sasl_users``, each node also has a SASL_PLAINTEXT listener (PLAIN) and the StandardAuthorizer
    (User:admin and the PLAINTEXT listener's User:ANONYMOUS are super users)."""
    extra = dict(extra_properties or {})
    kafka_classpath()  # fails early, with the set-up step to run, when the jars are missing
    directory = Path(tempfile.mkdtemp(prefix="kafka-"))
    nodes = [
        KafkaNode(
            node_id=i + 1,
            port=free_port(),
            controller_port=free_port(),
            directory=directory / f"node{i + 1}",
            sasl_users=dict(sasl_users or {}),
            sasl_port=free_port() if sasl_users else 0,
        )
        for i in range(size)
    ]
    cluster = KafkaCluster(nodes=nodes, cluster_id=_cluster_id(), extra_properties=extra)
    try:
        for node in nodes:
            node.directory.mkdir(parents=True)
            node.properties_file.write_text(_properties(node, nodes, extra))
            formatted = subprocess.run(
                java_command(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster.cluster_id,
                    "-c",
                    str(node.properties_file),
                    "--ignore-formatted",
                    heap="-Xmx256m",
                ),
                check=False,
                capture_output=True,
                text=True,
                timeout=120,
            )
            if formatted.returncode != 0:
                raise RuntimeError(
                    f"formatting Kafka's log dir failed:\n{formatted.stdout}{formatted.stderr}"
                )
        for node in nodes:
            _launch(node)
        _wait_ready(cluster, nodes)
        yield cluster
    finally:
        for node in nodes:
            _stop(node)
        if os.environ.get("KAFKA_TESTS_KEEP_LOGS") is None:
            shutil.rmtree(directory, ignore_errors=True)


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding, never starting
    with "-" (the storage tool would read it as an option; Kafka's own ids never do)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
