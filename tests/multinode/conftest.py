"""Fixtures for the multi-node tests: a throwaway PostgreSQL of this module's own (one test
restarts it), a fresh database per test, and nodes and workloads that are always stopped by PID."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.multinode.support import Nodes, Workload
from tests.storage.pg_server import PgServer, PostgresUnavailable


@pytest.fixture(scope="module")
def multinode_pg() -> Iterator[PgServer]:
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
def database(multinode_pg: PgServer) -> Iterator[str]:
    """A fresh database's URL; dropped afterwards (PostgreSQL is started again if a test left it down)."""
    name = f"m_{uuid.uuid4().hex}"
    asyncio.run(_admin(multinode_pg, f'CREATE DATABASE "{name}"'))
    try:
        yield multinode_pg.dsn(name)
    finally:
        if multinode_pg.pid is None:
            multinode_pg.start()
        asyncio.run(_admin(multinode_pg, f'DROP DATABASE "{name}" WITH (FORCE)'))


@pytest.fixture
def cleanup(tmp_path: Path) -> Iterator[list[Nodes | Workload]]:
    """Register nodes and workloads here: whatever still runs at the end is killed by PID. Each
    node's log (every incarnation) is kept as ``node-N.log`` in the test's temporary directory."""
    owned: list[Nodes | Workload] = []
    try:
        yield owned
    finally:
        for item in reversed(owned):
            if isinstance(item, Workload):
                item.kill()
            else:
                item.close()
                for node in item.nodes.values():
                    (tmp_path / f"node-{node.node_id}.log").write_text(node.log_text())


@pytest.fixture
def events_dir(tmp_path: Path) -> Path:
    path = tmp_path / "events"
    path.mkdir()
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long variants here (marked slow) run only when asked for with -m slow."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="long variant: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None and here in item.path.parents:
            item.add_marker(skip)
