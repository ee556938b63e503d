"""DescribeUserScramCredentials / AlterUserScramCredentials: Kafka's checks (pure), then a running
server with SASL and ACLs driven by confluent-kafka's AdminClient and by `coordinator users
--bootstrap`, and the logins that follow the changes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.api.scram_users import describe_response, plan_alter
from coordinator.security.scram import ScramCredential, check_password, salted_password
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest, UserName
from storage.records import UserCredentialRecord, UserCredentialTombstone
from tests.security.test_acls import SETTINGS, login
from tests.security.test_sasl import add_user
from tests.support.server import REPO, ServerProcess, running_server

SHA256, SHA512 = 1, 2


def _upsert(
    name: str, password: str, mechanism: int = SHA256, iterations: int = 4096
) -> ScramCredentialUpsertion:
    salt = b"salt-" + name.encode()
    label = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}[mechanism]
    return ScramCredentialUpsertion(
        name, mechanism, iterations, salt, salted_password(label, password, salt, iterations)
    )


def _stored(user: str, mechanism: str, iterations: int = 4096) -> UserCredentialRecord:
    return UserCredentialRecord(user, mechanism, b"s", b"k", b"k", iterations)


def test_alter_plans_records_and_answers_per_user() -> None:
    request = AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion("carol", SHA512)],
        upsertions=[_upsert("alice", "pw-a"), _upsert("alice", "pw-a", SHA512, 8192)],
    )
    response, records = plan_alter(request, [_stored("carol", "SCRAM-SHA-512")])
    assert [(r.user, r.error_code) for r in response.results] == [("carol", 0), ("alice", 0)]
    assert records[0] == UserCredentialTombstone("carol", "SCRAM-SHA-512")
    alice = [r for r in records if isinstance(r, UserCredentialRecord)]
    assert [(r.user, r.mechanism, r.iterations) for r in alice] == [
        ("alice", "SCRAM-SHA-256", 4096), ("alice", "SCRAM-SHA-512", 8192),
    ]  # fmt: skip
    for r in alice:  # the server derived the keys a login checks
        credential = ScramCredential(r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations)
        assert check_password(credential, "pw-a") and not check_password(credential, "pw-b")


@pytest.mark.parametrize(
    ("upsertion", "deletion", "code"),
    [
        (_upsert("u", "p", iterations=4095), None, ErrorCode.UNACCEPTABLE_CREDENTIAL),
        (_upsert("u", "p", iterations=16385), None, ErrorCode.UNACCEPTABLE_CREDENTIAL),
        (ScramCredentialUpsertion("u", 3, 4096, b"s", bytes(32)), None, ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        (
            ScramCredentialUpsertion("u", SHA512, 4096, b"s", bytes(32)),
            None,
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
        ),
        (
            ScramCredentialUpsertion("u", SHA256, 4096, b"", bytes(32)),
            None,
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
        ),
        (_upsert("", "p"), None, ErrorCode.UNACCEPTABLE_CREDENTIAL),
        (None, ScramCredentialDeletion("u", SHA256), ErrorCode.RESOURCE_NOT_FOUND),
        (_upsert("u", "p"), ScramCredentialDeletion("u", SHA256), ErrorCode.DUPLICATE_RESOURCE),
    ],
)
def test_alter_refusals_change_nothing_for_that_user(
    upsertion: ScramCredentialUpsertion | None, deletion: ScramCredentialDeletion | None, code: int
) -> None:
    request = AlterUserScramCredentialsRequest(
        deletions=[deletion] if deletion else [],
        upsertions=[*([upsertion] if upsertion else []), _upsert("other", "p")],
    )
    response, records = plan_alter(request, [])
    first, other = response.results
    assert first.error_code == code and first.error_message
    assert other.error_code == 0
    assert {r.user for r in records} == {"other"}  # the other user's change goes ahead


def test_describe_lists_or_names_users() -> None:
    stored = [
        _stored("bob", "SCRAM-SHA-512", 8192),
        _stored("bob", "SCRAM-SHA-256"),
        _stored("al", "SCRAM-SHA-256"),
    ]
    everyone = describe_response(DescribeUserScramCredentialsRequest(users=None), stored)
    assert [(r.user, [(i.mechanism, i.iterations) for i in r.credential_infos]) for r in everyone.results] == [
        ("al", [(SHA256, 4096)]), ("bob", [(SHA256, 4096), (SHA512, 8192)]),
    ]  # fmt: skip
    named = describe_response(
        DescribeUserScramCredentialsRequest(
            users=[UserName("bob"), UserName("zed"), UserName("al"), UserName("al")]
        ),
        stored,
    )
    assert [(r.user, r.error_code) for r in named.results] == [
        ("bob", 0), ("zed", ErrorCode.RESOURCE_NOT_FOUND), ("al", ErrorCode.DUPLICATE_RESOURCE),
    ]  # fmt: skip


# ---- a running server -------------------------------------------------------------------------


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[ServerProcess]:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    add_user(url, "admin", "admin-pw", "SCRAM-SHA-256")
    add_user(url, "alice", "alice-pw", "SCRAM-SHA-512")
    with running_server(url, SETTINGS) as server:
        yield server


def _users(
    *argv: str, user: str = "admin", password: str = "admin-pw", new_password: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "COORDINATOR_ADMIN_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "COORDINATOR_ADMIN_SASL_MECHANISM": "SCRAM-SHA-256" if user == "admin" else "SCRAM-SHA-512",
        "COORDINATOR_ADMIN_USERNAME": user,
        "COORDINATOR_ADMIN_PASSWORD": password,
        "COORDINATOR_USER_PASSWORD": new_password,
    }
    return subprocess.run(
        [sys.executable, "-m", "coordinator", "users", *argv], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


@pytest.mark.integration
def test_users_cli_over_the_network(secured: ServerProcess) -> None:
    b = secured.bootstrap
    added = _users("add", "bob", "--bootstrap", b, "--mechanism", "SCRAM-SHA-512", new_password="bob-pw")
    assert added.returncode == 0 and "user bob: SCRAM-SHA-512 stored" in added.stdout, added.stderr
    with login(secured, "bob", "bob-pw"):  # PLAIN, checked against the new SCRAM credential
        pass
    listed = _users("list", "--bootstrap", b)
    assert listed.returncode == 0, listed.stderr
    assert "bob\tSCRAM-SHA-512 (iterations 8192)" in listed.stdout.splitlines()
    assert "alice\tSCRAM-SHA-512 (iterations 8192)" in listed.stdout.splitlines()

    # alice is neither a super user nor granted ALTER/DESCRIBE on the cluster.
    refused = _users("add", "eve", "--bootstrap", b, user="alice", password="alice-pw", new_password="x")
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused
    hidden = _users("list", "--bootstrap", b, user="alice", password="alice-pw")
    assert hidden.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in hidden.stderr, hidden
    weak = _users("add", "bob", "--bootstrap", b, "--iterations", "100000", new_password="p")
    assert weak.returncode == 1 and "UNACCEPTABLE_CREDENTIAL" in weak.stderr and "Too many" in weak.stderr

    deleted = _users("delete", "bob", "--bootstrap", b)
    assert deleted.returncode == 0 and "SCRAM-SHA-512 deleted" in deleted.stdout, deleted.stderr
    time.sleep(1.5)  # the server caches credentials for a second
    with pytest.raises(AssertionError):
        login(secured, "bob", "bob-pw")
    gone = _users("delete", "bob", "--bootstrap", b)
    assert gone.returncode == 1 and "no such user: bob" in gone.stderr


@pytest.mark.integration
def test_confluent_admin_client_manages_scram_users(secured: ServerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(
        {
            "bootstrap.servers": secured.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "admin-pw",
        }
    )  # fmt: skip
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-pw")])
    futures["carol"].result(timeout=15)
    with login(secured, "carol", "carol-pw"):
        pass
    found = admin.describe_user_scram_credentials(["carol"])
    carol = found["carol"].result(timeout=15)
    assert [(i.mechanism, i.iterations) for i in carol.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
    )
    futures["carol"].result(timeout=15)
    missing = admin.describe_user_scram_credentials(["carol"])
    with pytest.raises(Exception, match=r"RESOURCE_NOT_FOUND|does not exist"):
        missing["carol"].result(timeout=15)


def test_librdkafkas_trailing_zero_byte_is_accepted_for_alter_only() -> None:
    from protocol.messages.alter_user_scram_credentials import encode_alter_user_scram_credentials_request_v0
    from protocol.messages.headers import RequestHeader, encode_request_header_v2
    from protocol.primitives import DecodeError
    from protocol.wire import decode_request

    frame = bytearray()
    encode_request_header_v2(RequestHeader(51, 0, 7, "rdkafka"), frame)
    encode_alter_user_scram_credentials_request_v0(
        AlterUserScramCredentialsRequest([], [_upsert("u", "p")]), frame
    )
    assert decode_request(bytes(frame) + b"\x00").body.upsertions[0].name == "u"
    for extra in (b"\x00\x00", b"\x01"):
        with pytest.raises(DecodeError, match="trailing"):
            decode_request(bytes(frame) + extra)
