"""No upstream address ever reaches a client: every response byte the gateway sends is searched."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tests.gateway.clients import aiokafka_member, confluent_member, consume_until, produce_kafka_python
from tests.gateway.conftest import running_tansu
from tests.gateway.inprocess import recorded_gateway

pytestmark = pytest.mark.integration

# Tansu advertises itself under this name; the gateway advertises 127.0.0.1, so the name in any
# response byte would be an upstream address leaking through.
UPSTREAM_HOST = "localhost"


@pytest.fixture(scope="module")
def tansu_by_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with running_tansu(tmp_path_factory.mktemp("tansu"), advertised_host=UPSTREAM_HOST) as port:
        yield port


def test_no_upstream_host_or_port_in_any_response(
    monkeypatch: pytest.MonkeyPatch, tansu_by_name: int
) -> None:
    settings = {
        "upstream_bootstrap_servers": f"{UPSTREAM_HOST}:{tansu_by_name}",
        "upstream_metadata_refresh_ms": 500,
    }
    with recorded_gateway(monkeypatch, settings) as (bootstrap, sent):
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic("leaks", 3, 1)])
            described = admin.describe_cluster()
        finally:
            admin.close()
        port = int(bootstrap.rsplit(":", 1)[1])
        assert all(b["host"] == "127.0.0.1" and b["port"] != tansu_by_name for b in described["brokers"])
        assert any(b["port"] == port for b in described["brokers"])  # the gateway as group coordinator

        values = [f"leak-test-{i}".encode() for i in range(300)]
        produce_kafka_python(bootstrap, "leaks", values)
        stop = threading.Event()
        members = [
            confluent_member(bootstrap, "leaks", "leaky", stop),
            aiokafka_member(bootstrap, "leaks", "leaky", stop),
        ]
        consume_until(members, set(values), 3, stop, timeout=60)

        confluent_admin = AdminClient({"bootstrap.servers": bootstrap})
        cluster = confluent_admin.describe_cluster(request_timeout=10).result()
        assert {(n.host, n.port) for n in cluster.nodes} >= {("127.0.0.1", port)}

        # Transactions: FindCoordinator for a transactional id is looked up upstream and rewritten.
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-1"})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("leaks", b"in a transaction")
        # Transactional offsets: AddOffsetsToTxn goes upstream, TxnOffsetCommit stays here.
        producer.send_offsets_to_transaction([TopicPartition("leaks", 0, 1)], _group_metadata(bootstrap), 10)
        producer.abort_transaction(10)

    everything = b"".join(sent)
    assert everything, "nothing was recorded"
    assert UPSTREAM_HOST.encode() not in everything
    assert str(tansu_by_name).encode() not in everything


def _group_metadata(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "leaky"})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()
