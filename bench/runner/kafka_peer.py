"""Apache Kafka 4.4 as the benchmark's peer (``--peer kafka``): one KRaft node (broker and
controller) with Kafka's defaults, pinned to the server CPU like ours, started fresh per workload.

Kafka's defaults are kept on purpose (the log is not fsynced per write; its durability comes from
replication), except what a single node needs (replication factors of 1) and the initial rebalance
delay, which the runner sets on both servers alike (0 ms, 3 s for ``rebalance-delay``). Ready
means: the group coordinator answers FindCoordinator (``__consumer_offsets`` exists), so no
workload pays for creating it. The jars come from tests/java/target/lib (``.ci/setup``)."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from pathlib import Path

from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from runner.common import ROOT, SERVER_CPU
from runner.servers import Env, Server, free_port, proc_cpu_rss
from tests.support.wire_client import WireClient

KAFKA_LIB = ROOT / "tests" / "java" / "target" / "lib"
KAFKA_VERSION = "4.4.0"
HEAP = "-Xmx1g"
TOPIC_ALREADY_EXISTS = 36


def _java(main_class: str, *args: str) -> list[str]:
    return ["java", HEAP, "-cp", f"{KAFKA_LIB}/*", main_class, *args]


def _properties(workdir: Path, port: int, controller_port: int, delay_ms: int) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(workdir / "logs"),
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": str(delay_ms),
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _coordinator_ready(port: int) -> bool:
    try:
        with WireClient(f"127.0.0.1:{port}", timeout=5) as client:
            found = client.request(
                ApiKey.FIND_COORDINATOR,
                4,
                FindCoordinatorRequest(key_type=0, coordinator_keys=["bench-ready"]),
            )
        return all(c.error_code == 0 for c in found.coordinators)
    except (OSError, ConnectionError):
        return False


def start_kafka(env: Env, workdir: Path, delay_ms: int | None = 0) -> Server:
    if not (KAFKA_LIB / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise RuntimeError(f"no Kafka {KAFKA_VERSION} jars in {KAFKA_LIB}: run `bash .ci/setup`")
    port, controller_port = free_port(), free_port()
    properties = workdir / "server.properties"
    properties.write_text(_properties(workdir, port, controller_port, delay_ms or 0))
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    subprocess.run(
        _java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties)),
        check=True,
        capture_output=True,
        timeout=300,
    )
    log_path = workdir / "kafka.log"
    with log_path.open("wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            ["taskset", "-c", SERVER_CPU, *_java("kafka.Kafka", str(properties))],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = started + env.args.start_timeout
    while not _coordinator_ready(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait(10)
            raise RuntimeError(f"Kafka not ready:\n{log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    cpu, rss = proc_cpu_rss(proc.pid)
    return Server("peer", proc, port, time.monotonic() - started, log_path, cpu, rss, started)


def wait_committable(server: Server, topic: str, partitions: int, timeout: float = 60) -> None:
    """Create ``topic`` and wait until Kafka takes offset commits on every partition of it.

    Kafka answers OffsetCommit with UNKNOWN_TOPIC_OR_PARTITION for a while after CreateTopics (until
    the topic reaches the broker's metadata cache), and a generator that starts at once counts
    those quick error replies as commits."""
    deadline = time.monotonic() + timeout
    with WireClient(server.addr, timeout=10) as client:
        topics = [CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1)]
        created = client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=topics))
        failed = {t.error_code for t in created.topics} - {0, TOPIC_ALREADY_EXISTS}
        if failed:
            raise RuntimeError(f"Kafka: CreateTopics {topic}: error codes {sorted(failed)}")
        commit = OffsetCommitRequest(
            group_id="bench-ready",
            topics=[
                OffsetCommitRequestTopic(
                    name=topic, partitions=[OffsetCommitRequestPartition(i, 0) for i in range(partitions)]
                )
            ],
        )
        while True:
            answer = client.request(ApiKey.OFFSET_COMMIT, 8, commit)
            errors = {p.error_code for t in answer.topics for p in t.partitions} - {0}
            if not errors:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Kafka took no offset commit on {topic} in {timeout:.0f} s: {sorted(errors)}"
                )
            time.sleep(0.05)
