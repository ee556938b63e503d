"""Fixtures for the storage suite: a throwaway PostgreSQL and a store factory per backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

from storage.base import Store
from storage.memory import MemoryData, MemoryStore
from storage.postgres import PostgresStore
from storage.sqlite import SQLiteStore
from tests.storage.pg_server import PgServer, PostgresUnavailable

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL for the session. Skipped when no binaries exist, unless
    STORAGE_TESTS_REQUIRE_POSTGRES=1 (set it in CI so a broken install fails loudly)."""
    try:
        server = PgServer.create()
    except PostgresUnavailable as exc:
        if os.environ.get("STORAGE_TESTS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL required but unavailable: {exc}")
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.destroy()


async def create_database(server: PgServer) -> str:
    name = f"t_{uuid.uuid4().hex}"
    admin = await asyncpg.connect(server.dsn(), timeout=10)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return server.dsn(name)


async def drop_database(server: PgServer, dsn: str) -> None:
    if server.pid is None:  # a test left the server down
        server.start()
    admin = await asyncpg.connect(server.dsn(), timeout=10)
    try:
        await admin.execute(f'DROP DATABASE "{dsn.rsplit("/", 1)[1]}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest_asyncio.fixture
async def pg_dsn(pg_server: PgServer) -> AsyncIterator[str]:
    """A fresh, empty database for one test."""
    dsn = await create_database(pg_server)
    try:
        yield dsn
    finally:
        await drop_database(pg_server, dsn)


@dataclass
class StoreFactory:
    """Makes stores on one location (a MemoryData, a file, a database): a second store from
    the same factory sees what the first one wrote, like a restarted process."""

    backend: str
    _make: Callable[..., Store]
    location: Any
    created: list[Store] = field(default_factory=list)

    def __call__(self, **options: Any) -> Store:
        store = self._make(**options)
        self.created.append(store)
        return store

    async def opened(self, **options: Any) -> Store:
        store = self(**options)
        await store.open()
        return store

    async def close_all(self) -> None:
        for store in self.created:
            await store.close()


@pytest_asyncio.fixture(params=BACKENDS)
async def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    backend: str = request.param
    factory: StoreFactory
    if backend == "memory":
        data = MemoryData()
        factory = StoreFactory(backend, lambda **kw: MemoryStore(data, **kw), data)
    elif backend == "sqlite":
        path = tmp_path / "state.db"
        factory = StoreFactory(backend, lambda **kw: SQLiteStore(path, **kw), path)
    else:
        # getfixturevalue cannot run an async fixture from inside the loop: inline pg_dsn.
        server: PgServer = request.getfixturevalue("pg_server")
        dsn = await create_database(server)
        factory = StoreFactory(backend, lambda **kw: PostgresStore(dsn, **kw), dsn)
    try:
        yield factory
    finally:
        await factory.close_all()
        if backend == "postgres":
            await drop_database(server, factory.location)


@pytest_asyncio.fixture
async def store(store_factory: StoreFactory) -> Store:
    return await store_factory.opened()
