"""A share consumer in a process of its own, to be killed while it holds records: it polls in
explicit acknowledgement mode, prints each value it receives ("got <value>") and never
acknowledges anything.

    python -m tests.gateway.share_consumer_process BOOTSTRAP TOPIC GROUP
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import ShareConsumer


def main() -> None:
    bootstrap, topic, group_id = sys.argv[1:4]
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "share.acknowledgement.mode": "explicit",
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    while True:
        messages = [m for m in (consumer.poll(0.5) or []) if m.error() is None]
        for message in messages:
            print(f"got {bytes(message.value() or b'').decode()}", flush=True)
        if messages:
            while True:  # holds its records until killed
                time.sleep(1)


if __name__ == "__main__":
    main()
