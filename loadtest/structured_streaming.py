"""Pipeline mode on Spark Structured Streaming: Spark's own Kafka source and sink (Kafka's Java
client inside Spark's executors) read one topic and write its records, transformed, to another,
through the bootstrap address given (a gateway in the tests). See docs/loadtest.md.

The source keeps its offsets in the query's checkpoint, not in a consumer group: its consumers
are assigned partitions (no JoinGroup) and never commit. So that the group coordinator sees the
pipeline's progress (lag tools, `coordinator admin`), `ProgressCommitter` commits each finished
micro-batch's end offsets to the consumer group named `group_id` with Kafka's Java Admin client in
the driver (FindCoordinator, then OffsetCommit as a group without members).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.listener import StreamingQueryListener
from pyspark.sql.streaming.query import StreamingQuery

CONNECTOR_LIB: Final = Path(__file__).resolve().parent / "java" / "target" / "lib"
CONNECTOR_JAR_PREFIX: Final = "spark-sql-kafka-0-10_"
SOURCE_HEADER: Final = "source"  # the header naming the input record: topic/partition/offset
_ADMIN_TIMEOUT_S: Final = 30


class ConnectorMissing(Exception):
    """Spark's Kafka connector is not in the connector folder (`bash .ci/setup` resolves it)."""


def connector_jars(lib: Path = CONNECTOR_LIB) -> list[Path]:
    """The connector and the jars it needs beyond pyspark's own, as .ci/setup copied them."""
    jars = sorted(lib.glob("*.jar"))
    if not any(jar.name.startswith(CONNECTOR_JAR_PREFIX) for jar in jars):
        raise ConnectorMissing(f"no {CONNECTOR_JAR_PREFIX}*.jar in {lib}: run `bash .ci/setup`")
    return jars


def connector_version(lib: Path = CONNECTOR_LIB) -> str:
    """The connector's version, from its jar's name (spark-sql-kafka-0-10_2.13-4.2.0.jar: 4.2.0)."""
    for jar in connector_jars(lib):
        if jar.name.startswith(CONNECTOR_JAR_PREFIX):
            return jar.stem.rsplit("-", 1)[-1]
    raise ConnectorMissing(f"no {CONNECTOR_JAR_PREFIX}*.jar in {lib}")


def session_conf(lib: Path = CONNECTOR_LIB) -> dict[str, str]:
    """Spark settings that put the connector on the driver's and executors' class paths (local
    paths: nothing is downloaded at run time, unlike spark.jars.packages)."""
    return {"spark.jars": ",".join(str(jar) for jar in connector_jars(lib))}


@dataclass(frozen=True)
class StreamSpec:
    bootstrap: str
    input_topic: str
    output_topic: str
    checkpoint: Path
    group_id: str  # the source consumers' group.id, and the group its progress is committed to
    producer_options: Mapping[str, str] = field(default_factory=dict)  # the sink producer's settings


def source_origin() -> Column:
    return F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))


def transform(records: DataFrame) -> DataFrame:
    """The job's transformation: the value upper-cased, the key kept, and a `source` header that
    names the input record (topic/partition/offset), so every output record can be traced back."""
    header = F.struct(F.lit(SOURCE_HEADER).alias("key"), source_origin().cast("binary").alias("value"))
    return records.select(
        F.col("key"),
        F.upper(F.col("value").cast("string")).cast("binary").alias("value"),
        F.array(header).alias("headers"),
    )


