"""Listeners (PLAINTEXT + SSL side by side), per-listener advertised addresses and TLS client auth."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.server.config import ConfigError, load_config
from coordinator.server.listeners import parse_listeners
from protocol.apis import ApiKey
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from tests.security.support import (
    Certificates,
    TlsWireClient,
    listener_ports,
    make_certificates,
    tls_settings,
)
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient


def test_parse_listeners() -> None:
    listeners = parse_listeners(
        "PLAINTEXT://0.0.0.0:9092,INTERNAL://127.0.0.1:9093",
        "PLAINTEXT://coord.example:19092",
        "INTERNAL:SASL_SSL",
        default_host="127.0.0.1",
        default_port=1,
        default_protocol="PLAINTEXT",
    )
    assert [(x.name, x.security_protocol, x.host, x.port, x.advertised_host, x.advertised_port)
            for x in listeners] == [
        ("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092, "coord.example", 19092),
        ("INTERNAL", "SASL_SSL", "127.0.0.1", 9093, "127.0.0.1", 9093),
    ]  # fmt: skip
    (default,) = parse_listeners("", "", "", default_host="0.0.0.0", default_port=0, default_protocol="ssl")
    assert (default.name, default.security_protocol, default.advertised_host, default.advertised_port) == (
        "SSL", "SSL", "127.0.0.1", None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "FOO://127.0.0.1:1"}, "listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://127.0.0.1"}, "no port"),
        ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "twice"),
        ({"listeners": "PLAINTEXT://a:1", "advertised_listeners": "SSL://b:2"}, "unknown listeners"),
        ({"security_protocol": "TLS"}, "security.protocol"),
        ({"security_protocol": "SSL"}, "ssl.certfile"),
        ({"listener_security_protocol_map": "X:NOPE"}, "listener.security.protocol.map"),
    ],
)
def test_bad_listener_settings(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(cli=settings, env={})


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def two_listeners(tmp_path: Path, certs: Certificates) -> Iterator[tuple[ServerProcess, int, int]]:
    extra = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **tls_settings(certs)}
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", extra) as server:
        ports = listener_ports(server)
        yield server, ports["PLAINTEXT"][1], ports["SSL"][1]


def _addresses(client: WireClient) -> set[tuple[str, int]]:
    metadata = client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
    found = client.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))
    cluster = client.request(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest())
    return {
        *((b.host, b.port) for b in metadata.brokers),
        (found.host, found.port),
        *((b.host, b.port) for b in cluster.brokers),
    }


@pytest.mark.integration
def test_each_listener_advertises_itself(
    two_listeners: tuple[ServerProcess, int, int], certs: Certificates
) -> None:
    _server, plain, tls = two_listeners
    assert plain != tls
    with WireClient(f"127.0.0.1:{plain}") as client:
        assert _addresses(client) == {("127.0.0.1", plain)}
    with TlsWireClient(f"127.0.0.1:{tls}", certs.ca) as client:
        assert _addresses(client) == {("127.0.0.1", tls)}


@pytest.mark.integration
def test_kafka_python_consumer_over_ssl(
    two_listeners: tuple[ServerProcess, int, int], certs: Certificates
) -> None:
    from kafka import KafkaConsumer

    _server, _plain, tls = two_listeners
    consumer = KafkaConsumer(
        "tls-topic",
        bootstrap_servers=f"127.0.0.1:{tls}",
        group_id="tls-group",
        security_protocol="SSL",
        ssl_cafile=str(certs.ca),
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    try:
        for _ in range(40):
            consumer.poll(timeout_ms=250)
            if consumer.assignment():
                break
        assert {tp.topic for tp in consumer.assignment()} == {"tls-topic"}
    finally:
        consumer.close()


@pytest.mark.integration
def test_client_certificate_required(tmp_path: Path, certs: Certificates) -> None:
    extra = {"security-protocol": "SSL", "ssl-client-auth": "required", **tls_settings(certs)}
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", extra) as server:
        with TlsWireClient(server.bootstrap, certs.ca, certs.client_cert, certs.client_key) as client:
            metadata = client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
            assert metadata.brokers[0].port == server.port
        with (
            pytest.raises((ssl.SSLError, ConnectionError, OSError)),
            TlsWireClient(server.bootstrap, certs.ca) as client,
        ):
            client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
