"""The Spark side: a quiet, loopback-bound session and the job that runs the load once.

The load runs inside `mapPartitionsWithIndex` (one partition per task, one task per slot) and
its rows are written to Parquet exactly once, with an explicit schema (inferring one would run
the load a second time); every aggregation then reads that Parquet. `spark.task.maxFailures=1`,
`spark.stage.maxConsecutiveAttempts=1` and no speculation: a retried task would repeat its load.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import tempfile
import urllib.parse
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark import BarrierTaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

from loadtest.scenario import RAW_COLUMNS, ResultRow, Scenario, is_local_master
from loadtest.task import run_task

RESULT_SCHEMA = StructType(
    [
        StructField("target", StringType(), False),
        StructField("task", IntegerType(), False),
        StructField("member", IntegerType(), False),
        StructField("group", StringType(), False),
        StructField("op", StringType(), False),
        StructField("start_ms", DoubleType(), False),
        StructField("latency_ms", DoubleType(), False),
        StructField("error_code", IntegerType(), False),
        StructField("generation", IntegerType(), False),
        StructField("record", LongType(), False),
        StructField("executor", StringType(), False),
        StructField("host", StringType(), False),
    ]
)
assert tuple(f.name for f in RESULT_SCHEMA.fields) == RAW_COLUMNS
RawRow = tuple[str, int, int, str, str, float, float, int, int, int, str, str]

# Quick JVM start for a short-lived driver (~40% faster session start) and errors-only logging.
_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
_LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# The loggers Spark's shell logic compares with the root level: when equal, it announces nothing.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.context.name = org.apache.spark.SparkContext
logger.context.level = error
"""


def build_session(
    master: str,
    app_name: str,
    driver_host: str | None,
    work_dir: Path,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    local = is_local_master(master)
    # spark-class puts SPARK_CONF_DIR on the driver's classpath: our log4j2.properties (errors
    # only) replaces Spark's default profile, which would log at WARN and announce itself.
    log_config = work_dir / "log4j2.properties"
    log_config.write_text(_LOG4J2)
    os.environ["SPARK_CONF_DIR"] = str(work_dir)
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        # The executors' Python: the same path by default, PYSPARK_PYTHON (or the
        # spark.pyspark.python setting) when the workers have it elsewhere.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if local:
        # Everything (driver RPC, block manager, Python workers) binds to loopback only.
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        os.environ["SPARK_LOCAL_HOSTNAME"] = "localhost"
        driver_host = "127.0.0.1"
    logging.getLogger("py4j").setLevel(logging.ERROR)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.task.maxFailures", "1")
        .config("spark.stage.maxConsecutiveAttempts", "1")
        .config("spark.speculation", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.driver.extraJavaOptions", f"{_JVM_OPTIONS} -Dlog4j2.configurationFile={log_config}")
    )
    if driver_host:
        builder = builder.config("spark.driver.host", driver_host)
    if local:
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not local:
        spark.sparkContext.addPyFile(str(_code_archive(work_dir)))
    return spark


def _code_archive(work_dir: Path) -> Path:
    """loadtest/ and protocol/ as a zip for the executors of a cluster master."""
    root = Path(__file__).resolve().parent.parent
    archive = work_dir / "loadtest-code.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("loadtest", "protocol"):
            for path in sorted((root / package).rglob("*.py")):
                zf.write(path, path.relative_to(root).as_posix())
    return archive


def executor_identity() -> tuple[str, str]:
    """(executor id, host) of the Python worker running this code.

    The executor id is the JVM's; Python workers see it in the log URLs their executor passes
    down (standalone and YARN set SPARK_LOG_URL_*), else in the executor's working directory
    (standalone: WORK_DIR/APP_ID/EXECUTOR_ID). Local mode runs tasks in the driver.
    """
    host = socket.gethostname()
    for name in ("SPARK_LOG_URL_STDERR", "SPARK_LOG_URL_STDOUT"):
        url = os.environ.get(name)
        if url:
            ids = urllib.parse.parse_qs(urllib.parse.urlparse(url).query).get("executorId")
            if ids:
                return ids[0], host
    cwd = Path.cwd()
    if cwd.parent.name.startswith("app-"):
        return cwd.name, host
    return "driver", host


def _with_identity(rows: list[ResultRow]) -> Iterator[RawRow]:
    executor, host = executor_identity()
    return ((*row, executor, host) for row in rows)


def _run_partition(payload: dict[str, Any], index: int, _rows: Iterator[Any]) -> Iterator[RawRow]:
    return _with_identity(run_task(payload, index))


def _run_barrier_partition(payload: dict[str, Any], _rows: Iterator[Any]) -> Iterator[RawRow]:
    context = BarrierTaskContext.get()
    context.barrier()  # every task starts its members together
    return _with_identity(run_task(payload, context.partitionId()))


def run_load(spark: SparkSession, scenario: Scenario, raw_path: Path) -> DataFrame:
    """Run the load once and write its raw rows to Parquet; return the DataFrame read back."""
    sc = spark.sparkContext
    payload = scenario.to_dict()
    seeds = sc.parallelize(range(scenario.tasks), scenario.tasks)
    if scenario.barrier:
        rows = seeds.barrier().mapPartitions(functools.partial(_run_barrier_partition, payload))
    else:
        rows = seeds.mapPartitionsWithIndex(functools.partial(_run_partition, payload))
    sc.setJobDescription(f"load {scenario.target} ({scenario.members} members over {scenario.tasks} tasks)")
    frame = spark.createDataFrame(rows, RESULT_SCHEMA, verifySchema=False)
    frame.write.mode("errorifexists").parquet(str(raw_path))
    sc.setJobDescription(None)  # type: ignore[arg-type]
    return spark.read.schema(RESULT_SCHEMA).parquet(str(raw_path))


def new_work_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="loadtest-spark-"))
