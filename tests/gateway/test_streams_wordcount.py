"""A Kafka Streams 4.4 application with group.protocol=streams (KIP-1071) through the gateway:
its streams group lives in the gateway, its topics (input, repartition, changelog, output) on
the upstream cluster, the internal ones created by the gateway (docs/streams-groups.md)."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup
from protocol.messages.streams_group_describe import DescribedGroup, StreamsGroupDescribeRequest
from tests.admin.support import cli
from tests.gateway.conftest import gateway_settings, running_gateway
from tests.support.java_driver import JavaDriver
from tests.support.kafka_broker import KafkaCluster, KafkaUnavailable, java_command
from tests.support.ports import free_port
from tests.support.server import ServerProcess, start_server
from tests.support.streams_app import input_lines, latest_counts, produce_lines, word_count_app
from tests.support.wire_client import WireClient


def _create_topics(bootstrap: str, prefix: str) -> tuple[str, str]:
    """The application's input and output topics, ``prefix``ed (one upstream serves every test)."""
    words, counts = f"{prefix}-words", f"{prefix}-counts"
    with WireClient(bootstrap) as client:
        response = client.request(
            ApiKey.CREATE_TOPICS,
            5,
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=words, num_partitions=3, replication_factor=1),
                    CreatableTopic(name=counts, num_partitions=3, replication_factor=1),
                ]
            ),
        )
    assert {t.name: t.error_code for t in response.topics} == {words: 0, counts: 0}
    return words, counts


def _described(bootstrap: str, app: str) -> DescribedGroup:
    with WireClient(bootstrap) as client:
        group: DescribedGroup = client.request(
            ApiKey.STREAMS_GROUP_DESCRIBE, 1, StreamsGroupDescribeRequest([app])
        ).groups[0]
        return group


def _tasks(group: DescribedGroup, kind: str = "active_tasks") -> list[tuple[str, int, str]]:
    return sorted(
        (t.subtopology_id, p, m.process_id)
        for m in group.members
        for t in getattr(m.assignment, kind)
        for p in t.partitions
    )


def _loaded(bootstrap: str, app: str, timeout_s: float = 30) -> DescribedGroup:
    """The group as described once the restarted gateway has loaded it."""
    retriable = {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
    deadline = time.monotonic() + timeout_s
    while True:
        group = _described(bootstrap, app)
        if group.error_code not in retriable:
            assert group.error_code == 0, group
            return group
        assert time.monotonic() < deadline, group
        time.sleep(0.1)


ALL_TASKS = [(s, p) for s in ("0", "1") for p in range(3)]


def _settled(bootstrap: str, app: str, members: int, timeout_s: float = 60) -> DescribedGroup:
    """The group once Stable with ``members`` members and every task assigned."""
    deadline = time.monotonic() + timeout_s
    while True:
        group = _described(bootstrap, app)
        tasks = [(s, p) for s, p, _ in _tasks(group)]
        if group.group_state == "Stable" and len(group.members) == members and tasks == ALL_TASKS:
            return group
        assert time.monotonic() < deadline, group
        time.sleep(0.2)


def _run_word_count(gateway: ServerProcess, tmp_path: Path) -> None:
    words, output = _create_topics(gateway.bootstrap, "wc")
    lines, expected = input_lines()
    try:
        with word_count_app(gateway.bootstrap, "wordcount", tmp_path, (words, output)) as app:
            app.wait_running([app.start(), app.start()])
            produce_lines(gateway.bootstrap, words, lines)
            counts = latest_counts(gateway.bootstrap, output, expected, 120)
            assert counts == expected, app.logs()
            _settled(gateway.bootstrap, "wordcount", 2)
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def streams_gateway(tansu_port: int) -> Iterator[ServerProcess]:
    with running_gateway(
        f"127.0.0.1:{tansu_port}", **{"group-streams-heartbeat-interval-ms": "500"}
    ) as server:
        yield server


def test_word_count_through_the_gateway_on_tansu(streams_gateway: ServerProcess, tmp_path: Path) -> None:
    _run_word_count(streams_gateway, tmp_path)


@pytest.mark.kafka
def test_word_count_through_the_gateway_on_kafka(kafka_broker: KafkaCluster, tmp_path: Path) -> None:
    with running_gateway(kafka_broker.bootstrap, **{"group-streams-heartbeat-interval-ms": "500"}) as gateway:
        _run_word_count(gateway, tmp_path)


def _wait_committed(bootstrap: str, app: str, words: str, lines: int, word_count: int) -> None:
    """Poll until the group has committed every input line and every repartition record (on
    Kafka a record is one offset, so the committed offsets add up to the record counts; Tansu
    leaves gaps between batches' offsets, so they may add up to more)."""
    deadline = time.monotonic() + 120
    with WireClient(bootstrap) as client:
        while True:
            request = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=app, topics=None)])
            [group] = client.request(ApiKey.OFFSET_FETCH, 8, request).groups
            done = {t.name: sum(max(p.committed_offset, 0) for p in t.partitions) for t in group.topics}
            input_done = done.get(words, 0)
            repartition_done = sum(n for topic, n in done.items() if topic.endswith("-repartition"))
            if input_done == lines and repartition_done >= word_count:
                return
            assert time.monotonic() < deadline, (input_done, lines, repartition_done, word_count)
            time.sleep(0.1)


