"""Upstream outages and bad input: retriable errors, one log line per incident, no crash."""

from __future__ import annotations

import gc
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.gateway.clients import committed, confluent_member, produce_kafka_python
from tests.gateway.conftest import running_gateway, running_tansu
from tests.gateway.relay import Relay
from tests.support.ports import free_port
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [
    pytest.mark.integration,
    # kafka-python leaks the socket of a refused connection attempt while a broker is down.
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


def _virtual_broker(gateway: ServerProcess) -> str:
    """The gateway's listener for the upstream broker with the lowest node id."""
    with WireClient(gateway.bootstrap) as client:
        response = client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers if b.node_id != GATEWAY_NODE_ID}
    return brokers[min(brokers)]


GATEWAY_NODE_ID = 1 << 30  # gateway.coordinator.node.id's default


# How long a state of the gateway, its upstream and a client may take to settle on a loaded
# machine: the conditions are polled, so a passing run never waits this out.
SETTLE_S = 60.0


def _wait(condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_unknown_api_to_a_virtual_broker_closes_only_that_connection(gateway: ServerProcess) -> None:
    broker = _virtual_broker(gateway)
    with WireClient(broker) as bystander, WireClient(broker) as bad:
        bad.send_raw(struct.pack(">ihhi", 10, 999, 0, 7) + b"\x00\x00")  # api key 999, empty client id
        assert bad.is_closed_by_peer()
        # A newer version of a forwarded API than the gateway knows is refused the same way.
        with WireClient(broker) as newer:
            newer.send_raw(struct.pack(">ihhi", 10, int(ApiKey.PRODUCE), 99, 8) + b"\x00\x00")
            assert newer.is_closed_by_peer()
        try:
            response = bystander.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        except ConnectionError:
            pytest.fail(f"the bystander lost its connection:\n{gateway.log_text()}")
        assert response.brokers
    assert gateway.process.poll() is None
    assert gateway.log_text().count("api key 999 v0 is not forwarded by the gateway") == 1


def test_a_client_that_only_speaks_the_bootstrap_port(gateway: ServerProcess) -> None:
    # Everything sent to the bootstrap port is forwarded to some upstream broker.
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        admin.create_topics([NewTopic("bootstrap-only", 1, 1)])
    finally:
        admin.close()
    with WireClient(gateway.bootstrap) as client:
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name="bootstrap-only")], allow_auto_topic_creation=False
        )
        response = client.request(ApiKey.METADATA, 12, request)
    assert response.topics[0].error_code == ErrorCode.NONE
    assert len(response.topics[0].partitions) == 1


def test_upstream_unreachable_at_start(tmp_path: Path) -> None:
    port = free_port()
    with running_gateway(f"127.0.0.1:{port}") as gateway:
        # Groups are served at once; data-plane requests get retriable answers.
        with WireClient(gateway.bootstrap) as client:
            request = MetadataRequest(topics=[MetadataRequestTopic(name="later")])
            response = client.request(ApiKey.METADATA, 12, request)
            assert response.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, group_id="early")
        try:
            assert consumer.committed(TopicPartition("later", 0)) is None  # OffsetFetch served here
        finally:
            consumer.close()
        time.sleep(1.5)  # several retries: still one log line
        assert gateway.log_text().count("cannot connect to upstream broker") == 1
        with running_tansu(tmp_path, port=port):
            _wait(
                lambda: "upstream cluster is reachable again" in gateway.log_text(), SETTLE_S, "no recovery"
            )
            produce_kafka_python(gateway.bootstrap, "later", [b"one", b"two"])
            consumer = KafkaConsumer(
                "later", bootstrap_servers=gateway.bootstrap, group_id="early", auto_offset_reset="earliest"
            )
            try:
                got: list[bytes] = []
                _wait(lambda: got.extend(r.value for rs in consumer.poll(200).values() for r in rs) or len(got) >= 2,
                      SETTLE_S, "records not consumed after upstream came up")  # fmt: skip
            finally:
                consumer.close()
        assert gateway.process.poll() is None


def test_upstream_outage_under_a_running_consumer(tmp_path: Path) -> None:
    tansu_port, relay_port = free_port(), free_port()
    relay = Relay(relay_port, tansu_port)
    relay.start()
    # Tansu advertises the relay, so every upstream connection of the gateway goes through it.
    with (
        running_tansu(tmp_path, port=tansu_port, advertised_port=relay_port),
        running_gateway(f"127.0.0.1:{relay_port}") as gateway,
    ):
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic("outage", 2, 1)])
        finally:
            admin.close()
        first = [f"before-{i}".encode() for i in range(100)]
        produce_kafka_python(gateway.bootstrap, "outage", first)
        stop = threading.Event()
        # librdkafka: kafka-python 3.0 can hang here on its own (about 1 run in 12, on the gateway
        # before cut-through too): after the outage its consumer thread waits without a timeout
        # in NetworkSelector.run while its IO thread idles, and it sends no further Fetch.
        member = confluent_member(gateway.bootstrap, "outage", "survivors", stop)
        seen = lambda: {v for _, _, v in member.records}  # noqa: E731
        try:
            _wait(lambda: seen() >= set(first), SETTLE_S, "the first records were not consumed")
            relay.stop()  # upstream gone: connections dropped, new ones refused
            time.sleep(2)
            assert member.error is None
            relay.start()
            second = [f"after-{i}".encode() for i in range(100)]
            produce_kafka_python(gateway.bootstrap, "outage", second)
            _wait(lambda: seen() >= set(first) | set(second), SETTLE_S, "consumption did not resume")
        finally:
            stop.set()
            assert member.thread is not None
            member.thread.join(30)
            relay.stop()
        assert member.error is None
        # The group side lost nothing: the committed offsets cover every record.
        assert sum(o or 0 for o in committed(gateway.bootstrap, "survivors", "outage", 2).values()) == 200
        assert gateway.log_text().count("closed the connection of client") >= 1
        assert gateway.process.poll() is None


@pytest.fixture(autouse=True)
def _collect_leaked_sockets() -> Iterator[None]:
    """Collect kafka-python's leaked sockets here, not in whichever test runs next."""
    yield
    gc.collect()


def test_a_virtual_broker_port_in_use_is_reported_and_never_leaks_upstream(tansu_port: int) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        base = taken.getsockname()[1]
        with running_gateway(f"127.0.0.1:{tansu_port}", **{"gateway-broker-port-base": str(base)}) as gateway:
            _wait(lambda: "cannot open the virtual broker" in gateway.log_text(), SETTLE_S, "no error logged")
            with WireClient(gateway.bootstrap) as client:
                response = client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
            assert [b.node_id for b in response.brokers] == [1073741824]  # only the gateway itself
            assert gateway.process.poll() is None
            time.sleep(1.2)  # a couple of metadata refreshes: still one line
            assert gateway.log_text().count(f"upstream node 111 on port {base}") == 1
