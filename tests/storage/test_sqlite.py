"""SQLite specifics: PRAGMAs, migrations, error mapping, the loop never blocking, crash safety."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from storage.base import StoreError
from storage.schema import load_migrations
from storage.sqlite import SQLiteStore
from tests.storage.helpers import consumer_member, group, offset

pytestmark = pytest.mark.asyncio

REPO = Path(__file__).resolve().parents[2]


async def _on_store_thread(store: SQLiteStore, sql: str) -> Any:
    # Test-only peek at the store's own connection, on its own thread.
    def run() -> Any:
        assert store._conn is not None
        return store._conn.execute(sql).fetchall()

    return await store._run(run)


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
async def test_wal_and_synchronous_are_applied(tmp_path: Path, synchronous: str) -> None:
    store = SQLiteStore(tmp_path / "s.db", synchronous=synchronous)  # type: ignore[arg-type]
    await store.open()
    try:
        assert await _on_store_thread(store, "PRAGMA journal_mode") == [("wal",)]
        level = {"FULL": 2, "NORMAL": 1}[synchronous]
        assert await _on_store_thread(store, "PRAGMA synchronous") == [(level,)]
    finally:
        await store.close()


async def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteStore("x.db", synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="file path"):
        SQLiteStore(":memory:")
    with pytest.raises(ValueError, match="history_retention_ms"):
        SQLiteStore("x.db", history_retention_ms=0)


async def test_migrations_are_recorded_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    for _ in range(3):
        store = SQLiteStore(path)
        await store.open()
        await store.close()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT version, name FROM schema_version ORDER BY version").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert rows == [(m.version, m.name) for m in load_migrations("sqlite")]
    assert {"offsets", "groups", "topics", "offset_commit_history", "schema_version"} <= tables
    assert {"user_credentials", "acls", "consumer_groups", "consumer_members"} <= tables


async def test_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version VALUES (999, 'from_the_future', 0)")
    conn.close()
    store = SQLiteStore(path)
    with pytest.raises(StoreError, match="newer"):
        await store.open()
    await store.close()


async def test_open_in_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "no" / "such" / "dir" / "s.db")
    with pytest.raises(StoreError) as info:
        await store.open()
    assert isinstance(info.value.__cause__, sqlite3.Error)
    await store.close()


async def test_locked_database_gives_store_error_without_blocking_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path, busy_timeout_ms=300)
    await store.open()
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        started = time.monotonic()
        with pytest.raises(StoreError, match="locked") as info:
            await store.write([offset()])
        elapsed = time.monotonic() - started
        task.cancel()
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert 0.25 < elapsed < 5
        assert ticks >= 10, "the event loop was blocked while SQLite waited for the lock"
        other.execute("ROLLBACK")
        await store.write([offset()])  # the lock is gone: writes work again
    finally:
        other.close()
        await store.close()


async def test_disk_full_gives_store_error_and_the_store_recovers(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        await store.write([offset(partition=0)])
        (pages,) = (await _on_store_thread(store, "PRAGMA page_count"))[0]
        await _on_store_thread(store, f"PRAGMA max_page_count = {pages + 2}")  # a tiny "disk"
        big = [offset(partition=p, metadata="x" * 1000) for p in range(1, 2000)]
        with pytest.raises(StoreError, match="full") as info:
            await store.write(big)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert [o.partition for o in (await store.load()).offsets] == [0]
        await _on_store_thread(store, "PRAGMA max_page_count = 1073741823")  # space freed
        await store.write(big)
        assert len((await store.load()).offsets) == 2000
    finally:
        await store.close()


async def test_corrupt_members_blob_fails_the_load(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    await store.open()
    await store.write([group("g")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE groups SET members = x'07000000'")
    conn.close()
    with pytest.raises(StoreError, match="'g'"):
        await store.load()
    await store.close()


async def test_corrupt_consumer_member_blob_fails_the_load(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    await store.open()
    await store.write([consumer_member("cg", "m")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE consumer_members SET topics = x'0100000001'")
    conn.close()
    with pytest.raises(StoreError, match="'m' of group 'cg'"):
        await store.load()
    await store.close()


async def test_commit_history_when_enabled(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", history_retention_ms=3_600_000, history_prune_interval_ms=0)
    await store.open()
    try:
        now = int(time.time() * 1000)
        old = offset(offset=1, commit_ms=now - 7_200_000)  # older than the retention
        await store.write([old, offset(offset=2, commit_ms=now), offset("other", offset=5, commit_ms=now)])
        await store.write([offset(offset=3, commit_ms=now)])  # prunes `old`
        assert [o.offset for o in await store.commit_history("g")] == [2, 3]
        assert [o.offset for o in (await store.load()).offsets if o.group_id == "g"] == [3]
    finally:
        await store.close()


async def test_commit_history_is_off_by_default(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    try:
        await store.write([offset(offset=1), offset(offset=2)])
        assert await store.commit_history("g") == []
    finally:
        await store.close()


async def test_close_waits_for_a_write_in_flight(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    write = asyncio.create_task(store.write([offset(partition=p) for p in range(5000)]))
    await asyncio.sleep(0)
    await store.close()
    await write
    reopened = SQLiteStore(tmp_path / "s.db")
    await reopened.open()
    assert len((await reopened.load()).offsets) == 5000
    await reopened.close()


_CRASH_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from storage.sqlite import SQLiteStore
    from tests.storage.helpers import offset

    async def main() -> None:
        store = SQLiteStore(sys.argv[1], synchronous="FULL")
        await store.open()
        i = 0
        while True:
            await store.write([offset(partition=i % 50, offset=i)])
            print(i, flush=True)  # acknowledged = durable
            i += 1

    asyncio.run(main())
    """
)


async def test_acknowledged_writes_survive_a_killed_process(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CRASH_WRITER, str(path),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    acked = -1
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(60):
            while acked < 300 and (line := await proc.stdout.readline()):
                acked = int(line)
    finally:
        proc.kill()  # SIGKILL: no chance to flush or close anything
        _, err = await proc.communicate()
    assert acked >= 300, f"writer subprocess did not get going: {err.decode()}"
    store = SQLiteStore(path)
    await store.open()
    try:
        offsets = {o.partition: o.offset for o in (await store.load()).offsets}
    finally:
        await store.close()
    # Every acknowledged commit is there (a later, unacknowledged one may be too).
    for partition in range(50):
        last_acked = max(i for i in range(acked + 1) if i % 50 == partition)
        assert offsets[partition] >= last_acked