def _standbys_restart_and_kill(upstream: str, tmp_path: Path, counted_after_kill: bool) -> None:
    """Three instances, standby tasks with num.standby.replicas=1; the gateway restarted mid-run
    keeps the group at its epoch; an instance SIGKILLed and another started: its tasks move, and
    every word is counted."""
    APP = "restarts"
    port, base = free_port(), free_port()
    storage = f"sqlite:///{tmp_path / 'gateway.db'}"
    settings = gateway_settings(
        upstream,
        **{
            "gateway-broker-port-base": str(base),
            "group-streams-heartbeat-interval-ms": "500",
            "group-streams-session-timeout-ms": "6000",
            "group-streams-num-standby-replicas": "1",
        },
    )
    gateway = start_server(storage, settings, port=port)
    lines, expected = input_lines(seed=11, lines=400)
    first, second = lines[:200], lines[200:]
    try:
        words, output = _create_topics(gateway.bootstrap, "restarts")
        with word_count_app(gateway.bootstrap, APP, tmp_path, (words, output)) as app:
            a, b, c = app.start(), app.start(), app.start()
            app.wait_running([a, b, c])
            group = _settled(gateway.bootstrap, APP, 3)
            # The stateful subtopology's tasks each have a standby on another process.
            active = {(s, p): proc for s, p, proc in _tasks(group) if s == "1"}
            standby = {(s, p): proc for s, p, proc in _tasks(group, "standby_tasks")}
            assert set(standby) == set(active) and all(standby[t] != active[t] for t in active)

            produce_lines(gateway.bootstrap, words, first)
            half = dict(collections.Counter(w for line in first for w in line.split()))
            assert latest_counts(gateway.bootstrap, output, half, 120) == half, app.logs()

            epoch = group.group_epoch
            gateway.stop()
            gateway = start_server(storage, settings, port=port)
            restored = _loaded(gateway.bootstrap, APP)
            assert (restored.group_epoch, restored.group_state) == (epoch, "Stable")
            assert _tasks(restored) == _tasks(group)

            if counted_after_kill:
                # Exactly once below needs the first half committed before the kill: the input
                # and the repartition records (one per word) alike.
                _wait_committed(gateway.bootstrap, APP, words, len(first), sum(half.values()))
            a.process.send_signal(signal.SIGKILL)
            a.process.wait(10)
            d = app.start()
            app.wait_running([d])
            produce_lines(gateway.bootstrap, words, second)
            if counted_after_kill:
                # At least once; the first half was committed before the kill, so exactly.
                counts = latest_counts(gateway.bootstrap, output, expected, 180)
                assert counts == expected, app.logs()
            settled = _settled(gateway.bootstrap, APP, 3)
            assert settled.group_epoch > epoch
            assert {proc for _, _, proc in _tasks(settled)} == {m.process_id for m in settled.members}
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    finally:
        gateway.stop()


def test_standbys_a_gateway_restart_and_a_killed_instance_on_tansu(tansu_port: int, tmp_path: Path) -> None:
    """Every word counted after the SIGKILL on Tansu too: the restored store reads its changelog
    to the log end the gateway answers (docs/streams-groups.md#tansu)."""
    _standbys_restart_and_kill(f"127.0.0.1:{tansu_port}", tmp_path, counted_after_kill=True)


@pytest.mark.kafka
def test_standbys_a_gateway_restart_and_a_killed_instance_on_kafka(
    kafka_broker: KafkaCluster, tmp_path: Path
) -> None:
    _standbys_restart_and_kill(kafka_broker.bootstrap, tmp_path, counted_after_kill=True)


def _shape(group: DescribedGroup) -> list[tuple[int, int]]:
    """Per member: (stateful active tasks, stateless active tasks), sorted -- what two runs with
    different (random) member ids can share."""
    return sorted(
        (
            sum(len(t.partitions) for t in m.assignment.active_tasks if t.subtopology_id == "1"),
            sum(len(t.partitions) for t in m.assignment.active_tasks if t.subtopology_id == "0"),
        )
        for m in group.members
    )


