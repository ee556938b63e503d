"""Spark Structured Streaming's own Kafka source and sink through the gateway: records produced
into an input topic are read by the Kafka source, transformed and written by the Kafka sink to an
output topic, on Tansu and (marker kafka) on Apache Kafka 4.4 upstream; every record is accounted
for, and the job's progress is committed to a consumer group the gateway serves."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadtest.test_loadtest import JAVA_MISSING, REPO, SPARK_MISSING

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(SPARK_MISSING, reason="pyspark is not installed (pip install -e '.[loadtest]')"),
    pytest.mark.skipif(JAVA_MISSING, reason="no java on PATH (Debian: openjdk-17-jre-headless)"),
]

from confluent_kafka import Consumer, ConsumerGroupState, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # noqa: E402

from tests.gateway.conftest import running_gateway, running_tansu  # noqa: E402
from tests.support.kafka_broker import KafkaCluster  # noqa: E402

RECORDS = 2000
PARTITIONS = 2
DRAIN_S = 60.0


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local[2] session for the module (JVM start-up is the cost), with the connector's jars."""
    from loadtest.spark import build_session
    from loadtest.structured_streaming import ConnectorMissing, session_conf

    try:
        conf = session_conf()
    except ConnectorMissing as exc:
        pytest.fail(str(exc))
    session = build_session(
        "local[2]", "structured-streaming-test", None, tmp_path_factory.mktemp("spark"), conf
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def gateway_on_tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_tansu(tmp_path_factory.mktemp("tansu")) as port, running_gateway(f"127.0.0.1:{port}") as gw:
        yield gw.bootstrap


def _produce(bootstrap: str, topic: str, one_per_batch: bool) -> set[tuple[bytes, bytes]]:
    settings = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    if one_per_batch:
        settings |= {"linger.ms": 0, "batch.num.messages": 1}
    producer = Producer(settings)
    sent: set[tuple[bytes, bytes]] = set()
    delivered: list[object] = []
    for i in range(RECORDS):
        key, value = f"k{i % 97}".encode(), f"record-{i:05d}".encode()
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, _msg: delivered.append(err))
        sent.add((key, value))
        if one_per_batch:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert len(delivered) == RECORDS and not any(delivered), Counter(map(str, delivered))
    return sent


