"""SIGKILL with share groups through the gateway (docs/share-groups.md, "The data plane"): a share
consumer killed while it holds records, and the gateway killed under load."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer, TopicPartition

from tests.gateway.conftest import Upstream, gateway_settings, running_gateway
from tests.gateway.share_support import (
    Received,
    all_assigned,
    create_topic,
    poll_once,
    produce,
    share_consumer,
    wait_for,
)
from tests.support.server import REPO, start_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

LOCK_MS = "2000"


def test_records_of_a_killed_consumer_come_back(upstream: Upstream) -> None:
    with running_gateway(upstream.bootstrap, **{"group-share-record-lock-duration-ms": LOCK_MS}) as gateway:
        topic, group_id = f"held-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        create_topic(gateway.bootstrap, topic, 1)
        victim = subprocess.Popen(
            [sys.executable, "-m", "tests.gateway.share_consumer_process", gateway.bootstrap, topic, group_id],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(victim.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
        reader.start()
        try:
            wait_for(
                lambda: all_assigned(gateway.bootstrap, group_id, 1, 1),
                lambda: reader.join(0.2),
                60,
                "victim joins",
            )
            reader.join(2)  # its share-partition started
            produce(gateway.bootstrap, topic, [f"v{n}" for n in range(10)], per_batch=10)
            wait_for(lambda: bool(lines), lambda: reader.join(0.2), 60, "the victim holds records")
        finally:
            victim.kill()
            victim.wait(10)
            reader.join(5)
            if victim.stdout is not None:
                victim.stdout.close()
        held = sorted(line.split()[1] for line in lines)
        assert held == sorted(f"v{n}" for n in range(10))
        survivor = share_consumer(
            gateway.bootstrap, group_id, topic, **{"share.acknowledgement.mode": "explicit"}
        )
        received = Received()

        def step() -> None:
            for message in poll_once(survivor, received):
                survivor.acknowledge(message, AcknowledgeType.ACCEPT)

        try:
            wait_for(lambda: len(received.records) >= 10, step, 90, "the held records again")
            survivor.commit_sync()
        finally:
            survivor.close()
        assert sorted(received.values()) == held
        assert {count for _, count in received.records} == {2}  # delivered again, counted


# The million-record variant runs on demand (-m slow): docs/share-groups.md#performance.
@pytest.mark.parametrize(
    "records",
    [400, pytest.param(1_000_000, marks=[pytest.mark.slow, pytest.mark.timeout(3600)], id="1M")],
)
def test_sigkill_of_the_gateway_under_load(upstream: Upstream, tmp_path: Path, records: int) -> None:
    """Two consumers accept and commit as they go; the gateway is killed mid-stream and started
    again on the same storage: no record is lost, none accepted before the kill comes again, and
    those in flight at the kill come back counted."""
    storage = f"sqlite:///{tmp_path / 'gateway.db'}"
    settings = gateway_settings(upstream.bootstrap, **{"group-share-record-lock-duration-ms": LOCK_MS})
    topic, group_id = f"load-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    values = [f"r{n}" for n in range(records)]
    # Acknowledgements the gateway confirmed, as librdkafka reports them (commit_sync reports a
    # refused one in its answer, an acknowledgement sent with a fetch only to this callback).
    accepted: Counter[str] = Counter()
    value_at: dict[tuple[int, int], str] = {}

    def confirmed(offsets: dict[TopicPartition, set[int]], error: KafkaException | None) -> None:
        if error is None:
            accepted.update(
                value_at[(tp.partition, offset)] for tp, taken in offsets.items() for offset in taken
            )

    def consume(consumers: list[ShareConsumer], delivered: list[tuple[str, int]], until: int) -> None:
        def step() -> None:
            for consumer in consumers:
                received = Received()
                for message in poll_once(consumer, received, 0.1):
                    value_at[(message.partition(), message.offset())] = bytes(message.value()).decode()
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                delivered.extend(received.records)
                if received.records:
                    consumer.commit_sync()

        # A record whose lock ran out before its acknowledgement arrived is delivered again (and
        # its first acknowledgement refused): counted are the records accepted, once each.
        wait_for(lambda: len(accepted) >= until, step, 120 + records // 1000, f"{until} records accepted")

    def share_consumers(bootstrap: str) -> list[ShareConsumer]:
        consumers = [share_consumer(bootstrap, group_id, topic, **explicit) for _ in range(2)]
        for consumer in consumers:
            consumer.set_acknowledgement_commit_callback(confirmed)
        return consumers

    explicit = {"share.acknowledgement.mode": "explicit"}
    before: list[tuple[str, int]] = []
    first = start_server(storage, settings)
    try:
        create_topic(first.bootstrap, topic, 2)
        consumers = share_consumers(first.bootstrap)
        wait_for(
            lambda: all_assigned(first.bootstrap, group_id, 2, 2),
            lambda: [poll_once(c, Received()) for c in consumers],
            60,
            "assignment",
        )
        for _ in range(3):
            for consumer in consumers:
                poll_once(consumer, Received())
        produce(first.bootstrap, topic, values, partitions=2, per_batch=max(10, records // 1000))
        consume(consumers, before, 150 * records // 400)
        for consumer in consumers:  # in flight at the kill: polled, never acknowledged
            poll_once(consumer, Received(), 0.5)
    finally:
        first.kill()
    for consumer in consumers:
        consumer.close()
    accepted_before = set(accepted)
    after: list[tuple[str, int]] = []
    second = start_server(storage, settings)
    try:
        second.wait_loaded()
        consumers = share_consumers(second.bootstrap)
        try:
            consume(consumers, after, len(values))
        finally:
            for consumer in consumers:
                consumer.close()
    finally:
        second.stop()
    lost = set(values) - set(accepted)
    twice = sorted(v for v, count in accepted.items() if count > 1)
    assert not lost and not twice, (
        f"{len(lost)} lost (e.g. {sorted(lost)[:3]}), {len(twice)} accepted twice: "
        f"{[(v, [c for w, c in before if w == v], [c for w, c in after if w == v]) for v in twice[:3]]}"
    )
    assert not accepted_before & {v for v, _ in after}  # nothing accepted before the kill came again
    delivered_before = {v for v, _ in before}
    again = [(v, count) for v, count in after if v in delivered_before]
    assert all(count >= 2 for _, count in again)  # delivered again, counted
