"""SQLite start-up and running checks: not writable, replaced or deleted, created private."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from storage.base import StoreError
from storage.sqlite import SQLiteStore
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio


async def _store(path: Path) -> SQLiteStore:
    store = SQLiteStore(path)
    await store.open()
    return store


async def test_a_database_that_cannot_be_written_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.db"
    store = await _store(path)  # an existing, migrated database
    await store.close()
    real_connect = sqlite3.connect

    def read_only(database: Any, **kwargs: Any) -> sqlite3.Connection:
        # What a read-only file, directory or mount gives a non-root process.
        return real_connect(f"file:{database}?mode=ro", uri=True, **kwargs)

    monkeypatch.setattr("storage.sqlite.sqlite3.connect", read_only)
    with pytest.raises(StoreError, match="not writable"):
        await _store(path)


async def test_a_replaced_database_file_fails_writes_loudly(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = await _store(path)
    try:
        await store.write([offset(offset=1)])
        other = await _store(tmp_path / "other.db")
        await other.close()
        os.replace(tmp_path / "other.db", path)
        with pytest.raises(StoreError, match="deleted or replaced"):
            await store.write([offset(offset=2)])
    finally:
        await store.close()


async def test_a_deleted_database_file_fails_writes_loudly(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = await _store(path)
    try:
        await store.write([offset(offset=1)])
        path.unlink()
        with pytest.raises(StoreError, match="deleted or replaced"):
            await store.write([offset(offset=2)])
    finally:
        await store.close()


async def test_a_new_database_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = await _store(path)
    try:
        await store.write([offset(offset=1)])
        for file in (path, Path(f"{path}-wal")):
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    finally:
        await store.close()