def _streams_groups_tool(bootstrap: str, *args: str) -> str:
    command = java_command(
        "org.apache.kafka.tools.streams.StreamsGroupCommand", "--bootstrap-server", bootstrap, *args
    )
    ran = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


STREAMS_GROUP_COMMAND = "org.apache.kafka.tools.streams.StreamsGroupCommand"
OffsetRow = tuple[str, int, str, str, str, str]


def _tool_offsets(java_driver: JavaDriver, bootstrap: str, app: str) -> list[OffsetRow]:
    """kafka-streams-groups --describe --offsets --verbose: (topic, partition, current offset,
    leader epoch, log end, lag) per input partition of the active tasks, '-' where none."""
    ran = java_driver.tool(
        STREAMS_GROUP_COMMAND,
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--group",
        app,
        "--offsets",
        "--verbose",
    )
    assert ran.status == 0, ran.stderr
    rows = [line.split() for line in ran.stdout.splitlines() if line.strip()]
    assert rows[0] == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET", "OFFSET-LAG",
    ]  # fmt: skip
    return sorted((r[1], int(r[2]), r[3], r[4], r[5], r[6]) for r in rows[1:])


def _our_offsets(bootstrap: str, app: str) -> list[OffsetRow]:
    """The same from `coordinator groups describe --offsets --format json`."""
    ran = cli(bootstrap, "groups", "describe", app, "--offsets", "--format", "json")
    assert ran.code == 0, ran.err
    [group] = json.loads(ran.out)

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    return sorted(
        (o["topic"], o["partition"], cell(o["current_offset"]), cell(o["leader_epoch"]),
         cell(o["log_end_offset"]), cell(o["lag"]))
        for o in group["offsets"]
        if o["task"] is not None
    )  # fmt: skip


def _same_offsets(
    java_driver: JavaDriver, bootstrap: str, app: str, timeout_s: float = 60
) -> list[OffsetRow]:
    """Both tools' offsets once they agree (the application commits as it goes: poll)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ours, kafkas = _our_offsets(bootstrap, app), _tool_offsets(java_driver, bootstrap, app)
        if ours == kafkas:
            return ours
        assert time.monotonic() < deadline, (ours, kafkas)
        time.sleep(0.5)


@pytest.mark.kafka
def test_the_task_assignment_matches_kafkas_own_coordinator(
    kafka_broker: KafkaCluster, tmp_path: Path, java_driver: JavaDriver
) -> None:
    """The same application and topology on Kafka 4.4's coordinator (the oracle) and on the
    gateway in front of the same broker: the same states, epochs and task shape; and Kafka's
    kafka-streams-groups.sh describes the gateway's group as it describes Kafka's, its offsets
    (lag per input partition of each task) as our CLI does."""
    shapes = {}
    tool: dict[str, list[str]] = {}
    offsets: list[OffsetRow] = []
    try:
        with running_gateway(
            kafka_broker.bootstrap, **{"group-streams-heartbeat-interval-ms": "500"}
        ) as gateway:
            for name, bootstrap in (("kafka", kafka_broker.bootstrap), ("gateway", gateway.bootstrap)):
                words, output = _create_topics(bootstrap, f"oracle-{name}")
                work = tmp_path / name
                work.mkdir()
                with word_count_app(bootstrap, f"oracle-{name}", work, (words, output)) as app:
                    app.wait_running([app.start(), app.start()])
                    group = _settled(bootstrap, f"oracle-{name}", 2)
                    shapes[name] = (group.group_state, _shape(group))
                    listed = _streams_groups_tool(
                        bootstrap, "--describe", "--group", f"oracle-{name}", "--members"
                    )
                    tool[name] = [line.split()[0] for line in listed.splitlines() if line.strip()]
                    if name == "gateway":
                        lines, expected = input_lines()
                        produce_lines(bootstrap, words, lines)
                        assert latest_counts(bootstrap, output, expected, 120) == expected, app.logs()
                        offsets = _same_offsets(java_driver, bootstrap, f"oracle-{name}")
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    assert shapes["gateway"] == shapes["kafka"]
    # The same columns, then one row per member, naming the group.
    assert tool["gateway"][0] == tool["kafka"][0] == "GROUP"
    assert tool["gateway"][1:] == ["oracle-gateway"] * 2 and tool["kafka"][1:] == ["oracle-kafka"] * 2
    # Every input partition of the six tasks (the words and the repartition topic, 3 partitions
    # each), with the application's commits.
    assert sorted((topic.endswith("-words"), p) for topic, p, *_ in offsets) == [
        (w, p) for w in (False, True) for p in range(3)
    ], offsets
    assert all(current != "-" for _, _, current, *_ in offsets), offsets
