"""One KIP-848 group member (confluent-kafka, group.protocol=consumer) in its own process.

Run as ``python consumer_protocol_member.py '<json config>'`` by tests/integration/
test_consumer_protocol.py, which SIGKILLs it by PID or writes ``close`` on its stdin (a clean
close(), which leaves the group). EOF on stdin also closes it, so a test that dies leaves no member
behind. It reports its rebalance callbacks and errors as JSON lines on stdout, each stamped with
time.monotonic() (the system-wide CLOCK_MONOTONIC, comparable with the test process's clock).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any


def main(config_json: str) -> None:
    from confluent_kafka import Consumer

    config = json.loads(config_json)
    stop = threading.Event()
    lock = threading.Lock()

    def emit(event: str, **fields: Any) -> None:
        with lock:
            print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()

    settings: dict[str, Any] = {
        "bootstrap.servers": config["bootstrap"],
        "broker.address.family": "v4",
        "group.id": config["group"],
        "group.protocol": "consumer",
        "client.id": config["name"],
        "enable.auto.commit": False,
        "error_cb": lambda error: emit("error", code=error.name(), text=error.str()),
    }
    if config.get("instance_id"):
        settings["group.instance.id"] = config["instance_id"]
    consumer = Consumer(settings)

    def callback(kind: str) -> Any:
        def on_event(c: Any, partitions: list[Any]) -> None:
            emit(kind, partitions=sorted(tp.partition for tp in partitions), member_id=c.memberid())

        return on_event

    threading.Thread(target=watch_stdin, daemon=True).start()
    consumer.subscribe(
        [config["topic"]],
        on_assign=callback("assign"),
        on_revoke=callback("revoke"),
        on_lost=callback("lost"),
    )
    emit("started")
    try:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is not None and message.error():
                emit("error", code=message.error().name(), text=message.error().str())
    finally:
        consumer.close()
        emit("closed")


if __name__ == "__main__":
    main(sys.argv[1])
