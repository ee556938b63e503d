"""Transactional offsets through the gateway on Tansu (docs/transactions.md#tansu)."""

from __future__ import annotations

import uuid

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.gateway.conftest import running_gateway
from tests.kafka.test_gateway_transactions import (
    RECORDS,
    UNSTABLE,
    _fetch,
    _group_metadata,
    _producer,
    _read_committed,
)


def test_commit_and_abort_through_the_gateway_on_tansu(tansu_port: int) -> None:
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{name}", f"out-{name}", f"eos-{name}"
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{tansu_port}"})
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (source, sink)]).values():
        future.result(30)  # an offset of a topic that does not exist is refused, as Kafka does
    with running_gateway(f"127.0.0.1:{tansu_port}") as gateway:
        producer = _producer(gateway.bootstrap, f"tx-{name}")
        producer.begin_transaction()
        for i in range(RECORDS):
            producer.produce(sink, f"out-{i}".encode())
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, RECORDS)], _group_metadata(gateway.bootstrap, group), 30
        )
        assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)
        producer.commit_transaction(30)
        assert _fetch(gateway.bootstrap, group, source, stable=True) == (RECORDS, 0)
        assert len(_read_committed(gateway.bootstrap, sink, RECORDS)) == RECORDS

        producer.begin_transaction()
        producer.produce(f"aborted-{name}", b"never visible")
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 2 * RECORDS)], _group_metadata(gateway.bootstrap, group), 30
        )
        producer.abort_transaction(30)
        assert _fetch(gateway.bootstrap, group, source, stable=True) == (RECORDS, 0)
        seen_by_read_committed = _read_committed(gateway.bootstrap, f"aborted-{name}", 1, timeout=5)
        assert seen_by_read_committed == [], "Tansu hands aborted records to read_committed consumers"
