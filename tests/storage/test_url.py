"""open_store URL parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.memory import MemoryStore
from storage.postgres import PostgresStore
from storage.redact import redact_url
from storage.sqlite import SQLiteStore
from storage.url import open_store


def test_memory() -> None:
    store = open_store("memory://", latency_ms=5)
    assert isinstance(store, MemoryStore)
    assert store.latency_ms == 5


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///coordinator.db", Path("coordinator.db")),
        ("sqlite:///data/state.db", Path("data/state.db")),
        ("sqlite:////var/lib/kgc/state.db", Path("/var/lib/kgc/state.db")),
        ("sqlite:///with%20space.db", Path("with space.db")),
        ("SQLITE:///upper.db", Path("upper.db")),
    ],
)
def test_sqlite_paths(url: str, path: Path) -> None:
    store = open_store(url)
    assert isinstance(store, SQLiteStore)
    assert store.path == path


def test_sqlite_query_options_and_keyword_options() -> None:
    store = open_store("sqlite:///s.db?synchronous=NORMAL&history_retention_ms=1000", busy_timeout_ms=10)
    assert isinstance(store, SQLiteStore)
    assert (store.synchronous, store.history_retention_ms, store.busy_timeout_ms) == ("NORMAL", 1000, 10)
    with pytest.raises(ValueError, match="both"):
        open_store("sqlite:///s.db?synchronous=NORMAL", synchronous="FULL")
    with pytest.raises(ValueError, match="unknown SQLite URL option"):
        open_store("sqlite:///s.db?journal=off")
    with pytest.raises(ValueError, match="not a valid int"):
        open_store("sqlite:///s.db?history_retention_ms=soon")


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgres(scheme: str) -> None:
    store = open_store(f"{scheme}://user:pw@db.example:5433/coord", command_timeout=2.5)
    assert isinstance(store, PostgresStore)
    assert store.command_timeout == 2.5
    assert "pw" not in store.where


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "not a store URL"),
        ("coordinator.db", "not a store URL"),
        ("mysql://u:secret@h/db", "unsupported store URL scheme 'mysql'"),
        ("memory://somewhere", "takes no path"),
        ("sqlite://coordinator.db", "empty host"),
        ("sqlite://host/coordinator.db", "empty host"),
        ("sqlite:///", "names no database file"),
        ("sqlite:///dir/", "names no database file"),
        ("sqlite:///:memory:", "memory://"),
        ("postgresql://", "needs a host"),
        ("postgresql:///db", "needs a host"),
    ],
)
def test_bad_urls_give_readable_errors(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        open_store(url)
    assert "secret" not in str(info.value)


def test_redact_url() -> None:
    assert (
        redact_url("postgresql://u:pw@h:5432/db?sslmode=require")
        == "postgresql://u:***@h:5432/db?sslmode=require"
    )
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_url("postgresql://u:pw@[::1]:5432/db") == "postgresql://u:***@[::1]:5432/db"


@pytest.mark.asyncio
async def test_relative_sqlite_url_opens_a_file_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///coordinator.db")
    await store.open()
    await store.close()
    assert (tmp_path / "coordinator.db").is_file()
