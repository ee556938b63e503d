"""The foundation's promises, checked with real clients against a server subprocess."""

from __future__ import annotations

import signal
import struct

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from protocol.wire import decode_response
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration


def test_admin_client_creates_lists_and_describes(server: ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=1)])
        assert "orders" in admin.list_topics()
        described = admin.describe_topics(["orders"])
        assert len(described[0]["partitions"]) == 6
        cluster = admin.describe_cluster()
        assert [b["broker_id"] for b in cluster["brokers"]] == [0]
        assert cluster["brokers"][0]["port"] == server.port
        assert cluster["controller_id"] == 0
    finally:
        admin.close()


def test_consumer_assign_poll_returns_nothing(server: ServerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("events", num_partitions=2, replication_factor=1)])
    admin.close()
    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    try:
        consumer.assign([TopicPartition("events", 0), TopicPartition("events", 1)])
        assert consumer.poll(timeout_ms=1500) == {}
        assert consumer.position(TopicPartition("events", 0)) == 0
    finally:
        consumer.close()


def test_bad_input_closes_only_that_connection(server: ServerProcess) -> None:
    bad_inputs = {
        "garbage": struct.pack(">i", 11) + b"\x13\x37garbage!!",
        "header shorter than a request header": struct.pack(">i", 3) + b"abc",
        "malformed body": struct.pack(">i", 14)
        + struct.pack(">hhih", ApiKey.HEARTBEAT, 3, 1, -1)
        + b"\x7f\xff\x00\x00",
        "truncated frame body": struct.pack(">i", 8) + struct.pack(">hhi", ApiKey.HEARTBEAT, 4, 1),
        "2 GiB declared length": struct.pack(">i", 2**31 - 1) + b"\x00" * 16,
        "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 1, -1),
        "unsupported version": struct.pack(">i", 10) + struct.pack(">hhih", ApiKey.HEARTBEAT, 99, 1, -1),
        "negative length": struct.pack(">i", -5),
    }
    for name, data in bad_inputs.items():
        with WireClient(server.bootstrap) as client:
            client.send_raw(data)
            assert client.is_closed_by_peer(), name
    with WireClient(server.bootstrap) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("test", "1.0"))
        assert response.error_code == ErrorCode.NONE
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert served == {int(key): window for key, window in SERVED_VERSIONS.items()}
    assert server.process.poll() is None
    assert "closing connection" in server.log_text()


def test_unknown_api_versions_version_gets_v0_error_with_ranges(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as client:
        # A future ApiVersions v9 request (flexible header v2): the reply must be a v0 body.
        header = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 77, 4) + b"test" + b"\x00"
        body = b"\x05test\x041.0\x00"
        client.send_raw(struct.pack(">i", len(header + body)) + header + body)
        correlation_id, response = decode_response(ApiKey.API_VERSIONS, 0, client.read_frame())
        assert correlation_id == 77
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(k.api_key == ApiKey.JOIN_GROUP and k.max_version == 9 for k in response.api_keys)


def test_api_versions_v0_and_metadata_without_api_versions(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as client:
        assert client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest()).error_code == 0
    with WireClient(server.bootstrap) as client:  # an old client that skips ApiVersions
        metadata = client.request(ApiKey.METADATA, 0, MetadataRequest(topics=[]))
        assert [b.port for b in metadata.brokers] == [server.port]


def test_produce_is_refused_with_a_clear_error(server: ServerProcess) -> None:
    with WireClient(server.bootstrap) as client:
        client.request(ApiKey.METADATA, 9, MetadataRequest(topics=None))
        request = ProduceRequest(
            acks=1,
            timeout_ms=1000,
            topic_data=[TopicProduceData("t", partition_data=[PartitionProduceData(0, b"")])],
        )
        response = client.request(ApiKey.PRODUCE, 8, request)
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.INVALID_REQUEST
        assert "stores no records" in (partition.error_message or "")


def test_sigterm_stops_cleanly(server: ServerProcess) -> None:
    assert server.stop(signal.SIGTERM) == 0
    assert "coordinator stopped" in server.log_text()
