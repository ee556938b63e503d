"""`coordinator loadtest --pipeline structured-streaming`: a Structured Streaming pipeline through
the target, then every record accounted for with Spark batch reads of both topics.

A rate query writes `--produce-rate` records per second into the input topic for `--duration`
minus `--drain` seconds; the pipeline query (Kafka source -> transform -> Kafka sink) runs from
the start, its progress committed to a consumer group; after the producer stops, the run waits at
most `--drain` seconds for that group's committed offsets to reach the input topic's end. See
docs/loadtest.md.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from loadtest.structured_streaming import (
    CONNECTOR_LIB,
    SOURCE_HEADER,
    ProgressCommitter,
    StreamSpec,
    connector_version,
    session_conf,
    source_origin,
    start_producer,
    start_query,
)

_POLL_S: Final = 0.5
_PERCENTILES: Final = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}


@dataclass(frozen=True)
class StreamRun:
    run_id: str
    bootstrap: str
    input_topic: str
    output_topic: str
    group_id: str
    partitions: int
    tasks: int
    produce_rate: float  # records per second, all tasks together
    duration_s: float
    drain_s: float
    producer_options: Mapping[str, str]
    connector_lib: Path = CONNECTOR_LIB


def _say(message: str) -> None:
    print(f"loadtest: {message}", file=sys.stderr, flush=True)


def run_stream(
    run: StreamRun, master: str, driver_host: str | None, conf: dict[str, str], out: Path
) -> dict[str, Any]:
    """Run the pipeline, account for every record, write summary.json to `out`; return it."""
    from loadtest.spark import build_session, new_work_dir

    work_dir = new_work_dir()
    started = time.monotonic()
    spark = build_session(
        master, f"loadtest-{run.run_id}", driver_host, work_dir, {**session_conf(run.connector_lib), **conf}
    )
    try:
        _say(f"spark {spark.version} on {master} ready in {time.monotonic() - started:.1f} s")
        summary = _run(spark, run, work_dir)
    finally:
        spark.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _run(spark: SparkSession, run: StreamRun, work_dir: Path) -> dict[str, Any]:
    committer = ProgressCommitter(spark, run.bootstrap, run.group_id)
    spark.streams.addListener(committer)
    spec = StreamSpec(
        run.bootstrap,
        run.input_topic,
        run.output_topic,
        work_dir / "pipeline",
        run.group_id,
        run.producer_options,
    )
    pipeline = start_query(spark, spec)
    committer.query_id = str(pipeline.id)
    producer = start_producer(
        spark, run.bootstrap, run.input_topic, run.produce_rate, run.tasks, work_dir / "producer",
        run.producer_options,
    )  # fmt: skip
    _say(
        f"pipeline {run.input_topic} -> {run.output_topic}: {run.produce_rate:,.0f} records/s for "
        f"{run.duration_s - run.drain_s:.0f} s, then at most {run.drain_s:.0f} s to drain"
    )
    try:
        producing_until = time.monotonic() + run.duration_s - run.drain_s
        while time.monotonic() < producing_until and producer.exception() is None and pipeline.isActive:
            time.sleep(_POLL_S)
        _say(
            "stopping the rate query: Spark logs its micro-batch in flight as aborted; what it wrote is counted"
        )
        producer.stop()
        produced_s = run.duration_s - run.drain_s
        ends = committer.latest_offsets(run.input_topic, run.partitions)
        drain_deadline = time.monotonic() + run.drain_s
        drain_started = time.monotonic()
        while committer.committed != ends and time.monotonic() < drain_deadline and pipeline.isActive:
            time.sleep(_POLL_S)
        drained_s = time.monotonic() - drain_started
        committed = committer.committed_offsets()
        progress = [p for p in pipeline.recentProgress if p.get("numInputRows", 0) > 0]
        failure = pipeline.exception() or producer.exception()
    finally:
        for query in (producer, pipeline):
            if query.isActive:
                query.stop()
        spark.streams.removeListener(committer)
        committer.close()
    counts = account(spark, run)
    batch_ms = [float(p["durationMs"]["triggerExecution"]) for p in progress]
    return {
        "mode": "structured-streaming",
        "run_id": run.run_id,
        "bootstrap": run.bootstrap,
        "spark": spark.version,
        "connector": connector_version(run.connector_lib),
        "topics": {"input": run.input_topic, "output": run.output_topic, "partitions": run.partitions},
        "group": run.group_id,
        "target_rate_per_s": run.produce_rate,
        "producing_s": produced_s,
        "drained_s": round(drained_s, 3),
        "error": None if failure is None else str(failure).splitlines()[0],
        "records": counts,
        "micro_batches": {
            "count": len(progress),
            "duration_ms": _percentiles(batch_ms),
            "rows_per_batch_max": max((int(p["numInputRows"]) for p in progress), default=0),
        },
        "offsets": {
            "input_end": sum(ends.values()),
            "committed": sum(committed.values()),
            "committed_equals_end": committed == ends,
            "commit_errors": committer.errors,
        },
    }


def _percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    if not ordered:
        return dict.fromkeys(_PERCENTILES)
    return {name: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for name, q in _PERCENTILES.items()}


def _topic(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )


def account(spark: SparkSession, run: StreamRun) -> dict[str, Any]:
    """Each input record against the output records that name it in their `source` header."""
    inputs = _topic(spark, run.bootstrap, run.input_topic).select(
        source_origin().alias("origin"),
        F.col("value").cast("string").alias("value_in"),
        F.col("timestamp").alias("produced"),
    )
    origin = F.expr(f"filter(headers, h -> h.key = '{SOURCE_HEADER}')[0].value").cast("string")
    outputs = _topic(spark, run.bootstrap, run.output_topic).select(
        origin.alias("origin"),
        F.col("value").cast("string").alias("value_out"),
        F.col("timestamp").alias("written"),
    )
    per_origin = outputs.groupBy("origin").agg(
        F.count(F.lit(1)).alias("copies"),
        F.min("written").alias("written"),
        F.max("value_out").alias("value_out"),
        F.min("value_out").alias("value_out_min"),
    )
    joined = inputs.join(per_origin, "origin", "left")
    latency_ms = (F.col("written").cast("double") - F.col("produced").cast("double")) * 1000.0
    row = joined.agg(
        F.count(F.lit(1)).alias("produced"),
        F.sum(F.when(F.col("copies").isNull(), 1).otherwise(0)).alias("lost"),
        F.sum(F.when(F.col("copies") > 1, F.col("copies") - 1).otherwise(0)).alias("duplicated"),
        F.sum(
            F.when(
                F.col("copies").isNotNull()
                & (
                    (F.col("value_out") != F.upper("value_in"))
                    | (F.col("value_out_min") != F.upper("value_in"))
                ),
                1,
            ).otherwise(0)
        ).alias("mismatched"),
        F.percentile_approx(latency_ms, [0.5, 0.9, 0.99], 10000).alias("latency"),
        F.max(latency_ms).alias("latency_max"),
    ).first()
    assert row is not None
    written = outputs.count()
    unexpected = outputs.join(inputs, "origin", "left_anti").count()
    latency = row["latency"] or [None, None, None]
    return {
        "produced": int(row["produced"]),
        "written": written,
        "lost": int(row["lost"] or 0),
        "duplicated": int(row["duplicated"] or 0),
        "mismatched": int(row["mismatched"] or 0),
        "unexpected": unexpected,
        "end_to_end_ms": {
            name: None if value is None else round(float(value), 1)
            for name, value in zip(("p50", "p90", "p99", "max"), [*latency, row["latency_max"]], strict=True)
        },
    }


def report_line(summary: dict[str, Any]) -> str:
    records, offsets = summary["records"], summary["offsets"]
    e2e = records["end_to_end_ms"]
    return (
        f"records: {records['produced']:,} produced by Spark's Kafka sink, {records['written']:,} written by the"
        f" pipeline, lost {records['lost']}, duplicated {records['duplicated']}, mismatched"
        f" {records['mismatched']}, unexpected {records['unexpected']}; end to end p50 {e2e['p50']} ms,"
        f" p99 {e2e['p99']} ms; {summary['micro_batches']['count']} micro-batches; group {summary['group']}"
        f" committed {offsets['committed']:,} of {offsets['input_end']:,}"
    )


def failures(summary: dict[str, Any]) -> list[str]:
    """What --strict fails on."""
    records, offsets = summary["records"], summary["offsets"]
    found = [f"{records[k]} {k} records" for k in ("lost", "mismatched", "unexpected") if records[k]]
    if not offsets["committed_equals_end"]:
        found.append(f"the group committed {offsets['committed']} of {offsets['input_end']} offsets")
    if summary["error"]:
        found.append(f"a query failed: {summary['error']}")
    return found
