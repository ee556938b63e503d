"""PostgreSQL specifics: outages, hangs, reconnects, migrations, settings, history."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import asyncpg
import pytest

from storage.base import StoreError
from storage.postgres import PostgresStore
from storage.records import ConsumerGroupTombstone, Record
from storage.schema import load_migrations
from storage.writer import BatchWriter
from tests.storage.helpers import consumer_group, consumer_member, offset
from tests.storage.pg_server import PgServer
from tests.support.ports import free_port

pytestmark = [pytest.mark.asyncio, pytest.mark.postgres]


async def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="synchronous_commit"):
        PostgresStore("postgresql://u@127.0.0.1/db", synchronous_commit="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        PostgresStore("postgresql://u@127.0.0.1/db", command_timeout=0)


async def test_unreachable_server_fails_fast_and_hides_the_password() -> None:
    store = PostgresStore(f"postgresql://u:s3cret@127.0.0.1:{free_port()}/db", connect_timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        await store.open()
    assert time.monotonic() - started < 3
    assert "s3cret" not in str(info.value)
    assert "***" in str(info.value)
    await store.close()


@pytest.mark.parametrize("setting", ["on", "off", "remote_apply"])
async def test_synchronous_commit_is_applied_to_the_write_session(pg_dsn: str, setting: str) -> None:
    store = PostgresStore(pg_dsn, synchronous_commit=setting)  # type: ignore[arg-type]
    await store.open()
    try:
        assert await store._conn.fetchval("SHOW synchronous_commit") == setting
    finally:
        await store.close()


async def test_migrations_recorded_once_and_newer_schema_refused(pg_dsn: str) -> None:
    for _ in range(3):
        store = PostgresStore(pg_dsn)
        await store.open()
        await store.close()
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch("SELECT version, name FROM schema_version ORDER BY version")
        assert [tuple(r) for r in rows] == [(m.version, m.name) for m in load_migrations("postgres")]
        await conn.execute("INSERT INTO schema_version VALUES (999, 'from_the_future', 0)")
    finally:
        await conn.close()
    store = PostgresStore(pg_dsn)
    with pytest.raises(StoreError, match="newer"):
        await store.open()
    await store.close()


async def test_concurrent_first_opens_migrate_once(pg_dsn: str) -> None:
    stores = [PostgresStore(pg_dsn) for _ in range(4)]
    try:
        await asyncio.gather(*(s.open() for s in stores))
        await stores[0].write([offset()])
        assert len((await stores[3].load()).offsets) == 1
    finally:
        for s in stores:
            await s.close()


async def test_concurrent_writes_on_one_store_are_serialised(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    await store.open()
    try:
        await asyncio.gather(*(store.write([offset(partition=p % 3, offset=p)]) for p in range(30)))
        assert len((await store.load()).offsets) == 3
    finally:
        await store.close()


async def test_nul_in_a_text_key_fails_that_batch_only(pg_dsn: str) -> None:
    # PostgreSQL text cannot hold U+0000 (commit metadata is bytea, so only keys are affected).
    store = PostgresStore(pg_dsn)
    await store.open()
    try:
        with pytest.raises(StoreError):
            await store.write([offset(), offset("bad\x00group")])
        await store.write([offset(metadata="nul\x00ok")])
        assert [o.metadata for o in (await store.load()).offsets] == ["nul\x00ok"]
    finally:
        await store.close()


async def test_server_side_failure_after_a_consumer_wipe_rolls_back(pg_dsn: str) -> None:
    # The wipe and the member deletes run, then the server rejects the member upsert (NUL in
    # a text column): the whole transaction must roll back on the same, healthy session.
    store = PostgresStore(pg_dsn)
    await store.open()
    try:
        before: list[Record] = [
            consumer_group("cg"),
            consumer_member("cg", "m1"),
            consumer_member("cg", "m2"),
        ]
        await store.write(before)
        session = store._conn
        with pytest.raises(StoreError):
            await store.write(
                [
                    ConsumerGroupTombstone("cg"),
                    consumer_member("cg", "m3"),
                    consumer_member("cg", "bad\x00id"),
                ]
            )
        assert store._conn is session  # a rejected batch keeps the connection
        state = await store.load()
        assert state.consumer_groups == [before[0]]
        assert sorted(m.member_id for m in state.consumer_members) == ["m1", "m2"]
    finally:
        await store.close()


async def test_commit_history_when_enabled(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, history_retention_ms=3_600_000, history_prune_interval_ms=0)
    await store.open()
    try:
        now = int(time.time() * 1000)
        old = offset(offset=1, commit_ms=now - 7_200_000)
        batch = [
            old,
            *(offset(offset=o, commit_ms=now) for o in range(2, 40)),
            offset("other", commit_ms=now),
        ]
        await store.write(batch)
        await store.write([offset(offset=40, commit_ms=now)])  # prunes `old`
        assert [o.offset for o in await store.commit_history("g")] == list(range(2, 41))
        assert [o.offset for o in (await store.load()).offsets if o.group_id == "g"] == [40]
    finally:
        await store.close()


async def test_commit_history_is_off_by_default(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    await store.open()
    try:
        await store.write([offset(offset=1), offset(offset=2)])
        assert await store.commit_history("g") == []
    finally:
        await store.close()


async def test_a_hung_backend_gives_store_error_within_the_timeout(pg_server: PgServer, pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, command_timeout=1.0, connect_timeout=1.0)
    await store.open()
    backend_pid = await store._conn.fetchval("SELECT pg_backend_pid()")
    os.kill(backend_pid, signal.SIGSTOP)  # the server process serving our session freezes
    try:
        started = time.monotonic()
        with pytest.raises(StoreError):
            await store.write([offset(partition=1), offset("h")])
        assert time.monotonic() - started < 3
    finally:
        os.kill(backend_pid, signal.SIGCONT)
    # A new session is used from now on; the frozen one was dropped.
    await store.write([offset(partition=2)])
    assert 2 in {o.partition for o in (await store.load()).offsets}
    await store.close()


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_outage_gives_store_errors_then_the_same_store_recovers(
    pg_server: PgServer, pg_dsn: str, mode: str
) -> None:
    """Stop PostgreSQL under load ("fast" = clean shutdown, "immediate" = crash), check the
    writes fail promptly, start it again, and check the same store (and writer) carry on and
    that every acknowledged write survived."""
    store = PostgresStore(pg_dsn, command_timeout=2.0, connect_timeout=2.0)
    await store.open()
    writer = BatchWriter(store)
    acked: dict[int, int] = {}  # partition -> offset acknowledged last
    failures: list[float] = []  # how long each failed write took
    stop = asyncio.Event()
    restarted = False
    resumed = asyncio.Event()  # a write succeeded after the restart

    async def producer(partition: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            records: list[Record] = [offset(partition=partition, offset=n)]
            try:
                await writer.write(records)
            except StoreError:
                failures.append(time.monotonic() - started)
                await asyncio.sleep(0.01)
            else:
                acked[partition] = n
                if restarted:
                    resumed.set()

    producers = [asyncio.create_task(producer(p)) for p in range(8)]
    try:
        await asyncio.sleep(0.3)
        assert acked, "no write succeeded before the outage"
        await asyncio.to_thread(pg_server.stop, mode)
        await asyncio.sleep(0.5)  # writes keep failing while it is down
        assert failures, "no write failed while PostgreSQL was down"
        assert max(failures) < 5, f"a failing write took {max(failures):.1f}s"
        await asyncio.to_thread(pg_server.start)
        restarted = True
        await asyncio.wait_for(resumed.wait(), 15)  # the same store and writer carry on
    finally:
        stop.set()
        await asyncio.gather(*producers)
        await writer.close()
        if pg_server.pid is None:
            pg_server.start()
    loaded = {o.partition: o.offset for o in (await store.load()).offsets}
    await store.close()
    for partition, n in acked.items():
        assert loaded[partition] >= n, "an acknowledged write was lost"
