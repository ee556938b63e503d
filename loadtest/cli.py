"""`python -m loadtest` / `coordinator loadtest`: run the load with Spark and write the report."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from loadtest.scenario import (
    GROUP_PROTOCOLS,
    Scenario,
    is_local_master,
    is_loopback_host,
    local_slots,
    new_run_id,
    parse_hostport,
    registered_slots,
)

DESCRIPTION = (
    "Simulate thousands of Kafka consumer-group members from a PySpark job against a bootstrap "
    "address and report latencies, rebalances and errors. Local mode (the default master) only "
    "loads loopback addresses."
)
EXIT_USAGE = 2
EXIT_TARGET = 1
EXIT_CHECK_FAILED = 3
PIPELINES = ("members", "structured-streaming")
_LABEL = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("target")
    target.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="server to load")
    target.add_argument("--label", default="a", help="name of the target in the report (default a)")
    target.add_argument(
        "--compare",
        metavar="HOST:PORT",
        help="compare mode: run the same scenario against this second server too, report both with ratios",
    )
    target.add_argument("--compare-label", default="b", help="name of the second target (default b)")

    spark = parser.add_argument_group("spark")
    spark.add_argument(
        "--master", default="local[*]", help="Spark master: local[N] (default local[*]) or spark://HOST:PORT"
    )
    spark.add_argument("--tasks", type=int, help="Spark tasks, one per slot (default: every slot)")
    spark.add_argument("--barrier", action="store_true", help="barrier stage: all tasks start together")
    spark.add_argument(
        "--driver-host", help="address executors reach the driver at (cluster masters; local uses 127.0.0.1)"
    )
    spark.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the session, e.g. spark.executor.memory=512m (repeatable)",
    )

    load = parser.add_argument_group("scenario")
    load.add_argument(
        "--group-protocol",
        choices=GROUP_PROTOCOLS,
        default="classic",
        help="classic (default): JoinGroup/SyncGroup/Heartbeat members with client-side range "
        "assignment; consumer: KIP-848 ConsumerGroupHeartbeat members (server-side assignment; the "
        "server sets the heartbeat interval and session timeout; groups are task-local; reports "
        "reconciliation time per group epoch and checks that no partition has two owners)",
    )
    load.add_argument(
        "--members",
        type=int,
        default=100,
        help="members in total, split evenly over the tasks (default 100)",
    )
    load.add_argument(
        "--groups",
        type=int,
        help="groups in total, shared by all tasks (default: one per 50 members); consumer: "
        "each group belongs to one task, so at least --tasks",
    )
    load.add_argument(
        "--topics", type=int, default=1, help="topics; group g subscribes to topic g %% topics (default 1)"
    )
    load.add_argument("--partitions", type=int, default=64, help="partitions per topic (default 64)")
    load.add_argument(
        "--duration", type=float, default=60.0, help="seconds of load per task, ramp-up included (default 60)"
    )
    load.add_argument(
        "--ramp-up",
        type=float,
        default=10.0,
        help="seconds over which a task starts its members (default 10)",
    )
    load.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=3000,
        help="default 3000 (consumer: only used when a response names no interval)",
    )
    load.add_argument("--commit-interval-ms", type=int, default=5000, help="default 5000")
    load.add_argument(
        "--session-timeout-ms",
        type=int,
        default=30000,
        help="default 30000 (consumer: the server's setting applies; used for the join grace with kills)",
    )
    load.add_argument("--rebalance-timeout-ms", type=int, default=60000, help="default 60000")
    load.add_argument(
        "--request-timeout-ms",
        type=int,
        default=30000,
        help="default 30000 (JoinGroup/SyncGroup: rebalance timeout + 5 s)",
    )
    load.add_argument(
        "--churn-rate",
        type=float,
        default=0.0,
        help="graceful leave + replacement per task per second (default 0)",
    )
    load.add_argument(
        "--kill-rate",
        type=float,
        default=0.0,
        help="abrupt disconnect + replacement per task per second (default 0)",
    )
    load.add_argument(
        "--restart-delay",
        type=float,
        default=1.0,
        help="seconds before a replacement member starts (default 1)",
    )
    load.add_argument(
        "--static-share",
        type=float,
        default=0.0,
        help="share of members with a group.instance.id, 0..1 (default 0)",
    )
    load.add_argument(
        "--topic-prefix", default="loadtest", help="created topics are PREFIX-RUNID-tN (default loadtest)"
    )
    load.add_argument("--seed", type=int, default=0)

    pipe = parser.add_argument_group("pipeline mode (needs a broker serving Produce and Fetch)")
    pipe.add_argument(
        "--produce-rate",
        type=float,
        default=0.0,
        help="records per second per task produced to the topics and consumed by the groups; "
        "reports end-to-end latency, lag, lost and duplicated records (default 0: group traffic only)",
    )
    pipe.add_argument(
        "--data-bootstrap",
        metavar="HOST:PORT",
        help="produce and fetch the records on this cluster instead of --bootstrap (the groups "
        "stay on --bootstrap: a standalone coordinator with a separate data cluster)",
    )
    pipe.add_argument(
        "--pipeline",
        choices=PIPELINES,
        default="members",
        help="members (default): the simulated group members read the records; structured-streaming: "
        "a Spark Structured Streaming job reads the records with Spark's own Kafka source and writes "
        "them, upper-cased, to a second topic with its Kafka sink (Kafka's Java client in the "
        "executors; needs the connector .ci/setup resolves), then every record is accounted for",
    )
    pipe.add_argument(
        "--spark-kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="structured-streaming: a Kafka producer setting for Spark's Kafka sinks, e.g. linger.ms=5 (repeatable)",
    )
    pipe.add_argument(
        "--spark-kafka-jars",
        type=Path,
        metavar="DIR",
        help="structured-streaming: the folder holding Spark's Kafka connector and its jars "
        "(default: loadtest/java/target/lib, where .ci/setup puts them)",
    )
    pipe.add_argument("--record-bytes", type=int, default=100, help="value size of a record (default 100)")
    pipe.add_argument(
        "--drain",
        type=float,
        default=10.0,
        help="seconds before the end the producers stop, for the consumers to catch up; records "
        "not consumed by then count as lost (default 10)",
    )

    report = parser.add_argument_group("report")
    report.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="report directory (must not hold a previous report)",
    )
    report.add_argument(
        "--baseline",
        type=Path,
        metavar="PATH",
        help="a previous run's summary.json (or its report directory): the report adds the ratios "
        "of this run to it and writes baseline.json",
    )
    report.add_argument(
        "--progress-interval", type=float, default=2.0, help="seconds between progress lines (default 2)"
    )
    report.add_argument(
        "--lag-threshold-ms",
        type=float,
        default=50.0,
        help="client loop lag p99 above which a task counts as saturated (default 50)",
    )
    report.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_CHECK_FAILED} when a member never joined or an unexpected error occurred",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m loadtest", description=DESCRIPTION)
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def _say(message: str) -> None:
    print(f"loadtest: {message}", file=sys.stderr, flush=True)


class UsageError(Exception):
    pass


def _validate(args: argparse.Namespace) -> list[tuple[str, str]]:
    targets = [(args.label, args.bootstrap)]
    if args.compare:
        targets.append((args.compare_label, args.compare))
    labels = [label for label, _ in targets]
    if len(set(labels)) != len(labels):
        raise UsageError("--label and --compare-label must differ")
    for label, address in targets:
        if not _LABEL.match(label):
            raise UsageError(f"label {label!r}: use 1-40 letters, digits, '.', '_' or '-'")
        try:
            host, _ = parse_hostport(address)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        if is_local_master(args.master) and not is_loopback_host(host):
            raise UsageError(
                f"{address} is not a loopback address: a local master only loads 127.0.0.1/localhost targets"
            )
    positive = {
        "--members": args.members,
        "--topics": args.topics,
        "--partitions": args.partitions,
        "--duration": args.duration,
        "--heartbeat-interval-ms": args.heartbeat_interval_ms,
        "--commit-interval-ms": args.commit_interval_ms,
        "--session-timeout-ms": args.session_timeout_ms,
        "--rebalance-timeout-ms": args.rebalance_timeout_ms,
        "--request-timeout-ms": args.request_timeout_ms,
    }
    for flag, value in positive.items():
        if value is None or value <= 0:
            raise UsageError(f"{flag} must be positive")
    if args.tasks is not None and args.tasks <= 0:
        raise UsageError("--tasks must be positive")
    if args.groups is not None and args.groups <= 0:
        raise UsageError("--groups must be positive")
    for flag, value in {
        "--ramp-up": args.ramp_up,
        "--churn-rate": args.churn_rate,
        "--kill-rate": args.kill_rate,
        "--restart-delay": args.restart_delay,
    }.items():
        if value < 0:
            raise UsageError(f"{flag} must not be negative")
    if args.produce_rate < 0:
        raise UsageError("--produce-rate must not be negative")
    if args.data_bootstrap and args.produce_rate <= 0:
        raise UsageError("--data-bootstrap needs --produce-rate")
    if args.data_bootstrap:
        try:
            data_host, _ = parse_hostport(args.data_bootstrap)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        if is_local_master(args.master) and not is_loopback_host(data_host):
            raise UsageError(f"{args.data_bootstrap} is not a loopback address (local master)")
    if args.produce_rate > 0:
        if not 26 <= args.record_bytes <= 1_000_000:
            raise UsageError("--record-bytes must be within 26..1000000 (the record id and time take 26)")
        if not 0 <= args.drain < args.duration:
            raise UsageError("--drain must be within 0 and --duration")
    if args.pipeline == "structured-streaming":
        if args.produce_rate <= 0:
            raise UsageError("--pipeline structured-streaming needs --produce-rate")
        if args.compare or args.data_bootstrap or args.baseline:
            raise UsageError(
                "--pipeline structured-streaming runs one target: no --compare, --data-bootstrap or --baseline"
            )
    elif args.spark_kafka_option or args.spark_kafka_jars:
        raise UsageError(
            "--spark-kafka-option and --spark-kafka-jars are for --pipeline structured-streaming"
        )
    kafka_options(args.spark_kafka_option)
    if not 0 <= args.static_share <= 1:
        raise UsageError("--static-share must be within 0..1")
    spark_conf(args.spark_conf)
    if args.duration > 24 * 3600:
        raise UsageError("--duration is limited to 24 hours")
    return targets


def spark_conf(pairs: list[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise UsageError(f"--spark-conf {pair!r}: expected spark.KEY=VALUE")
        conf[key.strip()] = value
    return conf


def kafka_options(pairs: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-kafka-option {pair!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def _output_dirs(out: Path, targets: list[tuple[str, str]]) -> list[Path]:
    dirs = [out] if len(targets) == 1 else [out / label for label, _ in targets]
    for directory in dirs:
        for name in ("raw.parquet", "summary.json"):
            if (directory / name).exists():
                raise UsageError(f"{directory / name} exists: give --out a new directory")
    for directory in dirs:
        directory.mkdir(parents=True, exist_ok=True)
    return dirs


def run(args: argparse.Namespace) -> int:
    try:
        targets = _validate(args)
        try:
            slots = local_slots(args.master)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        tasks: int | None = args.tasks or slots
        local = is_local_master(args.master)
        if local and slots is not None and tasks is not None and tasks > slots:
            raise UsageError(
                f"--tasks {tasks} is more than the {slots} slots of {args.master} (one task per slot)"
            )
        if tasks is None:
            raise UsageError("give --tasks with a cluster master (one per executor core)")
        if args.members < tasks:
            raise UsageError(
                f"--members {args.members} is fewer than the {tasks} tasks (each task runs members)"
            )
        if args.group_protocol == "consumer" and args.groups is not None and args.groups < tasks:
            raise UsageError(
                f"--groups {args.groups} is fewer than the {tasks} tasks: with --group-protocol consumer "
                "each group belongs to one task"
            )
        baseline = load_baseline(args.baseline) if args.baseline else None
        dirs = _output_dirs(args.out, targets)
    except UsageError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    if args.pipeline == "structured-streaming":
        return _run_structured_streaming(args, dirs[0], tasks, local)
    return _run(args, targets, dirs, tasks, local, baseline)


def _run_structured_streaming(args: argparse.Namespace, out: Path, tasks: int, local: bool) -> int:
    from loadtest.admin import TargetError, prepare_target
    from loadtest.stream_run import StreamRun, failures, report_line, run_stream
    from loadtest.structured_streaming import CONNECTOR_LIB, ConnectorMissing, connector_jars

    connector_lib = args.spark_kafka_jars or CONNECTOR_LIB
    try:
        connector_jars(connector_lib)
    except ConnectorMissing as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    run_id = new_run_id()
    topics = [f"{args.topic_prefix}-{run_id}-in", f"{args.topic_prefix}-{run_id}-out"]
    try:
        prepared = prepare_target(args.bootstrap, topics, args.partitions, local, f"loadtest-{run_id}-probe")
    except TargetError as exc:
        _say(f"error: target {args.label} ({args.bootstrap}): {exc}")
        return EXIT_TARGET
    short = [t for t, n in prepared.partitions.items() if n != args.partitions]
    if short:
        _say(f"error: target {args.label}: topics {short} exist with another partition count")
        return EXIT_TARGET
    run = StreamRun(
        run_id=run_id,
        bootstrap=args.bootstrap,
        input_topic=topics[0],
        output_topic=topics[1],
        group_id=f"{args.topic_prefix}-{run_id}-pipeline",
        partitions=args.partitions,
        tasks=tasks,
        produce_rate=args.produce_rate * tasks,
        duration_s=args.duration,
        drain_s=args.drain,
        producer_options=kafka_options(args.spark_kafka_option),
        connector_lib=connector_lib,
    )
    _say(f"target {args.label} {args.bootstrap}: run {run_id}, coordinator {prepared.coordinator}")
    summary = run_stream(run, args.master, args.driver_host, spark_conf(args.spark_conf), out)
    summary["target"] = args.label
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n### {args.label} ({args.bootstrap}), run {run_id}, structured streaming\n")
    print(report_line(summary))
    sys.stdout.flush()
    _say(f"summary: {out / 'summary.json'}")
    failed = failures(summary)
    if args.strict and failed:
        _say("check failed: " + "; ".join(failed))
        return EXIT_CHECK_FAILED
    return 0


def load_baseline(path: Path) -> dict[str, Any]:
    file = path / "summary.json" if path.is_dir() else path
    try:
        summary = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: cannot read a summary.json ({exc})") from exc
    if not isinstance(summary, dict) or not {"run_id", "target", "operations", "rebalances"} <= set(summary):
        raise UsageError(f"--baseline {path}: not a load-test summary.json")
    return summary


def _run(
    args: argparse.Namespace,
    targets: list[tuple[str, str]],
    dirs: list[Path],
    tasks: int,
    local: bool,
    baseline: dict[str, Any] | None = None,
) -> int:
    from loadtest.admin import TargetError, prepare_target
    from loadtest.progress import Progress
    from protocol.apis import ApiKey

    groups = args.groups or max(1, args.members // 50)
    if args.group_protocol == "consumer":
        groups = max(groups, tasks)
    ramp_up = min(args.ramp_up, args.duration / 2)
    progress_host = "127.0.0.1" if local else (args.driver_host or socket.gethostbyname(socket.gethostname()))

    scenarios: list[Scenario] = []
    progress = Progress(progress_host, args.progress_interval, args.lag_threshold_ms)
    try:
        for label, bootstrap in targets:
            run_id = new_run_id()
            topics = [f"{args.topic_prefix}-{run_id}-t{i}" for i in range(args.topics)]
            try:
                pipeline = args.produce_rate > 0
                separate_data = pipeline and args.data_bootstrap is not None
                prepared = prepare_target(
                    bootstrap,
                    topics,
                    args.partitions,
                    local,
                    f"loadtest-{run_id}-probe",
                    args.group_protocol,
                    pipeline=pipeline and not separate_data,
                )
            except TargetError as exc:
                _say(f"error: target {label} ({bootstrap}): {exc}")
                return EXIT_TARGET
            if separate_data:
                try:
                    data = prepare_target(
                        args.data_bootstrap,
                        topics,
                        args.partitions,
                        local,
                        f"loadtest-{run_id}-data",
                        pipeline=True,
                    )
                except TargetError as exc:
                    _say(f"error: data cluster {args.data_bootstrap}: {exc}")
                    return EXIT_TARGET
                if data.partitions != prepared.partitions:
                    _say(f"error: the data cluster has other partition counts: {data.partitions}")
                    return EXIT_TARGET
                versions = {k: v for k, v in data.versions.items() if k in (ApiKey.PRODUCE, ApiKey.FETCH)}
                prepared = replace(
                    prepared, versions={**prepared.versions, **versions}, data_broker=data.data_broker
                )
            short = [t for t, n in prepared.partitions.items() if n != args.partitions]
            if short:
                _say(f"error: target {label}: topics {short} exist with another partition count")
                return EXIT_TARGET
            versions = prepared.versions
            if args.group_protocol == "classic" and args.static_share > 0 and versions[11] < 5:
                _say(
                    f"error: target {label}: static membership needs JoinGroup v5+, it serves up to v{versions[11]}"
                )
                return EXIT_TARGET
            _say(
                f"target {label} {bootstrap}: run {run_id}, coordinator {prepared.coordinator}, "
                f"{args.topics} topic(s) x {args.partitions} partitions created, versions "
                + " ".join(f"{_api(k)}=v{v}" for k, v in sorted(versions.items()))
            )
            scenarios.append(
                Scenario(
                    run_id=run_id,
                    target=label,
                    bootstrap=bootstrap,
                    tasks=tasks,
                    members=args.members,
                    groups=groups,
                    topic_names=tuple(topics),
                    partitions=args.partitions,
                    duration_s=args.duration,
                    ramp_up_s=ramp_up,
                    heartbeat_interval_ms=args.heartbeat_interval_ms,
                    commit_interval_ms=args.commit_interval_ms,
                    session_timeout_ms=args.session_timeout_ms,
                    rebalance_timeout_ms=args.rebalance_timeout_ms,
                    request_timeout_ms=args.request_timeout_ms,
                    churn_rate=args.churn_rate,
                    kill_rate=args.kill_rate,
                    restart_delay_s=args.restart_delay,
                    static_share=args.static_share,
                    versions={int(k): int(v) for k, v in versions.items()},
                    loopback_only=local,
                    progress_host=progress.host,
                    progress_port=progress.port,
                    barrier=args.barrier,
                    seed=args.seed,
                    group_protocol=args.group_protocol,
                    produce_rate=args.produce_rate,
                    record_bytes=args.record_bytes,
                    drain_s=args.drain if args.produce_rate > 0 else 0.0,
                    data_broker=prepared.data_broker,
                )
            )
        return _run_spark(args, scenarios, dirs, progress, baseline)
    finally:
        progress.close()


def _api(key: int) -> str:
    from protocol.apis import ApiKey

    return "".join(part.title() for part in ApiKey(key).name.split("_"))


def _run_spark(
    args: argparse.Namespace,
    scenarios: list[Scenario],
    dirs: list[Path],
    progress: Any,
    baseline: dict[str, Any] | None,
) -> int:
    from loadtest import report
    from loadtest.aggregate import summarize, timeline
    from loadtest.spark import build_session, new_work_dir, run_load

    work_dir = new_work_dir()
    started = time.monotonic()
    spark = build_session(
        args.master,
        f"loadtest-{scenarios[0].run_id}",
        args.driver_host,
        work_dir,
        spark_conf(args.spark_conf),
    )
    try:
        slots = registered_slots(spark, args.master)
        _say(
            f"spark {spark.version} on {args.master} ready in {time.monotonic() - started:.1f} s ({slots} slots)"
        )
        if scenarios[0].tasks > slots:
            _say(
                f"warning: {scenarios[0].tasks} tasks but only {slots} slots registered now: tasks may queue"
            )
        results: list[tuple[dict[str, Any], Any]] = []
        for scenario, directory in zip(scenarios, dirs, strict=True):
            _say(
                f"load {scenario.target}: {scenario.members} members over {scenario.tasks} tasks, "
                f"{scenario.groups} groups, {scenario.duration_s:.0f} s"
            )
            progress.begin(scenario.target, scenario.tasks, scenario.members)
            try:
                raw = run_load(spark, scenario, directory / "raw.parquet")
            finally:
                progress.end()
            summary = summarize(spark, raw, scenario, args.lag_threshold_ms)
            per_second = timeline(raw, summary["window"]["start_ms"], scenario)
            per_second.coalesce(1).write.parquet(str(directory / "timeline.parquet"))
            frame = spark.read.parquet(str(directory / "timeline.parquet")).toPandas()
            (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
            if len(scenarios) > 1:
                report.plot([(summary, frame)], directory / "report.png")
                report.write_html(directory / "report.html", directory / "report.png", [summary])
            results.append((summary, frame))
            _report_target(summary)
        out = args.out
        report.plot(results, out / "report.png")
        report.write_html(out / "report.html", out / "report.png", [s for s, _ in results], baseline)
        if baseline is not None:
            _write_baseline(out, baseline, [s for s, _ in results])
        if len(results) == 2:
            a, b = results[0][0], results[1][0]
            comparison = {"a": a["target"], "b": b["target"], "ratios_b_over_a": report.ratios(a, b)}
            (out / "compare.json").write_text(json.dumps(comparison, indent=2) + "\n")
            print(f"\n### {b['target']} vs {a['target']}\n")
            print(
                report.markdown_table(
                    report.compare_header(a["target"], b["target"]), report.compare_rows(a, b)
                )
            )
        _say(f"report: {out / 'report.html'}")
    finally:
        spark.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
    if args.strict:
        failures = [
            f"{s['target']}: {s['members']['not_joined']} members never joined, "
            f"{s['requests']['unexpected_errors']} unexpected errors"
            for s, _ in results
            if s["members"]["not_joined"] or s["requests"]["unexpected_errors"]
        ]
        failures += [
            f"{s['target']}: {s['reconciliation']['groups'] - s['reconciliation']['groups_converged']} "
            "groups not reconciled when the load stopped"
            for s, _ in results
            if "reconciliation" in s
            and s["reconciliation"]["groups"] > s["reconciliation"]["groups_converged"]
            and not (s["scenario"]["churn_rate"] > 0 or s["scenario"]["kill_rate"] > 0)
        ]
        failures += [
            f"{s['target']}: {s['pipeline']['lost']} acknowledged records never consumed"
            for s, _ in results
            if "pipeline" in s and s["pipeline"]["lost"]
        ]
        if failures:
            _say("check failed: " + "; ".join(failures))
            return EXIT_CHECK_FAILED
    return 0


def _write_baseline(out: Path, baseline: dict[str, Any], summaries: list[dict[str, Any]]) -> None:
    from loadtest import report

    comparable = [s for s in summaries if report.is_consumer(s) == report.is_consumer(baseline)]
    ratios = {s["target"]: report.ratios(baseline, s) for s in comparable}
    document = {"baseline": baseline["run_id"], "ratios_over_baseline": ratios}
    (out / "baseline.json").write_text(json.dumps(document, indent=2) + "\n")
    label = report.baseline_label(baseline)
    for summary in comparable:
        print(f"\n### {summary['target']} vs {label}\n")
        print(
            report.markdown_table(
                report.compare_header(label, summary["target"]), report.compare_rows(baseline, summary)
            )
        )


def _report_target(summary: dict[str, Any]) -> None:
    from loadtest import report

    members = summary["members"]
    requests = summary["requests"]
    rebalance = summary["rebalances"]
    print(f"\n### {summary['target']} ({summary['bootstrap']}), run {summary['run_id']}\n")
    line = (
        f"members: {members['joined']:,}/{members['started']:,} joined"
        f" ({members['not_joined']} never, {members['aborted_before_join']} aborted before joining),"
        f" killed {members['killed']}, churned {members['churned']};"
        f" requests {requests['count']:,} ({requests['rate_per_s']:,.0f}/s),"
        f" unexpected errors {requests['unexpected_errors']} {requests['unexpected_by_code'] or ''};"
    )
    reconciliation = summary.get("reconciliation")
    if reconciliation is None:
        line += (
            f" rebalances {rebalance['generations']:,} (p50 {rebalance['duration_ms'].get('p50')} ms,"
            f" p99 {rebalance['duration_ms'].get('p99')} ms)"
        )
    else:
        handover = reconciliation["handover_ms"]
        line += (
            f" group epochs reconciled {rebalance['generations']:,} (p50 {rebalance['duration_ms'].get('p50')} ms,"
            f" p99 {rebalance['duration_ms'].get('p99')} ms; handover p50 {handover.get('p50')} ms,"
            f" p99 {handover.get('p99')} ms), single-member {reconciliation['epochs_single_member']:,},"
            f" superseded {reconciliation['epochs_superseded']:,};"
            f" groups reconciled at the end {reconciliation['groups_converged']}/{reconciliation['groups']};"
            f" double ownership {reconciliation['double_ownership']}"
        )
    print(line)
    placement = summary["placement"]
    executors = sorted({(p["executor"], p["host"]) for p in placement})
    print(
        f"tasks ran on {len(executors)} executor(s): "
        + ", ".join(f"task {p['task']} on executor {p['executor']} ({p['host']})" for p in placement)
    )
    pipeline = summary.get("pipeline")
    if pipeline:
        e2e = pipeline["end_to_end_ms"]
        print(
            f"records: {pipeline['acknowledged']:,} acknowledged ({pipeline['acknowledged_rate_per_s']:,.0f}/s,"
            f" target {pipeline['target_rate_per_s']:,.0f}/s), consumed {pipeline['consumed']:,} by"
            f" {pipeline['groups']} groups, lost {pipeline['lost']}, duplicated {pipeline['duplicated']:,};"
            f" end to end p50 {e2e.get('p50')} ms, p99 {e2e.get('p99')} ms, max {e2e.get('max')} ms;"
            f" lag at the end {pipeline['final_lag']:,}"
        )
    lag = summary["loop_lag"]["tasks"]
    if lag:
        worst = max(t["max_ms"] for t in lag)
        over = sum(t["samples_over_threshold"] for t in lag)
        print(
            f"client loop lag: p99 {max(t['p99_ms'] for t in lag):.1f} ms, max {worst:.0f} ms,"
            f" {over} of {sum(t['samples'] for t in lag)} samples over {summary['loop_lag']['threshold_ms']:.0f} ms"
        )
    if summary["client_saturated"]:
        print(
            "WARNING: the client was saturated (loop lag above threshold): latencies include client queueing"
        )
    print()
    print(report.markdown_table(report.HEADLINE_HEADER, report.headline_rows(summary)))
    sys.stdout.flush()
