"""A kafka-python KafkaConsumer in its own process, for the restart test.

Run as ``python -m tests.durability.consumer_worker '<json config>'``. It subscribes with a
ConsumerRebalanceListener and polls until told to stop, printing one JSON event per line on
stdout: ``assigned`` / ``revoked`` (every listener call, with generation and member id),
``status`` (about every 0.5 s: generation, member id, assignment), ``committed`` /
``commit_failed``. Commands on stdin, one per line: ``commit {"partition": offset, ...}``
(a synchronous commit with the group's generation and member id, made from the polling thread
as kafka-python requires) and ``close``. EOF on stdin (the test went away) also closes it, and it
gives up by itself after ``max_seconds``.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from typing import Any


def main(config: dict[str, Any]) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition

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
    consumer.subscribe([topic], listener=Listener())
    emit("started")
    deadline = time.monotonic() + config["max_seconds"]
    next_status = 0.0
    try:
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
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
    finally:
        consumer.close(autocommit=False)
        emit("closed")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
