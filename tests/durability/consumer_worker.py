"""A kafka-python KafkaConsumer in its own process, for the restart test.

Run as ``python -m tests.durability.consumer_worker '<json config>'``. It subscribes with a
ConsumerRebalanceListener and polls until told to stop, printing one JSON event per line on
stdout: ``assigned`` / ``revoked`` (every listener call, with generation and member id),
``status`` (about every 0.5 s: generation, member id, assignment), ``committed`` /
``commit_failed``, ``poll_error`` (a retriable error raised by poll(), which is retried),
``crashed``. Commands on stdin, one per line: ``commit {"partition": offset, ...}``
(a synchronous commit with the group's generation and member id, made from the polling thread
as kafka-python requires) and ``close``. EOF on stdin (the test went away) also closes it, and it
gives up by itself after ``max_seconds``.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import sys
import threading
import time
from typing import Any

# Long enough that a join+sync round trip rarely outlasts one poll (see the kafka-python 3.0.12
# note in main()), short enough to answer commands promptly.
POLL_TIMEOUT_MS = 500


def main(config: dict[str, Any]) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    if config.get("log_file"):  # kafka-python's own account of the group protocol, for diagnosis
        handler = logging.FileHandler(config["log_file"])
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
        )
        kafka_log = logging.getLogger("kafka")
        kafka_log.addHandler(handler)
        kafka_log.setLevel(logging.INFO)
        logging.getLogger("kafka.coordinator").setLevel(logging.DEBUG)

    lock = threading.Lock()
    commands: queue.Queue[str] = queue.Queue()

    def emit(event: str, **fields: Any) -> None:
        with lock:
            print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)

    def read_stdin() -> None:
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("close")

    threading.Thread(target=read_stdin, daemon=True).start()
    consumer = KafkaConsumer(
        bootstrap_servers=config["bootstrap"],
        group_id=config["group"],
        client_id=config["client_id"],
        session_timeout_ms=10_000,
        heartbeat_interval_ms=1_000,
        max_poll_interval_ms=60_000,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        reconnect_backoff_max_ms=500,
    )

    def group_metadata() -> tuple[int, str]:
        meta = consumer._coordinator.group_metadata()
        return meta.generation_id, meta.member_id

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            generation, member_id = group_metadata()
            emit(
                "revoked",
                partitions=sorted(tp.partition for tp in revoked),
                generation=generation,
                member_id=member_id,
            )

        def on_partitions_assigned(self, assigned: Any) -> None:
            generation, member_id = group_metadata()
            emit(
                "assigned",
                partitions=sorted(tp.partition for tp in assigned),
                generation=generation,
                member_id=member_id,
            )

    topic = config["topic"]
    # A pattern subscription makes poll() refresh the metadata before the first JoinGroup. With a
    # plain subscription the leader assigns before it knows the topic and rejoins when the
    # metadata arrives, and kafka-python 3.0.12 can lose that rejoin: when a poll() times out
    # between the leader's assignment and the SyncGroup response, need_rejoin() is already False,
    # the join task is never awaited again, heartbeats stay disabled and the coordinator expires
    # the member after session.timeout.ms (the consumer never rejoins).
    consumer.subscribe(pattern=f"^{re.escape(topic)}$", listener=Listener())
    emit("started")
    deadline = time.monotonic() + config["max_seconds"]
    next_status = 0.0
    try:
        while time.monotonic() < deadline:
            try:
                consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
            except KafkaError as exc:
                # kafka-python 3.0.12 lets a failed background metadata refresh (ECONNREFUSED
                # while the broker restarts) escape from poll(); an application retries.
                if not exc.retriable:
                    raise
                emit("poll_error", error=repr(exc))
                time.sleep(0.1)
            now = time.monotonic()
            if now >= next_status:
                next_status = now + 0.5
                generation, member_id = group_metadata()
                emit(
                    "status",
                    generation=generation,
                    member_id=member_id,
                    partitions=sorted(tp.partition for tp in consumer.assignment()),
                )
            try:
                command = commands.get_nowait()
            except queue.Empty:
                continue
            if command == "close":
                break
            if command.startswith("commit "):
                offsets = {int(p): o for p, o in json.loads(command[len("commit ") :]).items()}
                try:
                    consumer.commit(
                        {
                            TopicPartition(topic, p): OffsetAndMetadata(o, f"by {config['client_id']}", -1)
                            for p, o in offsets.items()
                        },
                        timeout_ms=15_000,
                    )
                except Exception as exc:
                    emit("commit_failed", error=repr(exc))
                else:
                    generation, member_id = group_metadata()
                    emit("committed", offsets=offsets, generation=generation, member_id=member_id)
    except BaseException as exc:
        emit("crashed", error=repr(exc))
        raise
    finally:
        consumer.close(autocommit=False)
        emit("closed")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
