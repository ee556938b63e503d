"""The share-group data plane through the gateway (docs/share-groups.md, "The data plane"): real
librdkafka share consumers (confluent-kafka's ShareConsumer) read records the gateway fetches from
the upstream (Tansu, which has no share groups, and Kafka 4.4), each record acquired by one
consumer and acknowledged one by one."""

from __future__ import annotations

import uuid
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import share_fetch as sf
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.gateway.conftest import Upstream, running_gateway, running_tansu
from tests.gateway.share_support import (
    Received,
    all_assigned,
    create_topic,
    poll_once,
    produce,
    share_consumer,
    wait_for,
)
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def names(prefix: str) -> tuple[str, str]:
    return f"{prefix}-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize(("consumers", "partitions"), [(3, 1), (5, 2)])
@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_every_record_is_delivered_exactly_once_under_accept(
    gateway: ServerProcess, consumers: int, partitions: int, mode: str
) -> None:
    exactly_once(gateway.bootstrap, consumers, partitions, mode)


def test_released_records_come_back_counted_and_rejected_ones_never(gateway: ServerProcess) -> None:
    release_and_reject(gateway.bootstrap)


def exactly_once(bootstrap: str, consumers: int, partitions: int, mode: str) -> None:
    """``consumers`` share consumers on ``partitions`` partitions receive 300 records (more if one consumer took them all), each once."""
    topic, group_id = names("queue")
    create_topic(bootstrap, topic, partitions)
    group = [
        share_consumer(bootstrap, group_id, topic, **{"share.acknowledgement.mode": mode})
        for _ in range(consumers)
    ]
    received = [Received() for _ in group]

    def step() -> None:
        for consumer, got in zip(group, received, strict=True):
            for message in poll_once(consumer, got, 0.1):
                if mode == "explicit":
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)

    try:
        wait_for(lambda: all_assigned(bootstrap, group_id, consumers, partitions), step, 60, "assignment")
        for _ in range(5):  # every share-partition started (at the log end) before producing
            step()
        values = [f"r{n}" for n in range(300)]
        for first in range(0, len(values), 30):  # the load arrives while the consumers poll
            produce(bootstrap, topic, values[first : first + 30], partitions)
            step()

        def all_received() -> bool:
            return sum(len(r.records) for r in received) >= len(values)

        wait_for(all_received, step, 90, "every record")
        # Whoever fetches first acquires a whole batch: on a loaded machine one consumer's fetcher
        # can take every batch of the first 300. Keep the load coming (bounded) until a second
        # consumer has had records, which is what sharing the partitions means.
        more = 0
        while sum(1 for r in received if r.records) < 2 and more < 30:
            batch = [f"r{len(values) + n}" for n in range(10)]
            values += batch
            produce(bootstrap, topic, batch, partitions)
            more += 1
            wait_for(all_received, step, 90, "every record")
        for _ in range(10):  # anything delivered twice would show up now
            step()
        for consumer in group:
            consumer.commit_sync()
    finally:
        for consumer in group:
            consumer.close()
    delivered = Counter(v for r in received for v in r.values())
    assert sorted(delivered) == sorted(values)
    assert set(delivered.values()) == {1}
    assert all(count == 1 for r in received for _, count in r.records)
    assert sum(1 for r in received if r.records) >= 2  # shared, not all to one consumer


def release_and_reject(bootstrap: str) -> None:
    """A released record comes back with delivery count 2; a rejected one never."""
    topic, group_id = names("release")
    create_topic(bootstrap, topic, 1)
    consumer = share_consumer(bootstrap, group_id, topic, **{"share.acknowledgement.mode": "explicit"})
    received = Received()
    try:
        wait_for(
            lambda: all_assigned(bootstrap, group_id, 1, 1),
            lambda: poll_once(consumer, received),
            60,
            "assignment",
        )
        for _ in range(5):
            poll_once(consumer, received)
        produce(bootstrap, topic, ["keep", "again", "drop"])
        decided: dict[str, int] = {}

        def step() -> None:
            for message in poll_once(consumer, received):
                value = message.value().decode()
                if value == "again" and message.delivery_count() == 1:
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                elif value == "drop":
                    consumer.acknowledge(message, AcknowledgeType.REJECT)
                else:
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                decided[value] = message.delivery_count()

        wait_for(
            lambda: decided.get("again", 0) == 2 and "keep" in decided and "drop" in decided,
            step,
            60,
            "redelivery",
        )
        for _ in range(10):
            step()
        consumer.commit_sync()
    finally:
        consumer.close()
    assert received.records.count(("again", 1)) == 1
    assert received.records.count(("again", 2)) == 1
    assert received.values().count("drop") == 1  # rejected: never again
    assert received.values().count("keep") == 1


