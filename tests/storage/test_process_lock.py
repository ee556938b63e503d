"""The SQLite lock file: one exclusive holder, named to whoever is refused, gone with its holder."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from storage.base import StoreError
from storage.process_lock import DatabaseInUse, lock_database, lock_path
from storage.sqlite import SQLiteStore


def test_second_lock_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    first = lock_database(database)
    try:
        with pytest.raises(DatabaseInUse) as refused:
            lock_database(database)
        message = str(refused.value)
        assert str(database) in message
        assert f"pid {os.getpid()}" in message
        assert str(lock_path(database)) in message
    finally:
        first.release()
    again = lock_database(database)  # released: free again
    assert again.held
    again.release()
    assert not again.held


def test_lock_goes_away_with_a_killed_holder(tmp_path: Path) -> None:
    database = tmp_path / "s.db"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from pathlib import Path; from storage.process_lock import lock_database; "
         "lock_database(Path(sys.argv[1])); print('locked', flush=True); time.sleep(60)", str(database)],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(DatabaseInUse, match=f"pid {holder.pid} "):
            lock_database(database)
    finally:
        holder.kill()
        holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
    lock_database(database).release()  # the kernel dropped the dead process's lock


def test_exclusive_store_holds_the_lock_while_open(tmp_path: Path) -> None:
    async def run() -> None:
        database = tmp_path / "s.db"
        store = SQLiteStore(database, exclusive=True)
        await store.open()
        with pytest.raises(DatabaseInUse):
            await SQLiteStore(database, exclusive=True).open()
        # A tool that edits the file beside a running server (users, acls) takes no lock.
        beside = SQLiteStore(database)
        await beside.open()
        await beside.close()
        await store.close()
        reopened = SQLiteStore(database, exclusive=True)
        await reopened.open()
        await reopened.close()

    asyncio.run(run())


def test_failed_open_releases_the_lock(tmp_path: Path) -> None:
    async def run() -> None:
        database = tmp_path / "s.db"
        database.write_bytes(b"this is not a SQLite database, but long enough to be read as one" * 20)
        with pytest.raises(StoreError, match=re.escape(str(database))):
            await SQLiteStore(database, exclusive=True).open()
        lock_database(database).release()

    asyncio.run(run())
