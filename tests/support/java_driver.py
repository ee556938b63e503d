"""Kafka's own Java clients and tools, driven from the tests through one long-lived JVM.

``tests/java/src/main/java/coordinator/tests/Driver.java`` reads one JSON request a line and
answers one JSON line: a consumer scenario (several ``KafkaConsumer`` threads of one group), an
``Admin`` call, one of Kafka's command-line tools run in-process (``kafka-consumer-groups``,
``kafka-configs``). One JVM serves a whole test session: JVM start-up is the cost on small machines.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.kafka_broker import KAFKA_LIB, KafkaUnavailable, kafka_classpath

HELPERS_JAR = KAFKA_LIB.parent / "kafka-test-helpers-1.jar"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


class DriverFailed(Exception):
    """The driver answered a request with an exception (its Java stack trace is the message)."""


@dataclass(frozen=True)
class ToolRun:
    status: int
    stdout: str
    stderr: str


class JavaDriver:
    def __init__(self, log_path: Path) -> None:
        if not HELPERS_JAR.is_file():
            raise KafkaUnavailable(f"no {HELPERS_JAR.name}: run `bash .ci/setup`")
        self.log_path = log_path
        log = log_path.open("ab")
        self.process = subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-cp", f"{kafka_classpath()}{os.pathsep}{HELPERS_JAR}", "coordinator.tests.Driver"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True,
        )  # fmt: skip
        log.close()
        self._pending = b""
        self.call("ping", timeout=120)

    def call(self, op: str, timeout: float = 180, **fields: Any) -> dict[str, Any]:
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps({"op": op, **fields}).encode() + b"\n")
        process.stdin.flush()
        line = self._read_line(timeout)
        answer: dict[str, Any] = json.loads(line)
        if not answer.pop("ok"):
            raise DriverFailed(f"{op} {fields}: {answer['trace']}")
        return answer

    def _read_line(self, timeout: float) -> bytes:
        assert self.process.stdout is not None
        descriptor = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the Java driver did not answer in {timeout} s (log: {self.log_path})")
            ready, _, _ = select.select([descriptor], [], [], remaining)
            if ready:
                chunk = os.read(descriptor, 1 << 16)
                if not chunk:
                    raise DriverFailed(f"the Java driver exited (log: {self.log_path})")
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def tool(self, main_class: str, *args: str) -> ToolRun:
        answer = self.call("tool", main=main_class, args=list(args))
        return ToolRun(answer["status"], answer["stdout"], answer["stderr"])

    def admin(self, bootstrap: str, action: str, **fields: Any) -> Any:
        """The action's result, or ``{"exception": name}`` when the whole call failed."""
        answer = self.call("admin", bootstrap=bootstrap, action=action, **fields)
        return answer["result"] if "result" in answer else {"exception": answer["exception"]}

    def produce(self, bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
        self.call(
            "produce", bootstrap=bootstrap, topic=topic, partitions=partitions, per_partition=per_partition
        )

    def consume(self, bootstrap: str, group: str, **scenario: Any) -> dict[str, Any]:
        """Runs the consumers until the group is stable, commits, reports; with ``hold=name`` they
        keep running (heartbeating, polling) until ``release(name)``."""
        # Each of up to two rounds may wait twice its 90 s patience while the group progresses.
        return self.call("consume", timeout=420, bootstrap=bootstrap, group=group, **scenario)

    def wait_for_group_configs(
        self, bootstrap: str, group: str, values: dict[str, str], timeout: float = 20
    ) -> None:
        """Until Admin describes the group's configs with these values: Kafka applies a config
        change through its metadata log, so a broker may describe the old value for a moment
        after acknowledging the change."""
        deadline = time.monotonic() + timeout
        while True:
            described = self.admin(bootstrap, "describe_configs", group=group)
            current = {e["name"]: e["value"] for e in described} if isinstance(described, list) else {}
            if all(current.get(name) == value for name, value in values.items()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{bootstrap}: group {group} configs {current}, not {values}")
            time.sleep(0.1)

    def release(self, hold: str) -> None:
        """Stops the consumers a ``consume(..., hold=name)`` left running."""
        self.call("release", hold=hold)

    def close(self) -> None:
        process = self.process
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()
