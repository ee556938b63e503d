"""A kafka-python group member in its own process, so a test can SIGKILL it.

Prints ``partition offset value`` for each record before committing its batch: records read
but not committed when it dies are the duplicates a survivor re-reads.
"""

from __future__ import annotations

import sys
import time

from kafka import KafkaConsumer


def main(bootstrap: str, topic: str, group: str) -> None:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=3000, heartbeat_interval_ms=300, max_poll_records=10,
    )  # fmt: skip
    consumer.partitions_for_topic(topic)  # before the first JoinGroup: see tests/gateway/clients.py
    while True:
        for tp, records in consumer.poll(timeout_ms=200).items():
            for record in records:
                print(tp.partition, record.offset, record.value.decode(), flush=True)
            consumer.commit()
            time.sleep(0.05)  # a slow consumer: the kill lands mid-stream


if __name__ == "__main__":
    main(*sys.argv[1:4])
