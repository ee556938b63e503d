"""A throwaway Spark standalone cluster on loopback: one master and N workers, started with the
launcher classes the pyspark package ships (`bin/spark-class`), each in its own process group,
with free ports (web UIs included) and work directories under a temporary directory."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
_LOG4J2 = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class SparkCluster:
    master_url: str
    master_ui_port: int
    log_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def workers_alive(self) -> int:
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as response:  # loopback only
            import json

            state = json.load(response)
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def logs(self) -> str:
        return "\n".join(
            f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.log_dir.glob("*.log")
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in self.processes:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)


def _launch(cluster: SparkCluster, name: str, argv: list[str], env: dict[str, str]) -> None:
    log = (cluster.log_dir / f"{name}.log").open("wb")
    process = subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), *argv],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,  # its own process group: stopped with everything it forked
    )
    log.close()
    cluster.processes.append(process)


@contextlib.contextmanager
def spark_standalone(
    base: Path, workers: int = 2, cores: int = 1, memory: str = "512m"
) -> Iterator[SparkCluster]:
    conf = base / "conf"
    conf.mkdir(parents=True)
    (conf / "log4j2.properties").write_text(_LOG4J2)
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "SPARK_DAEMON_JAVA_OPTS": _JAVA_OPTIONS,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(base / "logs"),
        "SPARK_LOCAL_DIRS": str(base / "local"),  # executors' scratch space
        "PYSPARK_PYTHON": sys.executable,
    }
    master_port, master_ui = free_port(), free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{master_port}", master_ui, base / "logs")
    cluster.log_dir.mkdir()
    try:
        _launch(
            cluster,
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(master_port),
             "--webui-port", str(master_ui)],
            env,
        )  # fmt: skip
        for index in range(workers):
            work = base / f"worker-{index}"
            work.mkdir()
            _launch(
                cluster,
                f"worker-{index}",
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", str(free_port()),
                 "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
                 "--work-dir", str(work), cluster.master_url],
                env,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError, ValueError):
                if cluster.workers_alive() == workers:
                    break
            for process in cluster.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {process.returncode}:\n{cluster.logs()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} workers did not register in 60 s:\n{cluster.logs()}")
            time.sleep(0.3)
        yield cluster
    finally:
        cluster.stop()
