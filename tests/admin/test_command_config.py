"""--command-config FILE and COORDINATOR_ADMIN_* variables; the SCRAM client against our server side."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli.admin.command_config import Security, load_security, parse_properties
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.sasl_client import authenticate
from coordinator.security.scram import SaslFailure, ScramAuthenticator, ScramCredential, make_credential

JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_kafka_properties_file(tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        "# as kafka-consumer-groups.sh --command-config takes it\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism: SCRAM-SHA-512\n"
        f"sasl.jaas.config={JAAS_SCRAM} required \\\n"
        '    username="admin" password="s3 \\"cr=t";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/etc/kafka/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    assert load_security(str(config), {}) == Security(
        "SASL_SSL", "SCRAM-SHA-512", "admin", 's3 "cr=t', "/etc/kafka/ca.pem", check_hostname=False
    )


def test_librdkafka_names_and_environment_overrides(tmp_path: Path) -> None:
    config = tmp_path / "c.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.username=alice\nsasl.password=from-file\n")
    secret = tmp_path / "password"
    secret.write_text("from-secret-file\n")
    env = {"COORDINATOR_ADMIN_COMMAND_CONFIG": str(config), "COORDINATOR_ADMIN_PASSWORD_FILE": str(secret),
           "COORDINATOR_ADMIN_SASL_MECHANISM": "scram-sha-256"}  # fmt: skip
    assert load_security(None, env) == Security(
        "SASL_PLAINTEXT", "SCRAM-SHA-256", "alice", "from-secret-file"
    )
    only_env = {"COORDINATOR_ADMIN_SECURITY_PROTOCOL": "sasl_plaintext", "COORDINATOR_ADMIN_USERNAME": "bob",
                "COORDINATOR_ADMIN_PASSWORD": "pw"}  # fmt: skip
    assert load_security(None, only_env) == Security("SASL_PLAINTEXT", "PLAIN", "bob", "pw")
    assert load_security(None, {}) == Security()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("security.protocol=SASL_PLAINTEXT\n", "needs a user name and a password"),
        ("security.protocol=KERBEROS\n", "security.protocol 'KERBEROS' is not one of"),
        ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n",
         "sasl.mechanism 'GSSAPI' is not one of"),
        ("ssl.truststore.location=/x.jks\n", "ssl.truststore.location needs ssl.truststore.type=PEM"),
        ("sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n", "is not supported"),
    ],
)  # fmt: skip
def test_bad_command_configs_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.properties"
    config.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_security(str(config), {})
    with pytest.raises(UsageError, match="cannot read the command config"):
        load_security(str(tmp_path / "missing.properties"), {})


def test_properties_parsing() -> None:
    assert parse_properties("a=1\n! comment\n  b : two words \nc\nd=x\\\n  y\n") == {
        "a": "1", "b": "two words", "c": "", "d": "xy",
    }  # fmt: skip


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_servers_scram(mechanism: str) -> None:
    credential = make_credential(mechanism, "right")

    def lookup(user: str, wanted: str) -> ScramCredential | None:
        return credential if (user, wanted) == ("al=ice,x", mechanism) else None

    server = ScramAuthenticator(mechanism, lookup)
    principals: list[str | None] = []

    def exchange(token: bytes) -> bytes:
        answer, principal = server.step(token)
        principals.append(principal)
        return answer

    authenticate(mechanism, "al=ice,x", "right", exchange)
    assert principals[-1] == "al=ice,x"
    with pytest.raises(SaslFailure):
        authenticate(
            mechanism, "al=ice,x", "wrong", lambda token: ScramAuthenticator(mechanism, lookup).step(token)[0]
        )  # type: ignore[arg-type]


def test_a_server_that_cannot_prove_the_password_is_refused() -> None:
    answers = iter([b"r=NONCE,s=c2FsdA==,i=4096", b"v=AAAA"])

    def exchange(token: bytes) -> bytes:
        answer = next(answers)
        if answer.startswith(b"r="):  # echo the client's nonce as a real server does
            nonce = token.decode().split("r=", 1)[1]
            return f"r={nonce}xyz,s=c2FsdA==,i=4096".encode()
        return answer

    with pytest.raises(KafkaError, match="SCRAM signature does not match"):
        authenticate("SCRAM-SHA-256", "u", "p", exchange)


def test_plain_client_token() -> None:
    sent: list[bytes] = []

    def exchange(token: bytes) -> bytes:
        sent.append(token)
        return b""

    authenticate("PLAIN", "u", "p", exchange)
    assert sent == [b"\0u\0p"]
