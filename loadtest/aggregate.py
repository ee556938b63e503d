"""Aggregations of the raw rows with Spark: per-operation summary, rebalances, per-second timeline."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from loadtest.scenario import (
    ABORTED,
    CONSUMED_OP,
    CYCLE_OPS,
    DOUBLE_OWNERSHIP_OP,
    EVENT_OPS,
    GROUP_END_OP,
    HANDOVER_OP,
    INSTANT,
    LOOP_LAG_OP,
    NOT_JOINED,
    PRODUCED_OP,
    RECONCILIATION_OP,
    RECORD_OPS,
    REQUEST_OPS,
    SUPERSEDED,
    Scenario,
    error_name,
    expected_codes,
)

PERCENTILES = (0.5, 0.9, 0.99, 0.999)
PERCENTILE_NAMES = ("p50", "p90", "p99", "p99_9")
_ACCURACY = 10000
_MAX_GENERATIONS_LISTED = 2000
_MAX_GROUPS_LISTED = 100


def _answered_latency() -> Any:
    """Latency of requests that got a response (client timeouts and disconnects have none)."""
    return F.when(F.col("error_code") > -100, F.col("latency_ms"))


def _percentiles(column: Any) -> Any:
    return F.percentile_approx(column, list(PERCENTILES), _ACCURACY)


def _pct_dict(values: list[float] | None) -> dict[str, float | None]:
    values = values or []
    return {
        name: (round(float(values[i]), 3) if i < len(values) and values[i] is not None else None)
        for i, name in enumerate(PERCENTILE_NAMES)
    }


def summarize(
    spark: SparkSession, raw: DataFrame, scenario: Scenario, lag_threshold_ms: float
) -> dict[str, Any]:
    expected = expected_codes(scenario.faults, scenario.group_protocol)
    ops = [*REQUEST_OPS, "connect", *CYCLE_OPS]
    # Double ownership (consumer mode) counts as an unexpected error, not as an operation.
    code_ops = [*ops, DOUBLE_OWNERSHIP_OP] if scenario.consumer else ops
    requests = raw.where(F.col("op").isin(*REQUEST_OPS, "connect"))

    window = requests.agg(
        F.min("start_ms").alias("t0"), F.max(F.col("start_ms") + F.col("latency_ms")).alias("t1")
    ).first()
    t0 = float(window["t0"]) if window and window["t0"] is not None else 0.0
    t1 = float(window["t1"]) if window and window["t1"] is not None else t0
    seconds = max((t1 - t0) / 1000.0, 1e-9)

    latency = _answered_latency()
    per_op_rows = (
        raw.where(F.col("op").isin(*ops))
        .groupBy("op")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.when(F.col("error_code") != 0, 1).otherwise(0)).alias("errors"),
            _percentiles(latency).alias("pct"),
            F.max(latency).alias("max"),
            F.avg(latency).alias("mean"),
        )
        .collect()
    )
    codes_rows = (
        raw.where(F.col("op").isin(*code_ops) & (F.col("error_code") != 0))
        .groupBy("op", "error_code")
        .count()
        .collect()
    )
    by_code: dict[str, dict[str, int]] = {}
    unexpected: dict[str, int] = {}
    for row in codes_rows:
        name = f"{error_name(row['error_code'])} ({row['error_code']})"
        by_code.setdefault(row["op"], {})[name] = int(row["count"])
        if row["error_code"] not in expected:
            unexpected[name] = unexpected.get(name, 0) + int(row["count"])

    operations: dict[str, Any] = {}
    for row in sorted(per_op_rows, key=lambda r: ops.index(r["op"])):
        op = row["op"]
        operations[op] = {
            "count": int(row["count"]),
            "rate_per_s": round(row["count"] / seconds, 2),
            "errors": int(row["errors"]),
            "errors_by_code": dict(sorted(by_code.get(op, {}).items())),
            **_pct_dict(row["pct"]),
            "max": round(float(row["max"]), 3) if row["max"] is not None else None,
            "mean": round(float(row["mean"]), 3) if row["mean"] is not None else None,
        }

    joins = raw.where(F.col("op") == "join").groupBy("error_code").count().collect()
    join_counts = {int(r["error_code"]): int(r["count"]) for r in joins}
    members = {
        "started": sum(join_counts.values()),
        "joined": join_counts.get(0, 0),
        "not_joined": join_counts.get(NOT_JOINED, 0),
        "aborted_before_join": join_counts.get(ABORTED, 0),
        "killed": raw.where(F.col("op") == "kill").count(),
        "churned": raw.where(F.col("op") == "churn").count(),
    }

    placement = [
        {"task": int(r["task"]), "executor": r["executor"], "host": r["host"], "rows": int(r["count"])}
        for r in raw.groupBy("task", "executor", "host").count().orderBy("task", "executor").collect()
    ]
    rebalances = _reconciliations(raw, t0) if scenario.consumer else _rebalances(raw, t0)
    loop_lag = _loop_lag(raw, lag_threshold_ms)
    total_requests = sum(v["count"] for k, v in operations.items() if k in REQUEST_OPS)
    # The classic report stays as it was before the consumer mode (no group_protocol key).
    hidden = ("progress_host", "progress_port") + (() if scenario.consumer else ("group_protocol",))
    summary = {
        "run_id": scenario.run_id,
        "target": scenario.target,
        "bootstrap": scenario.bootstrap,
        "scenario": {k: v for k, v in scenario.to_dict().items() if k not in hidden},
        "window": {"start_ms": t0, "end_ms": t1, "seconds": round(seconds, 3)},
        "requests": {
            "count": total_requests,
            "rate_per_s": round(total_requests / seconds, 2),
            "unexpected_errors": sum(unexpected.values()),
            "unexpected_by_code": dict(sorted(unexpected.items())),
            "expected_codes": sorted(error_name(c) for c in expected if c),
        },
        "members": members,
        "placement": placement,
        "join": operations.get("join", {}),
        "operations": {k: v for k, v in operations.items() if k not in CYCLE_OPS},
        "rebalance_cycles": operations.get("rebalance", {}),
        "rebalances": rebalances,
        "loop_lag": loop_lag,
        "client_saturated": any(t["saturated"] for t in loop_lag["tasks"]),
    }
    if scenario.consumer:
        summary["reconciliation"] = _reconciliation_details(raw, rebalances)
    if scenario.pipeline:
        summary["pipeline"] = _pipeline(spark, raw, scenario, t0)
    return summary


def _pipeline(spark: SparkSession, raw: DataFrame, scenario: Scenario, t0_ms: float) -> dict[str, Any]:
    """Records: acknowledged, consumed, lost (acknowledged, never consumed by a group of the
    topic), duplicated (consumed again by the same group), end-to-end latency, and the lag of
    the groups per second (acknowledged so far minus consumed at least once so far)."""
    produced = raw.where((F.col("op") == PRODUCED_OP) & (F.col("error_code") == 0)).select(
        F.col("group").alias("topic"), "record", (F.col("start_ms") + F.col("latency_ms")).alias("at_ms")
    )
    consumed = raw.where(F.col("op") == CONSUMED_OP)
    first = consumed.groupBy("group", "record").agg(
        F.min(F.col("start_ms") + F.col("latency_ms")).alias("at_ms"), F.count(F.lit(1)).alias("times")
    )
    groups = spark.createDataFrame(
        [(scenario.group_name(g), scenario.topic_of_group(g)) for g in range(scenario.groups)],
        "group string, topic string",
    )
    expected = produced.join(F.broadcast(groups), "topic")
    lost_by_group = (
        expected.join(first, ["group", "record"], "left_anti")
        .groupBy("group")
        .count()
        .orderBy(F.desc("count"))
    ).collect()
    counts = first.agg(F.count(F.lit(1)).alias("unique"), F.sum("times").alias("total")).first()
    unique = int(counts["unique"]) if counts and counts["unique"] else 0
    total = int(counts["total"]) if counts and counts["total"] else 0
    latency = consumed.agg(
        _percentiles(F.col("latency_ms")).alias("pct"), F.max("latency_ms").alias("max")
    ).first()
    acknowledged = produced.count()

    second = F.floor((F.col("at_ms") - F.lit(t0_ms)) / 1000).cast("int").alias("second")
    acked_per_second = produced.groupBy("topic", second).count().collect()
    consumed_per_second = first.groupBy("group", second).count().collect()
    lag = _lag_by_second(scenario, acked_per_second, consumed_per_second)
    seconds = max((lag[-1]["second"] + 1) if lag else 1, 1)
    return {
        "target_rate_per_s": scenario.produce_rate * scenario.tasks,
        "acknowledged": acknowledged,
        "acknowledged_rate_per_s": round(acknowledged / max(scenario.duration_s - scenario.drain_s, 1e-9), 2),
        "groups": scenario.groups,
        "consumed": total,
        "consumed_unique": unique,
        "lost": sum(int(r["count"]) for r in lost_by_group),
        "lost_by_group": {r["group"]: int(r["count"]) for r in lost_by_group[:_MAX_GROUPS_LISTED]},
        "duplicated": total - unique,
        "end_to_end_ms": {
            **_pct_dict(latency["pct"] if latency else None),
            "max": round(float(latency["max"]), 3) if latency and latency["max"] is not None else None,
        },
        "lag_by_second": lag,
        "final_lag": lag[-1]["max_records"] if lag else 0,
        "seconds": seconds,
        "drain_s": scenario.drain_s,
    }


def _lag_by_second(scenario: Scenario, acked: list[Any], consumed: list[Any]) -> list[dict[str, int]]:
    if not acked and not consumed:
        return []
    last = max([int(r["second"]) for r in [*acked, *consumed]] + [0])
    acked_at: dict[str, list[int]] = {}
    for r in acked:
        acked_at.setdefault(r["topic"], [0] * (last + 1))[max(int(r["second"]), 0)] += int(r["count"])
    consumed_at: dict[str, list[int]] = {}
    for r in consumed:
        consumed_at.setdefault(r["group"], [0] * (last + 1))[max(int(r["second"]), 0)] += int(r["count"])
    zero = [0] * (last + 1)
    running = {g: 0 for g in range(scenario.groups)}
    produced_so_far: dict[str, int] = {}
    out = []
    for s in range(last + 1):
        for topic, per_second in acked_at.items():
            produced_so_far[topic] = produced_so_far.get(topic, 0) + per_second[s]
        lags = []
        for g in running:
            name = scenario.group_name(g)
            running[g] += consumed_at.get(name, zero)[s]
            lags.append(produced_so_far.get(scenario.topic_of_group(g), 0) - running[g])
        out.append({"second": s, "max_records": max(lags), "total_records": sum(lags)})
    return out


def _rebalances(raw: DataFrame, t0_ms: float) -> dict[str, Any]:
    """Per (group, generation): from the first member starting its join cycle to the last one
    receiving its assignment (start_s: seconds since the start of the window)."""
    cycles = (
        raw.where(F.col("op").isin(*CYCLE_OPS) & (F.col("error_code") == 0))
        .groupBy("group", "generation")
        .agg(
            F.min("start_ms").alias("start_ms"),
            F.max(F.col("start_ms") + F.col("latency_ms")).alias("end_ms"),
            F.count(F.lit(1)).alias("members"),
            F.sum(F.when(F.col("op") == "join", 1).otherwise(0)).alias("new_members"),
        )
        .withColumn("duration_ms", F.col("end_ms") - F.col("start_ms"))
        .withColumn("start_s", (F.col("start_ms") - F.lit(t0_ms)) / 1000)
    )
    stats = cycles.agg(
        F.count(F.lit(1)).alias("count"),
        _percentiles(F.col("duration_ms")).alias("pct"),
        F.max("duration_ms").alias("max"),
    ).first()
    listed = (
        cycles.orderBy("group", "generation")
        .limit(_MAX_GENERATIONS_LISTED)
        .select(
            "group",
            "generation",
            "members",
            "new_members",
            F.round("start_s", 3).alias("start_s"),
            F.round("duration_ms", 3).alias("duration_ms"),
        )
        .collect()
    )
    return _cycle_summary(stats, listed, _by_group(cycles))


def _by_group(cycles: DataFrame) -> list[dict[str, Any]]:
    """Per group: how many generations (epochs) completed, when, and how long they took."""
    rows = (
        cycles.groupBy("group")
        .agg(
            F.count(F.lit(1)).alias("generations"),
            F.max("generation").alias("last_generation"),
            F.min("start_s").alias("first_s"),
            F.max("start_s").alias("last_s"),
            F.percentile_approx("duration_ms", 0.5, _ACCURACY).alias("p50_ms"),
            F.max("duration_ms").alias("max_ms"),
        )
        .orderBy("group")
        .limit(_MAX_GROUPS_LISTED)
        .collect()
    )
    return [
        {
            "group": r["group"],
            "generations": int(r["generations"]),
            "last_generation": int(r["last_generation"]),
            "first_s": round(float(r["first_s"]), 3) + 0.0,  # no -0.0
            "last_s": round(float(r["last_s"]), 3),
            "p50_ms": round(float(r["p50_ms"]), 3),
            "max_ms": round(float(r["max_ms"]), 3),
        }
        for r in rows
    ]


def _cycle_summary(stats: Any, listed: list[Any], by_group: list[dict[str, Any]]) -> dict[str, Any]:
    """The shape shared by rebalances (classic) and reconciliations (consumer mode)."""
    count = int(stats["count"]) if stats else 0
    return {
        "by_group": by_group,
        "generations": count,
        "duration_ms": {
            **_pct_dict(stats["pct"] if stats else None),
            "max": round(float(stats["max"]), 3) if stats and stats["max"] is not None else None,
        },
        "by_generation": [r.asDict() for r in listed],
        "by_generation_truncated": count > len(listed),
    }


def _reconciliations(raw: DataFrame, t0_ms: float) -> dict[str, Any]:
    """Consumer mode, in the shape of `_rebalances`: per reconciled (group, epoch), from the
    first response carrying the epoch to every member at it owning a complete disjoint split
    (start_s: when the epoch started, seconds since the start of the window)."""
    epochs = raw.where((F.col("op") == RECONCILIATION_OP) & (F.col("error_code") == 0)).select(
        "group",
        "generation",
        ((F.col("start_ms") - F.lit(t0_ms)) / 1000).alias("start_s"),
        F.col("latency_ms").alias("duration_ms"),
    )
    handovers = raw.where(F.col("op") == HANDOVER_OP).select(
        "group", "generation", F.col("latency_ms").alias("handover_ms")
    )
    stats = epochs.agg(
        F.count(F.lit(1)).alias("count"),
        _percentiles(F.col("duration_ms")).alias("pct"),
        F.max("duration_ms").alias("max"),
    ).first()
    listed = (
        epochs.join(handovers, ["group", "generation"], "left")
        .orderBy("group", "generation")
        .limit(_MAX_GENERATIONS_LISTED)
        .select(
            "group",
            "generation",
            F.round("start_s", 3).alias("start_s"),
            F.round("duration_ms", 3).alias("duration_ms"),
            F.round("handover_ms", 3).alias("handover_ms"),
        )
        .collect()
    )
    return _cycle_summary(stats, listed, _by_group(epochs))


def _reconciliation_details(raw: DataFrame, reconciled: dict[str, Any]) -> dict[str, Any]:
    handover = (
        raw.where(F.col("op") == HANDOVER_OP)
        .agg(_percentiles(F.col("latency_ms")).alias("pct"), F.max("latency_ms").alias("max"))
        .first()
    )
    outcomes = raw.where(F.col("op") == RECONCILIATION_OP).groupBy("error_code").count().collect()
    by_outcome = {int(r["error_code"]): int(r["count"]) for r in outcomes}
    double = raw.where(F.col("op") == DOUBLE_OWNERSHIP_OP).count()
    ends = raw.where(F.col("op") == GROUP_END_OP).select("group", "error_code", "generation").collect()
    not_converged = sorted(r["group"] for r in ends if r["error_code"] != 0)
    return {
        "epochs_reconciled": reconciled["generations"],
        "epochs_single_member": by_outcome.get(INSTANT, 0),
        "epochs_superseded": by_outcome.get(SUPERSEDED, 0),
        "duration_ms": reconciled["duration_ms"],
        "handover_ms": {
            **_pct_dict(handover["pct"] if handover else None),
            "max": round(float(handover["max"]), 3) if handover and handover["max"] is not None else None,
        },
        "double_ownership": double,
        "groups": len(ends),
        "groups_converged": len(ends) - len(not_converged),
        "groups_not_converged": not_converged[:_MAX_GROUPS_LISTED],
    }


def _loop_lag(raw: DataFrame, threshold_ms: float) -> dict[str, Any]:
    rows = (
        raw.where(F.col("op") == LOOP_LAG_OP)
        .groupBy("task")
        .agg(
            F.percentile_approx("latency_ms", [0.5, 0.99], _ACCURACY).alias("pct"),
            F.max("latency_ms").alias("max"),
            F.count(F.lit(1)).alias("samples"),
            F.sum(F.when(F.col("latency_ms") > threshold_ms, 1).otherwise(0)).alias("over"),
        )
        .orderBy("task")
        .collect()
    )
    tasks = []
    for row in rows:
        p50, p99 = (row["pct"] or [0.0, 0.0])[:2]
        tasks.append(
            {
                "task": int(row["task"]),
                "p50_ms": round(float(p50), 3),
                "p99_ms": round(float(p99), 3),
                "max_ms": round(float(row["max"]), 3),
                "samples": int(row["samples"]),
                "samples_over_threshold": int(row["over"]),
                "saturated": float(p99) > threshold_ms,
            }
        )
    return {"threshold_ms": threshold_ms, "tasks": tasks}


def timeline(raw: DataFrame, t0_ms: float, scenario: Scenario) -> DataFrame:
    """Per second since the start and per operation: count, errors, latency percentiles."""
    expected = sorted(expected_codes(scenario.faults, scenario.group_protocol))
    second = F.floor((F.col("start_ms") - F.lit(t0_ms)) / 1000).cast("int").alias("second")
    latency = _answered_latency()
    tracker_ops: tuple[str, ...] = (
        (RECONCILIATION_OP, HANDOVER_OP, DOUBLE_OWNERSHIP_OP) if scenario.consumer else ()
    )
    tracker_ops += RECORD_OPS if scenario.pipeline else ()
    return (
        raw.where(
            F.col("op").isin(*REQUEST_OPS, "connect", *CYCLE_OPS, *EVENT_OPS, LOOP_LAG_OP, *tracker_ops)
        )
        .groupBy("target", second, "op")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.when(F.col("error_code") != 0, 1).otherwise(0)).alias("errors"),
            F.sum(F.when(~F.col("error_code").isin(*expected), 1).otherwise(0)).alias("unexpected"),
            F.percentile_approx(latency, 0.5, _ACCURACY).alias("p50_ms"),
            F.percentile_approx(latency, 0.99, _ACCURACY).alias("p99_ms"),
            F.max(latency).alias("max_ms"),
        )
        .orderBy("second", "op")
    )