def start_query(spark: SparkSession, spec: StreamSpec) -> StreamingQuery:
    """Kafka source -> transform -> Kafka sink, with the checkpoint in `spec.checkpoint`."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", spec.bootstrap)
        .option("subscribe", spec.input_topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "true")
        .option("kafka.group.id", spec.group_id)
        .load()
    )
    writer = (
        transform(source)
        .writeStream.format("kafka")
        .queryName(f"{spec.input_topic}-to-{spec.output_topic}")
        .option("kafka.bootstrap.servers", spec.bootstrap)
        .option("topic", spec.output_topic)
        .option("checkpointLocation", str(spec.checkpoint))
    )
    for key, value in spec.producer_options.items():
        writer = writer.option(f"kafka.{key}", value)
    return writer.start()


def start_producer(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    rows_per_second: float,
    tasks: int,
    checkpoint: Path,
    producer_options: Mapping[str, str],
) -> StreamingQuery:
    """Records at a rate (Spark's rate source, `tasks` partitions) written to `topic` by the Kafka
    sink: key = the record's number, value = `record-<number>`, timestamp = the producer's clock."""
    rows = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(max(1, round(rows_per_second))))
        .option("numPartitions", str(tasks))
        .load()
    )
    records = rows.select(
        F.col("value").cast("string").cast("binary").alias("key"),
        F.concat(F.lit("record-"), F.lpad(F.col("value").cast("string"), 12, "0"))
        .cast("binary")
        .alias("value"),
    )
    writer = (
        records.writeStream.format("kafka")
        .queryName(f"rate-to-{topic}")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
    )
    for key, value in producer_options.items():
        writer = writer.option(f"kafka.{key}", value)
    return writer.start()


def end_offsets(progress_source: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset of a source's `endOffset` in a query progress."""
    raw = progress_source.get("endOffset")
    offsets = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(offsets, dict):
        return {}  # not a Kafka source (the rate source's offset is a number)
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


class ProgressCommitter(StreamingQueryListener):
    """Commits the source's end offsets of every micro-batch of one query to a consumer group."""

    def __init__(self, spark: SparkSession, bootstrap: str, group_id: str) -> None:
        self.group_id = group_id
        self.query_id: str | None = None
        self.committed: dict[tuple[str, int], int] = {}
        self.errors: list[str] = []
        self._lock = threading.Lock()
        jvm = spark.sparkContext._jvm
        if jvm is None:
            raise RuntimeError("the Spark session has stopped")
        self._jvm: Any = jvm
        props = self._jvm.java.util.Properties()
        props.put("bootstrap.servers", bootstrap)
        props.put("client.id", f"{group_id}-committer")
        self._admin: Any = self._jvm.org.apache.kafka.clients.admin.Admin.create(props)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if self.query_id is not None and str(progress.id) != self.query_id:
            return
        offsets: dict[tuple[str, int], int] = {}
        for source in progress.sources:
            offsets.update(end_offsets({"endOffset": source.endOffset}))
        with self._lock:
            fresh = {tp: o for tp, o in offsets.items() if self.committed.get(tp) != o}
            if fresh:
                self._commit(fresh)

    def _commit(self, offsets: dict[tuple[str, int], int]) -> None:
        jvm = self._jvm
        java_offsets = jvm.java.util.HashMap()
        for (topic, partition), offset in offsets.items():
            java_offsets.put(
                jvm.org.apache.kafka.common.TopicPartition(topic, partition),
                jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(offset),
            )
        try:
            result = self._admin.alterConsumerGroupOffsets(self.group_id, java_offsets)
            result.all().get(_ADMIN_TIMEOUT_S, jvm.java.util.concurrent.TimeUnit.SECONDS)
        except Exception as exc:  # a Py4JJavaError: kept for the report, the next batch retries
            self.errors.append(str(exc).splitlines()[0])
            return
        self.committed.update(offsets)

    def committed_offsets(self) -> dict[tuple[str, int], int]:
        """The group's committed offsets as the coordinator answers them (OffsetFetch)."""
        jvm = self._jvm
        answer = self._admin.listConsumerGroupOffsets(self.group_id).partitionsToOffsetAndMetadata()
        offsets = answer.get(_ADMIN_TIMEOUT_S, jvm.java.util.concurrent.TimeUnit.SECONDS)
        return {
            (tp.topic(), tp.partition()): offsets.get(tp).offset()
            for tp in offsets.keySet()
            if offsets.get(tp) is not None
        }

    def latest_offsets(self, topic: str, partitions: int) -> dict[tuple[str, int], int]:
        """The end of each partition of `topic` (ListOffsets, latest)."""
        jvm = self._jvm
        spec = jvm.org.apache.kafka.clients.admin.OffsetSpec.latest()
        request = jvm.java.util.HashMap()
        for partition in range(partitions):
            request.put(jvm.org.apache.kafka.common.TopicPartition(topic, partition), spec)
        answer = self._admin.listOffsets(request).all()
        offsets = answer.get(_ADMIN_TIMEOUT_S, jvm.java.util.concurrent.TimeUnit.SECONDS)
        return {(tp.topic(), tp.partition()): offsets.get(tp).offset() for tp in offsets.keySet()}

    def close(self) -> None:
        self._admin.close()
