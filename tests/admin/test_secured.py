"""The admin commands on SASL and TLS listeners: --command-config, COORDINATOR_ADMIN_*, clear failures."""

from __future__ import annotations

import contextlib
import io
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from coordinator.cli.main import main
from tests.admin.support import cli
from tests.security.support import Certificates, listener_ports, make_certificates, tls_settings
from tests.security.test_sasl import add_user
from tests.support.server import running_server, start_server

pytestmark = pytest.mark.integration

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass
class Secured:
    sasl: str
    sasl_ssl: str
    ssl: str
    certs: Certificates


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp("secured")
    certs = make_certificates(directory)
    storage = f"sqlite:///{directory / 'c.db'}"
    add_user(storage, "admin", "admin-pw", "SCRAM-SHA-256", "SCRAM-SHA-512")
    extra = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls_settings(certs),
    }
    with running_server(storage, extra) as server:
        ports = listener_ports(server)
        yield Secured(
            *(f"127.0.0.1:{ports[name][1]}" for name in ("SASL_PLAINTEXT", "SASL_SSL", "SSL")), certs
        )


def _properties(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_sasl_listener_with_a_command_config(secured: Secured, tmp_path: Path) -> None:
    config = _properties(
        tmp_path / "admin.properties",
        f'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={SCRAM} required username="admin" password="admin-pw";\n',
    )
    listed = cli(secured.sasl, "groups", "list", "--command-config", config)
    assert (listed.code, listed.err) == (0, "no groups\n"), listed


def test_sasl_listener_without_credentials_says_so(secured: Secured) -> None:
    result = cli(secured.sasl, "groups", "list")
    assert result.code == 1
    assert result.err.startswith("NETWORK_EXCEPTION: ")
    assert f"{secured.sasl} may require authentication: give security.protocol" in result.err


def test_a_wrong_password_is_named(secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COORDINATOR_ADMIN_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("COORDINATOR_ADMIN_SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("COORDINATOR_ADMIN_USERNAME", "admin")
    monkeypatch.setenv("COORDINATOR_ADMIN_PASSWORD", "wrong")
    result = cli(secured.sasl, "groups", "list")
    assert result.code == 1
    assert result.err.startswith(f"SASL_AUTHENTICATION_FAILED: {secured.sasl} refused user 'admin'"), result


def test_sasl_ssl_from_environment_variables(
    secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "password"
    secret.write_text("admin-pw\n")
    monkeypatch.setenv("COORDINATOR_ADMIN_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("COORDINATOR_ADMIN_SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("COORDINATOR_ADMIN_USERNAME", "admin")
    monkeypatch.setenv("COORDINATOR_ADMIN_PASSWORD_FILE", str(secret))
    monkeypatch.setenv("COORDINATOR_ADMIN_SSL_CAFILE", str(secured.certs.ca))
    result = cli(secured.sasl_ssl, "groups", "list")
    assert (result.code, result.err) == (0, "no groups\n"), result


def test_tls_listener(secured: Secured, tmp_path: Path) -> None:
    untrusted = cli(secured.ssl, "groups", "list", "--command-config",
                    _properties(tmp_path / "plain-ssl.properties", "security.protocol=SSL\n"))  # fmt: skip
    assert untrusted.code == 1
    assert "the broker's certificate is not trusted" in untrusted.err
    config = _properties(
        tmp_path / "ssl.properties",
        f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={secured.certs.ca}\n",
    )
    assert cli(secured.ssl, "groups", "list", "--command-config", config).code == 0
    without_tls = cli(secured.ssl, "groups", "list", "--timeout", "3")
    assert without_tls.code == 1
    assert (
        "closed the connection on ApiVersions, which every Kafka listener answers: is it a TLS listener?"
        in (without_tls.err)
    )


def _acls(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["acls", *argv])
    return code, err.getvalue()


def test_acls_password_from_a_file(secured: Secured, tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("admin-pw\n")
    # The authorizer is off on this server: SECURITY_DISABLED proves the login itself succeeded.
    code, err = _acls(
        "list", "--bootstrap", secured.sasl, "--username", "admin", "--password-file", str(secret)
    )
    assert code == 1 and err.startswith("SECURITY_DISABLED"), err
    secret.write_text("wrong\n")
    code, err = _acls(
        "list", "--bootstrap", secured.sasl, "--username", "admin", "--password-file", str(secret)
    )
    assert code == 1 and err.startswith("SASL_AUTHENTICATION_FAILED"), err
    code, err = _acls(
        "list", "--bootstrap", secured.sasl, "--username", "admin", "--password-file", "/nonexistent"
    )
    assert code == 2 and "/nonexistent" in err
    assert "visible to other users" not in err


def test_acls_password_on_the_command_line_warns(secured: Secured) -> None:
    code, err = _acls("list", "--bootstrap", secured.sasl, "--username", "admin", "--password", "admin-pw")
    warning, _, rest = err.partition("\n")
    assert warning.startswith("coordinator: warning: --password is visible to other users in `ps`")
    assert code == 1 and rest.startswith("SECURITY_DISABLED"), err


def _encrypted_key(certs: Certificates, directory: Path, password: str) -> Path:
    key = directory / "server-encrypted.key"
    subprocess.run(
        ["openssl", "pkey", "-in", str(certs.server_key), "-aes256", "-passout", f"pass:{password}", "-out", str(key)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return key


def test_serve_reads_the_key_password_from_a_file_or_a_variable(secured: Secured, tmp_path: Path) -> None:
    key = _encrypted_key(secured.certs, tmp_path, "k3y-pw")
    secret = tmp_path / "key-password"
    secret.write_text("k3y-pw\n")
    tls = {
        "security-protocol": "SSL",
        "ssl-certfile": str(secured.certs.server_cert),
        "ssl-keyfile": str(key),
    }
    from_file = start_server("memory://", {**tls, "ssl-keyfile-password-file": str(secret)})
    assert from_file.stop() == 0
    from_variable = start_server(
        "memory://", tls, environment={"COORDINATOR_SSL_KEYFILE_PASSWORD_FILE": str(secret)}
    )
    assert from_variable.stop() == 0
    assert "visible to other users" not in from_file.log_text() + from_variable.log_text()

    secret.write_text("wrong\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["serve", "--storage", "memory://", "--security-protocol", "SSL", "--ssl-certfile",
                     str(secured.certs.server_cert), "--ssl-keyfile", str(key), "--ssl-keyfile-password", "x"])  # fmt: skip
    assert code == 2
    assert "--ssl-keyfile-password is visible to other users in `ps`" in err.getvalue()
