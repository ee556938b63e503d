"""Smaller leaks and the SASL flood: fake salts, log-line forging, passwords in ps, credential
look-ups under a flood of logins, failed-login limit per address."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.security.scram import ScramAuthenticator, make_credential
from coordinator.server.login_guard import CredentialCache, FailedLoginLimit
from coordinator.server.logs import TextFormatter
from storage.records import UserCredentialRecord
from storage.sqlite import SQLiteStore
from tests.support.server import REPO


def _salt_for(user: str, known: dict[str, object]) -> str:
    authenticator = ScramAuthenticator("SCRAM-SHA-256", lambda name, _m: known.get(name))
    server_first = authenticator.step(f"n,,n={user},r=abc".encode())[0].decode()
    return dict(part.split("=", 1) for part in server_first.split(","))["s"]


def test_unknown_users_get_a_stable_salt_like_known_ones() -> None:
    known: dict[str, object] = {"alice": make_credential("SCRAM-SHA-256", "pw", 4096)}
    assert _salt_for("alice", known) == _salt_for("alice", known)
    assert _salt_for("mallory", known) == _salt_for("mallory", known)  # was random each time
    assert _salt_for("mallory", known) != _salt_for("trudy", known)


def test_a_newline_in_a_logged_value_cannot_forge_a_line() -> None:
    record = logging.LogRecord(
        "coordinator",
        logging.INFO,
        __file__,
        1,
        "group %s: member joined",
        ("g\n2026 ERROR forged\r\x1b[2J",),
        None,
    )
    line = TextFormatter().format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert "g\\n2026 ERROR forged\\r\\x1b[2J" in line


def test_users_add_reads_the_password_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "alice.pw").write_text("s3cret\n")
    database = tmp_path / "c.db"
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", "users", "add", "alice", "--password-file", str(tmp_path / "alice.pw"),
         "--storage", f"sqlite:///{database}"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    async def stored() -> list[UserCredentialRecord]:
        store = SQLiteStore(database)
        await store.open()
        try:
            return await store.load_credentials("alice")
        finally:
            await store.close()

    from coordinator.security.scram import ScramCredential, check_password

    records = asyncio.run(stored())
    assert records
    for r in records:
        assert check_password(
            ScramCredential(r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations), "s3cret"
        )


@pytest.mark.asyncio
async def test_credential_lookups_are_cached_shared_and_bounded() -> None:
    running = 0
    most = 0
    calls: list[str] = []

    async def loader(user: str) -> list[UserCredentialRecord]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        calls.append(user)
        await asyncio.sleep(0.01)
        running -= 1
        return []

    now = [0.0]
    cache = CredentialCache(loader, ttl_s=5, max_concurrent=4, clock=lambda: now[0])
    # A flood of 300 unauthenticated logins with distinct names: never more than 4 at once.
    await asyncio.gather(*(cache.load(f"nobody-{i}") for i in range(300)))
    assert most == 4 and len(calls) == 300
    calls.clear()
    # Concurrent logins of one user: one storage look-up; then served from memory until the TTL.
    await asyncio.gather(*(cache.load("alice") for _ in range(50)))
    await cache.load("alice")
    assert calls == ["alice"]
    now[0] = 6.0
    await cache.load("alice")
    assert calls == ["alice", "alice"]


@pytest.mark.asyncio
async def test_a_failed_lookup_reaches_every_waiter_and_is_retried() -> None:
    attempts = 0

    async def loader(user: str) -> list[UserCredentialRecord]:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.01)
        if attempts == 1:
            raise OSError("database down")
        return []

    cache = CredentialCache(loader)
    results = await asyncio.gather(*(cache.load("alice") for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results) and attempts == 1
    assert await cache.load("alice") == [] and attempts == 2


def test_failed_login_limit_per_address() -> None:
    now = [0.0]
    limit = FailedLoginLimit(max_failures=3, window_s=10, clock=lambda: now[0])
    for _ in range(3):
        assert not limit.blocked("10.0.0.1")
        limit.failed("10.0.0.1")
    assert limit.blocked("10.0.0.1")
    assert not limit.blocked("10.0.0.2")  # other addresses are not affected
    now[0] = 10.5
    assert not limit.blocked("10.0.0.1")