def test_the_delivery_limit_archives(upstream: Upstream) -> None:
    with running_gateway(upstream.bootstrap, **{"group-share-delivery-count-limit": "2"}) as gateway:
        topic, group_id = names("limit")
        create_topic(gateway.bootstrap, topic, 1)
        consumer = share_consumer(
            gateway.bootstrap, group_id, topic, **{"share.acknowledgement.mode": "explicit"}
        )
        received = Received()
        try:
            wait_for(
                lambda: all_assigned(gateway.bootstrap, group_id, 1, 1),
                lambda: poll_once(consumer, received),
                60,
                "assignment",
            )
            for _ in range(5):
                poll_once(consumer, received)
            produce(gateway.bootstrap, topic, ["poison", "fine"])

            def step() -> None:
                for message in poll_once(consumer, received):
                    if message.value() == b"poison":
                        consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    else:
                        consumer.acknowledge(message, AcknowledgeType.ACCEPT)

            wait_for(
                lambda: received.values().count("poison") >= 2 and "fine" in received.values(),
                step,
                60,
                "two deliveries",
            )
            for _ in range(15):  # the limit reached: released, it is archived, never delivered again
                step()
            consumer.commit_sync()
        finally:
            consumer.close()
        assert [c for v, c in received.records if v == "poison"] == [1, 2]


def test_an_unreachable_upstream_is_a_partition_error(tmp_path: Path) -> None:
    """The upstream gone: the partition answers NOT_LEADER_OR_FOLLOWER (the client refreshes its
    metadata and retries), the session and the other fields stay intact."""
    with ExitStack() as upstream_running, ExitStack() as gateway_running:
        port = upstream_running.enter_context(running_tansu(tmp_path))
        gateway = gateway_running.enter_context(running_gateway(f"127.0.0.1:{port}"))
        topic = f"gone-{uuid.uuid4().hex[:8]}"
        create_topic(gateway.bootstrap, topic, 1)
        with WireClient(gateway.bootstrap) as client:
            heartbeat = ShareGroupHeartbeatRequest(
                group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=[topic]
            )
            topic_ids: list[bytes] = []

            def beat() -> None:
                joined = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat)
                assert joined.error_code == 0, joined
                heartbeat.member_epoch, heartbeat.subscribed_topic_names = joined.member_epoch, None
                if joined.assignment is not None:
                    topic_ids[:] = [tp.topic_id for tp in joined.assignment.topic_partitions]

            wait_for(lambda: bool(topic_ids), beat, 30, "the partition assigned")  # once the catalog has it
            topic_id = topic_ids[0]

            def share_fetch(epoch: int) -> sf.ShareFetchResponse:
                partition = sf.FetchPartition(partition_index=0)
                request = sf.ShareFetchRequest(
                    group_id="g", member_id="m", share_session_epoch=epoch, max_wait_ms=100, min_bytes=1,
                    max_records=10, batch_size=10, topics=[sf.FetchTopic(topic_id=topic_id, partitions=[partition])],
                )  # fmt: skip
                response: sf.ShareFetchResponse = client.request(ApiKey.SHARE_FETCH, 1, request)
                return response

            opened = share_fetch(0)  # the share-partition starts at the log end
            assert opened.error_code == 0 and opened.responses[0].partitions[0].error_code == 0
            upstream_running.close()  # Tansu stopped
            failed = share_fetch(1)
            assert failed.error_code == 0
            assert failed.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
