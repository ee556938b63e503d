"""Fixtures for the durability suite: a throwaway PostgreSQL of its own (the outage test stops
and starts it, so it is not shared with tests/storage), a fresh database per test, servers
that are always stopped by PID."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import asyncpg
import pytest

from tests.durability.support import Servers, servers
from tests.storage.pg_server import PgServer, PostgresUnavailable


@pytest.fixture(scope="session")
def durability_pg() -> Iterator[PgServer]:
    """Skipped when no PostgreSQL binaries exist, unless STORAGE_TESTS_REQUIRE_POSTGRES=1."""
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


async def _admin(server: PgServer, sql: str) -> None:
    conn = await asyncpg.connect(server.dsn(), timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def pg_url(durability_pg: PgServer) -> Iterator[str]:
    """A fresh database; dropped afterwards (PostgreSQL is started again if a test left it down)."""
    name = f"d_{uuid.uuid4().hex}"
    asyncio.run(_admin(durability_pg, f'CREATE DATABASE "{name}"'))
    try:
        yield durability_pg.dsn(name)
    finally:
        if durability_pg.pid is None:
            durability_pg.start()
        asyncio.run(_admin(durability_pg, f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture
def coordinators() -> Iterator[Servers]:
    """Start coordinators through this; any still running at the end is SIGKILLed by PID."""
    with servers() as owned:
        yield owned
