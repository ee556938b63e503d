"""The Kafka Streams 4.4 word count of tests/java (WordCount.java) as a test component: one JVM
per instance, its output in a log file, stopped by PID; and the checks of its output topic."""

from __future__ import annotations

import collections
import random
import signal
import struct
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.kafka_broker import KAFKA_LIB, REPO, KafkaUnavailable, kafka_classpath

HELPERS_JAR = REPO / "tests" / "java" / "target" / "kafka-test-helpers-1.jar"


@dataclass
class StreamsInstance:
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        return "RUNNING" in self.text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class WordCountApp:
    """Instances of the word count, started one by one (each its own JVM and state directory)."""

    def __init__(
        self,
        bootstrap: str,
        application_id: str,
        work: Path,
        topics: tuple[str, str],
        protocol: str = "streams",
        guarantee: str = "at_least_once",
    ) -> None:
        if not HELPERS_JAR.is_file():
            raise KafkaUnavailable(f"no {HELPERS_JAR}: run `bash .ci/setup`")
        self.classpath = f"{HELPERS_JAR}:{kafka_classpath()}"
        self.bootstrap = bootstrap
        self.application_id = application_id
        self.work = work
        self.protocol = protocol
        self.guarantee = guarantee  # processing.guarantee: at_least_once or exactly_once_v2
        self.topics = topics
        self.instances: list[StreamsInstance] = []

    def start(self) -> StreamsInstance:
        i = len(self.instances)
        log = self.work / f"streams-{i}.log"
        state = self.work / f"state-{i}"
        state.mkdir(exist_ok=True)
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", self.classpath,
                 "coordinator.tests.WordCount", self.bootstrap, self.application_id,
                 *self.topics, str(state), "1", self.protocol, self.guarantee],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        instance = StreamsInstance(process, log)
        self.instances.append(instance)
        return instance

    def logs(self) -> str:
        return "\n".join(i.text()[-3000:] for i in self.instances)

    def wait_running(self, instances: list[StreamsInstance], timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(i.running() for i in instances):
            assert time.monotonic() < deadline, self.logs()
            assert all(i.process.poll() is None for i in instances), self.logs()
            time.sleep(0.2)

    def stop_all(self) -> None:
        for instance in self.instances:
            instance.stop()


@contextmanager
def word_count_app(
    bootstrap: str,
    application_id: str,
    work: Path,
    topics: tuple[str, str],
    protocol: str = "streams",
    guarantee: str = "at_least_once",
) -> Iterator[WordCountApp]:
    """``topics``: the input and output topics."""
    app = WordCountApp(bootstrap, application_id, work, topics, protocol, guarantee)
    try:
        yield app
    finally:
        app.stop_all()


def input_lines(seed: int = 7, lines: int = 300) -> tuple[list[str], dict[str, int]]:
    """Lines of words from a small vocabulary, and how often each word occurs."""
    rng = random.Random(seed)
    vocabulary = [f"w{i:02d}" for i in range(25)]
    text = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 6))) for _ in range(lines)]
    return text, dict(collections.Counter(w for line in text for w in line.split()))


def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        for i, line in enumerate(lines):
            producer.send(topic, key=str(i).encode(), value=line.encode())
        producer.flush(60)
    finally:
        producer.close()


def latest_counts(
    bootstrap: str,
    topic: str,
    expected: dict[str, int],
    timeout_s: float,
    at_least: bool = False,
    isolation_level: str = "read_uncommitted",
) -> dict[str, int]:
    """The last count of every word in the output topic, read until it equals ``expected`` (or,
    ``at_least``, reaches it: duplicates at least once) or the time is up."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=500,
        isolation_level=isolation_level,
    )
    counts: dict[str, int] = {}
    try:
        deadline = time.monotonic() + timeout_s
        assigned = False

        def done() -> bool:
            if at_least:
                return all(counts.get(w, 0) >= n for w, n in expected.items())
            return counts == expected

        while time.monotonic() < deadline and not done():
            if not assigned:
                partitions = consumer.partitions_for_topic(topic)
                if not partitions:
                    time.sleep(0.5)
                    continue
                consumer.assign([TopicPartition(topic, p) for p in partitions])
                consumer.seek_to_beginning()
                assigned = True
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    counts[record.key.decode()] = struct.unpack(">q", record.value)[0]
    finally:
        consumer.close()
    return counts


__all__ = ["KAFKA_LIB", "WordCountApp", "input_lines", "latest_counts", "produce_lines", "word_count_app"]
