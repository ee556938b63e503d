"""Every gateway listener has its own virtual brokers with its own security (issue 30, part 2):
a client is told the virtual brokers of the listener it came in on, and those speak that
listener's protocol, so a PLAINTEXT listener beside a SASL one opens no way around SASL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtest.records import decode_batches, encode_batch
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import fetch, metadata, produce
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.gateway.authz_client import ForwardingClient, authenticate, frame_of, scram_login, with_versions
from tests.gateway.conftest import running_gateway
from tests.security.support import (
    Certificates,
    TlsWireClient,
    listener_ports,
    make_certificates,
    tls_settings,
)
from tests.security.test_sasl import add_user
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

TOPIC, GROUP, LITERAL, PREFIXED, ALL, ALLOW = 2, 3, 3, 4, 2, 3


class TlsForwardingClient(ForwardingClient, TlsWireClient):
    pass


def _storage(directory: Path) -> str:
    storage = f"sqlite:///{directory / 'gateway.db'}"
    add_user(storage, "admin", "admin-pw", "SCRAM-SHA-256")
    add_user(storage, "alice", "alice-pw", "SCRAM-SHA-256")
    return storage


def _grant_alice(client: ForwardingClient) -> None:
    grants = [
        AclCreation(TOPIC, "pub-", PREFIXED, "User:alice", "*", ALL, ALLOW),
        AclCreation(GROUP, "g", LITERAL, "User:alice", "*", ALL, ALLOW),
    ]
    answer = client.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(grants))
    assert [r.error_code for r in answer.results] == [0, 0]


def _brokers(client: ForwardingClient, topic: str | None = None) -> tuple[dict[int, int], Any]:
    """{node id: port} of the Metadata answer (asking for `topic`, auto-created), and the answer."""
    topics = None if topic is None else [metadata.MetadataRequestTopic(name=topic)]
    deadline = time.monotonic() + 20
    while True:
        answer = client.call(
            ApiKey.METADATA, metadata.MetadataRequest(topics, allow_auto_topic_creation=True)
        )
        ready = all(t.error_code == 0 for t in answer.topics)
        if ready or time.monotonic() > deadline:
            return {b.node_id: b.port for b in answer.brokers}, answer
        time.sleep(0.2)


def _leader_port(client: ForwardingClient, topic: str) -> int:
    ports, answer = _brokers(client, topic)
    leader = answer.topics[0].partitions[0].leader_id
    return ports[leader]


def _produce_and_fetch(client: ForwardingClient, topic: str, value: bytes) -> list[bytes]:
    batch = encode_batch([(None, value)], int(time.time() * 1000))
    data = [produce.TopicProduceData(topic, partition_data=[produce.PartitionProduceData(0, batch)])]
    answer = client.call(ApiKey.PRODUCE, produce.ProduceRequest(None, -1, 5000, data), version=9)
    assert answer.responses[0].partition_responses[0].error_code == 0, answer
    partition = fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request = fetch.FetchRequest(
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
        topics=[fetch.FetchTopic(topic=topic, partitions=[partition])],
    )  # fmt: skip
    fetched = client.call(ApiKey.FETCH, request, version=12)
    return [
        r.value or b"" for t in fetched.responses for p in t.partitions for r in decode_batches(p.records)
    ]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, tansu_port: int) -> Iterator[ServerProcess]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "authorizer-enabled": "true",
        "super-users": "User:admin",
    }
    storage = _storage(tmp_path_factory.mktemp("mixed"))
    with running_gateway(f"127.0.0.1:{tansu_port}", storage, **settings) as gateway:
        yield gateway


def test_plaintext_and_sasl_listeners_have_their_own_virtual_brokers(mixed: ServerProcess) -> None:
    ports = listener_ports(mixed)
    plain = f"127.0.0.1:{ports['PLAINTEXT'][1]}"
    sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT'][1]}"
    with scram_login(sasl, "admin", "admin-pw") as admin:
        _grant_alice(admin)
        sasl_brokers, _ = _brokers(admin, "pub-mixed")
        secret_brokers, _ = _brokers(admin, "secret-mixed")
    with with_versions(ForwardingClient(plain)) as anonymous:
        plain_brokers, listed = _brokers(anonymous)
        assert listed.topics == []  # User:ANONYMOUS may describe nothing
    upstream_nodes = set(sasl_brokers) & set(plain_brokers)
    assert upstream_nodes, (sasl_brokers, plain_brokers)
    for node in upstream_nodes:
        assert sasl_brokers[node] != plain_brokers[node]
    assert sasl_brokers == secret_brokers
    sasl_ports = {sasl_brokers[n] for n in upstream_nodes}
    # Unauthenticated, a SASL listener's virtual broker answers nothing and closes.
    for port in sasl_ports:
        with WireClient(f"127.0.0.1:{port}") as intruder:
            frame = frame_of(ApiKey.METADATA, 12, metadata.MetadataRequest(topics=None))
            intruder.send_raw(len(frame).to_bytes(4, "big") + frame)
            assert intruder.is_closed_by_peer()
    # The PLAINTEXT listener's virtual brokers do not open the data plane to an anonymous client.
    with with_versions(ForwardingClient(f"127.0.0.1:{plain_brokers[min(upstream_nodes)]}")) as anonymous:
        batch = encode_batch([(None, b"anonymous")], int(time.time() * 1000))
        data = [
            produce.TopicProduceData("secret-mixed", partition_data=[produce.PartitionProduceData(0, batch)])
        ]
        answer = anonymous.call(ApiKey.PRODUCE, produce.ProduceRequest(None, -1, 5000, data), version=9)
        codes = [p.error_code for t in answer.responses for p in t.partition_responses]
        assert codes == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_sasl_clients_work_end_to_end_through_their_virtual_brokers(mixed: ServerProcess) -> None:
    ports = listener_ports(mixed)
    sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT'][1]}"
    with scram_login(sasl, "admin", "admin-pw") as admin:
        _grant_alice(admin)
    with scram_login(sasl, "alice", "alice-pw") as alice:
        port = _leader_port(alice, "pub-e2e")
        coordinator = alice.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
    assert port != ports["SASL_PLAINTEXT"][1]
    with scram_login(f"127.0.0.1:{port}", "alice", "alice-pw") as alice:
        assert b"through the SASL listener" in _produce_and_fetch(
            alice, "pub-e2e", b"through the SASL listener"
        )
        on_broker = alice.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g", key_type=0))
    # The group coordinator is the listener's own bootstrap address, from anywhere on it.
    assert coordinator.port == on_broker.port == ports["SASL_PLAINTEXT"][3]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


def test_sasl_ssl_and_plaintext_listeners(tmp_path: Path, tansu_port: int, certs: Certificates) -> None:
    settings = {
        "listeners": "SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "authorizer-enabled": "true",
        "super-users": "User:admin",
        **tls_settings(certs),
    }
    with running_gateway(f"127.0.0.1:{tansu_port}", _storage(tmp_path), **settings) as gateway:
        ports = listener_ports(gateway)
        tls = f"127.0.0.1:{ports['SASL_SSL'][1]}"
        with authenticate(TlsForwardingClient(tls, certs.ca), "admin", "admin-pw") as admin:
            _grant_alice(admin)
        with authenticate(TlsForwardingClient(tls, certs.ca), "alice", "alice-pw") as alice:
            port = _leader_port(alice, "pub-tls")
        assert port not in (ports["SASL_SSL"][1], ports["PLAINTEXT"][1])
        with authenticate(TlsForwardingClient(f"127.0.0.1:{port}", certs.ca), "alice", "alice-pw") as alice:
            assert b"over TLS" in _produce_and_fetch(alice, "pub-tls", b"over TLS")
        # Without TLS the SASL_SSL listener's virtual broker gives nothing away.
        with WireClient(f"127.0.0.1:{port}") as intruder:
            frame = frame_of(ApiKey.METADATA, 12, metadata.MetadataRequest(topics=None))
            intruder.send_raw(len(frame).to_bytes(4, "big") + frame)
            assert intruder.is_closed_by_peer()
        # The PLAINTEXT listener advertises its own virtual brokers, plaintext ones.
        with with_versions(ForwardingClient(f"127.0.0.1:{ports['PLAINTEXT'][1]}")) as anonymous:
            plain_brokers, _ = _brokers(anonymous)
        assert port not in plain_brokers.values()
        with with_versions(ForwardingClient(f"127.0.0.1:{next(iter(plain_brokers.values()))}")) as anonymous:
            assert anonymous.call(ApiKey.METADATA, metadata.MetadataRequest(topics=None)).topics == []