def _read_all(bootstrap: str, topic: str, expected: int, deadline: float) -> list[tuple[bytes, bytes, str]]:
    """Every record of the topic, read from the start of each partition (never from a watermark),
    polled until `expected` have arrived or the deadline passes, then a little longer for extras."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    records: list[tuple[bytes, bytes, str]] = []
    quiet_until: float | None = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                if quiet_until is not None and time.monotonic() > quiet_until:
                    break
                continue
            assert message.error() is None, message.error()
            headers = dict(message.headers() or [])
            key, value, origin = message.key(), message.value(), headers.get("source")
            assert isinstance(key, bytes) and isinstance(value, bytes) and isinstance(origin, bytes)
            records.append((key, value, origin.decode()))
            if len(records) >= expected and quiet_until is None:
                quiet_until = time.monotonic() + 3  # duplicates would follow within a poll or two
    finally:
        consumer.close()
    return records


def _run_pipeline(spark: object, bootstrap: str, tmp_path: Path, one_per_batch: bool) -> None:
    from loadtest.structured_streaming import ProgressCommitter, StreamSpec, start_query

    run = uuid.uuid4().hex[:8]
    source, sink, group = f"ss-{run}-in", f"ss-{run}-out", f"ss-{run}-pipeline"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (source, sink)]).values():
        future.result(30)
    sent = _produce(bootstrap, source, one_per_batch)

    # Tansu 0.6 answers ListOffsets(latest) with the last batch's base offset + 1; Spark's source
    # reads up to that answer, so on Tansu both sides write one record per batch (see docs/loadtest.md).
    producer_options = {"linger.ms": "0", "batch.size": "1"} if one_per_batch else {}
    spec = StreamSpec(bootstrap, source, sink, tmp_path / "checkpoint", group, producer_options)
    committer = ProgressCommitter(spark, bootstrap, group)  # type: ignore[arg-type]
    spark.streams.addListener(committer)  # type: ignore[attr-defined]
    query = start_query(spark, spec)  # type: ignore[arg-type]
    committer.query_id = str(query.id)
    try:
        received = _read_all(bootstrap, sink, RECORDS, time.monotonic() + DRAIN_S)
        assert query.exception() is None, query.exception()
        expected_end = {(source, p): n for p, n in _end_offsets(bootstrap, source).items()}
        deadline = time.monotonic() + 30
        while committer.committed != expected_end and time.monotonic() < deadline:
            time.sleep(0.2)  # the listener commits after the batch that wrote the last records
        committed = committer.committed_offsets()
    finally:
        query.stop()
        spark.streams.removeListener(committer)  # type: ignore[attr-defined]
        committer.close()

    expected = Counter((key, value.upper()) for key, value in sent)
    got = Counter((key, value) for key, value, _origin in received)
    assert len(received) == RECORDS, f"{len(received)} records written, {RECORDS} expected"
    assert got == expected, (
        f"missing {sum((expected - got).values())}, unexpected or duplicated {sum((got - expected).values())}"
    )
    origins = Counter(origin for _key, _value, origin in received)
    assert len(origins) == RECORDS and max(origins.values()) == 1  # each input record written once
    assert {origin.rsplit("/", 2)[0] for origin in origins} == {source}
    assert committer.errors == []
    assert committed == expected_end  # the gateway's OffsetFetch: every input record processed
    assert sum(expected_end.values()) == RECORDS
    # The source's consumers share the group id but are assigned partitions: none ever joined.
    description = admin.describe_consumer_groups([group])[group].result(30)
    assert description.state == ConsumerGroupState.EMPTY and not description.members, description


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The end of each partition, counted by reading it (Tansu's watermarks are not trusted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    ends = dict.fromkeys(range(PARTITIONS), 0)
    idle_until = time.monotonic() + 3
    try:
        while time.monotonic() < idle_until:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            ends[partition] = max(ends[partition], offset + 1)
            idle_until = time.monotonic() + 2
    finally:
        consumer.close()
    return ends


def test_structured_streaming_job_through_the_gateway_on_tansu(
    spark: object, gateway_on_tansu: str, tmp_path: Path
) -> None:
    _run_pipeline(spark, gateway_on_tansu, tmp_path, one_per_batch=True)


@pytest.mark.kafka
def test_structured_streaming_job_through_the_gateway_on_kafka(
    spark: object, kafka_broker: KafkaCluster, tmp_path: Path
) -> None:
    with running_gateway(kafka_broker.bootstrap) as gw:
        _run_pipeline(spark, gw.bootstrap, tmp_path, one_per_batch=False)


def test_loadtest_command_runs_the_structured_streaming_pipeline(
    gateway_on_tansu: str, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = subprocess.run(
        [sys.executable, "-m", "loadtest", "--bootstrap", gateway_on_tansu, "--label", "gateway",
         "--pipeline", "structured-streaming", "--master", "local[2]", "--tasks", "2", "--partitions", "3",
         "--produce-rate", "100", "--duration", "14", "--drain", "7",
         # Tansu 0.6's ListOffsets(latest) is right only for one-record batches (docs/loadtest.md).
         "--spark-kafka-option", "batch.size=1", "--spark-kafka-option", "linger.ms=0",
         "--strict", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=150,
    )  # fmt: skip
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    records = summary["records"]
    # 200/s for 7 s at most; on a busy machine the rate query's first micro-batch alone takes seconds
    assert 100 <= records["produced"] <= 1400, records
    assert records["written"] == records["produced"] + records["duplicated"], records
    assert (records["lost"], records["duplicated"], records["mismatched"], records["unexpected"]) == (
        0,
        0,
        0,
        0,
    )
    assert records["end_to_end_ms"]["p50"] is not None and records["end_to_end_ms"]["p50"] >= 0
    offsets = summary["offsets"]
    assert offsets["committed_equals_end"] and offsets["committed"] == records["produced"], offsets
    assert summary["micro_batches"]["count"] >= 1 and summary["error"] is None
    from loadtest.structured_streaming import connector_version

    assert summary["connector"] == connector_version() and summary["spark"] == pyspark_version()
    assert "written by the pipeline, lost 0" in result.stdout


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def test_structured_streaming_pipeline_needs_a_produce_rate(tmp_path: Path) -> None:
    from loadtest.cli import EXIT_USAGE, main

    args = ["--bootstrap", "127.0.0.1:1", "--pipeline", "structured-streaming", "--out", str(tmp_path / "o")]
    assert main(args) == EXIT_USAGE
    assert main([*args, "--produce-rate", "10", "--compare", "127.0.0.1:2"]) == EXIT_USAGE
    assert main(["--bootstrap", "127.0.0.1:1", "--spark-kafka-option", "acks=1", "--produce-rate", "1",
                 "--out", str(tmp_path / "p")]) == EXIT_USAGE  # fmt: skip


def test_progress_end_offsets_and_strict_failures() -> None:
    from loadtest.stream_run import failures
    from loadtest.structured_streaming import end_offsets

    assert end_offsets({"endOffset": '{"in":{"0":12,"1":3}}'}) == {("in", 0): 12, ("in", 1): 3}
    assert end_offsets({"endOffset": None}) == {}
    assert end_offsets({"endOffset": "42"}) == {}
    records = {"lost": 0, "mismatched": 0, "unexpected": 0, "duplicated": 4}
    offsets = {"committed_equals_end": True, "committed": 10, "input_end": 10}
    clean = {"error": None, "records": records, "offsets": offsets}
    assert failures(clean) == []  # duplicates are allowed: the Kafka sink is at-least-once
    lost = {
        "error": None,
        "records": {**records, "lost": 2},
        "offsets": {**offsets, "committed_equals_end": False},
    }
    assert failures(lost) == ["2 lost records", "the group committed 10 of 10 offsets"]


def test_connector_folder_is_checked_before_the_run(tmp_path: Path) -> None:
    from loadtest.cli import EXIT_USAGE, main
    from loadtest.structured_streaming import (
        ConnectorMissing,
        connector_jars,
        connector_version,
        session_conf,
    )

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConnectorMissing):
        connector_jars(empty)
    args = ["--bootstrap", "127.0.0.1:1", "--pipeline", "structured-streaming", "--produce-rate", "10"]
    assert main([*args, "--spark-kafka-jars", str(empty), "--out", str(tmp_path / "o")]) == EXIT_USAGE
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar"):
        (lib / name).write_bytes(b"")
    assert connector_version(lib) == "4.2.0"
    assert session_conf(lib) == {
        "spark.jars": f"{lib}/kafka-clients-3.9.2.jar,{lib}/spark-sql-kafka-0-10_2.13-4.2.0.jar"
    }
