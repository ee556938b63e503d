"""SASL (issue 9): PLAIN and SCRAM-SHA-256/512 units, and real clients over SASL_SSL."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.security.scram import (
    PlainAuthenticator,
    SaslFailure,
    ScramAuthenticator,
    ScramCredential,
    check_password,
    make_credential,
)
from coordinator.server.authn import first_message_user
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.wire import decode_response, encode_request
from tests.security.support import Certificates, TlsWireClient, make_certificates, tls_settings
from tests.support.server import REPO, ServerProcess, running_server
from tests.support.wire_client import WireClient


# ---- units -------------------------------------------------------------------------------------
def _scram_client(user: str, password: str, mechanism: str) -> Any:
    from kafka.net.sasl.scram import ScramClient

    return ScramClient(user, password, mechanism)


def _lookup(credentials: dict[tuple[str, str], ScramCredential]) -> Any:
    return lambda user, mechanism: credentials.get((user, mechanism))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_kafka_pythons_client(mechanism: str) -> None:
    credential = make_credential(mechanism, "s3cret", 4096)
    lookup = _lookup({("alice", mechanism): credential})
    client = _scram_client("alice", "s3cret", mechanism)
    server = ScramAuthenticator(mechanism, lookup)
    server_first, user = server.step(client.first_message())
    assert user is None
    client.process_server_first_message(server_first)
    server_final, user = server.step(client.final_message())
    assert user == "alice"
    client.process_server_final_message(server_final)  # verifies the server signature


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "s3cret")])
def test_scram_refuses_wrong_password_and_unknown_user(user: str, password: str) -> None:
    credential = make_credential("SCRAM-SHA-512", "s3cret", 4096)
    server = ScramAuthenticator("SCRAM-SHA-512", _lookup({("alice", "SCRAM-SHA-512"): credential}))
    client = _scram_client(user, password, "SCRAM-SHA-512")
    first, _ = server.step(client.first_message())
    assert b",i=" in first  # an unknown user gets a plausible challenge too
    client.process_server_first_message(first)
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.step(client.final_message())


def test_plain_checks_against_the_scram_credential() -> None:
    credential = make_credential("SCRAM-SHA-512", "pw", 4096)
    server = PlainAuthenticator(_lookup({("bob", "SCRAM-SHA-512"): credential}))
    assert server.step(b"\0bob\0pw") == (b"", "bob")
    for bad in (b"\0bob\0nope", b"\0eve\0pw", b"garbage", b"other\0bob\0pw", b"\xff\0\0"):
        with pytest.raises(SaslFailure):
            PlainAuthenticator(_lookup({("bob", "SCRAM-SHA-512"): credential})).step(bad)


def test_credentials_are_salted_and_checked() -> None:
    a, b = make_credential("SCRAM-SHA-256", "same", 4096), make_credential("SCRAM-SHA-256", "same", 4096)
    assert a.salt != b.salt and a.stored_key != b.stored_key
    assert check_password(a, "same") and not check_password(a, "Same")
    with pytest.raises(ValueError, match="4096"):
        make_credential("SCRAM-SHA-256", "x", 1000)


@pytest.mark.parametrize(
    "message", [b"", b"n,,", b"p=tls-server-end-point,,n=a,r=x", b"n,,m=ext,n=a,r=x", b"n,,n=a", b"\xff"]
)
def test_malformed_scram_messages_fail_cleanly(message: bytes) -> None:
    with pytest.raises(SaslFailure):
        ScramAuthenticator("SCRAM-SHA-256", _lookup({})).step(message)


def test_first_message_user() -> None:
    assert first_message_user("PLAIN", b"\0bob\0pw") == "bob"
    assert first_message_user("SCRAM-SHA-512", b"n,,n=a=2Cb,r=nonce") == "a,b"
    assert first_message_user("SCRAM-SHA-512", b"\xff") is None


# ---- the real server ---------------------------------------------------------------------------
def add_user(storage: str, name: str, password: str, *mechanisms: str) -> None:
    argv = [
        sys.executable,
        "-m",
        "coordinator",
        "users",
        "add",
        name,
        "--password",
        password,
        "--storage",
        storage,
    ]
    for mechanism in mechanisms:
        argv += ["--mechanism", mechanism]
    subprocess.run(argv, cwd=REPO, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def sasl_ssl_server(tmp_path: Path, certs: Certificates) -> Iterator[ServerProcess]:
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    add_user(storage, "alice", "alice-secret", "SCRAM-SHA-512", "SCRAM-SHA-256")
    extra = {"security-protocol": "SASL_SSL", "connections-max-reauth-ms": "600000", **tls_settings(certs)}
    with running_server(storage, extra) as server:
        yield server


def _wait_for_assignment(consumer: Any, topic: str) -> set[str]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
        if consumer.assignment():
            break
    return {tp.topic for tp in consumer.assignment()}


def _kafka_python_consumer(server: ServerProcess, certs: Certificates, password: str, **extra: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(
        "sasl-topic",
        bootstrap_servers=server.bootstrap,
        group_id="sasl-group",
        security_protocol="SASL_SSL",
        ssl_cafile=str(certs.ca),
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password=password,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        **extra,
    )


@pytest.mark.integration
def test_kafka_python_joins_over_sasl_ssl_scram_sha_512(
    sasl_ssl_server: ServerProcess, certs: Certificates
) -> None:
    consumer = _kafka_python_consumer(sasl_ssl_server, certs, "alice-secret")
    try:
        assert _wait_for_assignment(consumer, "sasl-topic") == {"sasl-topic"}
    finally:
        consumer.close()
    assert "alice-secret" not in sasl_ssl_server.log_text()


@pytest.mark.integration
def test_confluent_joins_over_sasl_ssl_scram_sha_512(
    sasl_ssl_server: ServerProcess, certs: Certificates
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    security = {
        "bootstrap.servers": sasl_ssl_server.bootstrap,
        "broker.address.family": "v4",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(certs.ca),
    }
    admin = AdminClient(security)
    for future in admin.create_topics([NewTopic("confluent-sasl-topic", 2)]).values():
        future.result(timeout=20)
    consumer = Consumer(
        {
            **security,
            "group.protocol": "classic",
            "group.id": "confluent-sasl-group",
            "session.timeout.ms": 6000,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["confluent-sasl-topic"])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert {tp.topic for tp in consumer.assignment()} == {"confluent-sasl-topic"}
    finally:
        consumer.close()


@pytest.mark.integration
def test_wrong_password_is_an_authentication_error_and_one_log_line(
    sasl_ssl_server: ServerProcess, certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka.errors import KafkaError

    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaError):
        consumer = _kafka_python_consumer(sasl_ssl_server, certs, "not-the-password")
        try:
            consumer.poll(timeout_ms=3000)
        finally:
            consumer.close()
    # kafka-python retries its bootstrap and finally times out; each attempt got error 58 back.
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text
    deadline = time.monotonic() + 5
    while "failed authentication" not in sasl_ssl_server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = [line for line in sasl_ssl_server.log_lines if "failed authentication" in line]
    assert lines and "SCRAM-SHA-512" in lines[0]
    assert "not-the-password" not in sasl_ssl_server.log_text()


def _handshake(client: WireClient, mechanism: str = "SCRAM-SHA-512") -> Any:
    return client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))


@pytest.mark.integration
def test_wire_level_rules(sasl_ssl_server: ServerProcess, certs: Certificates) -> None:
    bootstrap = sasl_ssl_server.bootstrap
    # ApiVersions is allowed before authentication, Metadata closes the connection.
    with TlsWireClient(bootstrap, certs.ca) as client:
        assert client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("t", "1")).error_code == 0
        client.send_raw(b"")
        client.correlation_id += 1
        from protocol.wire import encode_request

        client.send_raw(encode_request(ApiKey.METADATA, 9, 99, "t", MetadataRequest(topics=[])))
        assert client.is_closed_by_peer()
    # Unknown mechanism: the enabled ones come back.
    with TlsWireClient(bootstrap, certs.ca) as client:
        response = _handshake(client, "GSSAPI")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert set(response.mechanisms) == {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}
    # A full SCRAM exchange over SaslAuthenticate v2 reports the KIP-368 session lifetime.
    with TlsWireClient(bootstrap, certs.ca) as client:
        assert _handshake(client).error_code == 0
        scram = _scram_client("alice", "alice-secret", "SCRAM-SHA-512")
        first = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(scram.first_message()))
        assert first.error_code == 0
        scram.process_server_first_message(first.auth_bytes)
        final = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(scram.final_message()))
        assert final.error_code == 0
        assert 590_000 < final.session_lifetime_ms <= 600_000
        scram.process_server_final_message(final.auth_bytes)
        metadata = client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
        assert metadata.brokers[0].port == sasl_ssl_server.port
    # PLAIN with a wrong password: error 58 with a message, then the connection is closed.
    with TlsWireClient(bootstrap, certs.ca) as client:
        assert _handshake(client, "PLAIN").error_code == 0
        failed = client.request(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(b"\0alice\0nope"))
        assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert failed.error_message
        assert client.is_closed_by_peer()
    # PLAIN with the right password works (checked against the stored SCRAM credential).
    with TlsWireClient(bootstrap, certs.ca) as client:
        assert _handshake(client, "PLAIN").error_code == 0
        ok = client.request(ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(b"\0alice\0alice-secret"))
        assert ok.error_code == 0
        assert client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers


@pytest.mark.integration
def test_user_added_while_running_and_sasl_plaintext_with_handshake_v0(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    extra = {"security-protocol": "SASL_PLAINTEXT", "sasl-enabled-mechanisms": "PLAIN,SCRAM-SHA-256"}
    with running_server(storage, extra) as server:
        add_user(storage, "carol", "carol-pw", "SCRAM-SHA-256")  # no restart
        with WireClient(server.bootstrap) as client:
            response = client.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
            assert response.error_code == 0
            token = b"\0carol\0carol-pw"
            client.send_raw(len(token).to_bytes(4, "big") + token)  # bare token after handshake v0
            assert client.read_frame() == b""
            assert client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers
        # SaslHandshake on a plaintext (non-SASL) server is ILLEGAL_SASL_STATE, as in Kafka.
    with running_server(f"sqlite:///{tmp_path / 'p.db'}") as server, WireClient(server.bootstrap) as client:
        response = client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE


@pytest.mark.integration
def test_reauthentication_behind_pipelined_commits_waits_its_turn(tmp_path: Path) -> None:
    """KIP-368 re-authentication between pipelined OffsetCommits: every answer in request
    order, the commits on both sides of it land (docs/performance.md#pipelined-offsetcommits)."""
    storage = f"sqlite:///{tmp_path / 'c.db'}"
    extra = {"security-protocol": "SASL_PLAINTEXT", "sasl-enabled-mechanisms": "PLAIN"}
    with running_server(storage, extra) as server:
        add_user(storage, "dave", "dave-pw", "SCRAM-SHA-256")
        token = SaslAuthenticateRequest(b"\0dave\0dave-pw")
        with WireClient(server.bootstrap) as client:
            assert _handshake(client, "PLAIN").error_code == 0
            assert client.request(ApiKey.SASL_AUTHENTICATE, 1, token).error_code == 0
            topic = CreatableTopic(name="reauth", num_partitions=1, replication_factor=1)
            created = client.request(
                ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=5000)
            )
            assert created.topics[0].error_code == 0

            def commit(offset: int) -> tuple[int, int, Any]:
                partitions = [OffsetCommitRequestPartition(0, offset)]
                body = OffsetCommitRequest(
                    group_id="ra", topics=[OffsetCommitRequestTopic("reauth", partitions=partitions)]
                )
                return ApiKey.OFFSET_COMMIT, 8, body

            fetch = OffsetFetchRequest(group_id="ra", topics=[OffsetFetchRequestTopic("reauth", [0])])
            calls: list[tuple[int, int, Any]] = [
                commit(1),
                commit(2),
                (ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")),
                (ApiKey.SASL_AUTHENTICATE, 1, token),
                commit(3),
                commit(4),
                (ApiKey.OFFSET_FETCH, 7, fetch),
            ]
            first = client.correlation_id + 1
            client.send_raw(
                b"".join(
                    encode_request(api_key, version, first + i, "reauth", body)
                    for i, (api_key, version, body) in enumerate(calls)
                )
            )
            client.correlation_id += len(calls)
            answers = []
            for i, (api_key, version, _) in enumerate(calls):
                correlation_id, response = decode_response(api_key, version, client.read_frame())
                assert correlation_id == first + i
                answers.append(response)
    one, two, handshake, authenticated, three, four, fetched = answers
    assert handshake.error_code == authenticated.error_code == 0
    assert [p.error_code for c in (one, two, three, four) for t in c.topics for p in t.partitions] == [0] * 4
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [4]


class _FakeConnection:
    def __init__(self) -> None:
        self.aborted: str | None = None

    def abort(self, reason: str) -> None:
        self.aborted = reason


def test_kip_368_expired_session_may_only_reauthenticate() -> None:
    from coordinator.server.authn import SaslServer
    from coordinator.server.sasl_session import SaslSession
    from protocol.wire import Request

    now = [1000]

    async def no_credentials(user: str) -> list[Any]:
        return []

    server = SaslServer(("PLAIN",), 5000, no_credentials, now_ms=lambda: now[0])
    session = SaslSession()

    def admit(api_key: int) -> tuple[bool, str | None]:
        conn = _FakeConnection()
        allowed = server.admit(conn, session, Request(api_key, 0, 1, "c", None))  # type: ignore[arg-type]
        return allowed, conn.aborted

    assert admit(ApiKey.API_VERSIONS) == (True, None)
    allowed, reason = admit(ApiKey.METADATA)
    assert not allowed and reason is not None and "unauthenticated" in reason
    session.authenticated, session.expires_at_ms = True, now[0] + 5000
    assert admit(ApiKey.METADATA) == (True, None)
    now[0] += 5000
    assert admit(ApiKey.SASL_HANDSHAKE) == (True, None)
    allowed, reason = admit(ApiKey.JOIN_GROUP)
    assert not allowed and reason is not None and "expired" in reason


def test_security_flags_reach_the_config() -> None:
    from coordinator.cli.main import build_parser
    from coordinator.server.config import load_config

    argv = ["serve", "--security-protocol", "SASL_PLAINTEXT", "--sasl-enabled-mechanisms", "SCRAM-SHA-512",
            "--max-connections", "10", "--max-connections-per-ip", "3", "--connections-max-idle-ms", "1000",
            "--authorizer-enabled", "true", "--super-users", "User:admin", "--connections-max-reauth-ms", "60000",
            "--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--group-max-groups", "5"]  # fmt: skip
    args = build_parser().parse_args(argv)
    config = load_config(
        cli={k: v for k, v in vars(args).items() if k not in ("command", "config_file")}, env={}
    )
    assert config.sasl_mechanisms == ("SCRAM-SHA-512",)
    assert (config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms) == (
        10,
        3,
        1000,
    )
    assert config.authorizer_enabled and config.super_users == "User:admin"
    assert config.listener_specs()[0].uses_sasl
    assert config.group_settings().group_max_groups == 5
