"""An optional throwaway PostgreSQL for the `commit` workload (--postgres)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.common import PG_BIN
from runner.servers import free_port


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """initdb + pg_ctl as the postgres user on a free loopback port; yields the URL."""
    # Its own directory under /tmp: the run's work directory is private to root.
    tmp = Path(tempfile.mkdtemp(prefix="kgbench-pg-"))
    data = tmp / "pgdata"
    data.mkdir()
    shutil.chown(tmp, "postgres")
    shutil.chown(data, "postgres")
    port = free_port()

    def as_pg(*cmd: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True, stdout=subprocess.DEVNULL)

    as_pg(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={tmp}"
    as_pg(str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(tmp / "pg.log"), "-w", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        as_pg(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(tmp, ignore_errors=True)


def reset_postgres(url: str) -> None:
    """Drop the coordinator's tables so each server starts empty."""
    import asyncpg

    async def reset() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        finally:
            await conn.close()

    asyncio.run(reset())
