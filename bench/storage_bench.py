"""Offset-commit throughput and latency through BatchWriter, per storage backend.

    python bench/storage_bench.py                      # memory, sqlite, postgres (throwaway server)
    python bench/storage_bench.py --backends sqlite --duration 5
    python bench/storage_bench.py --postgres-dsn postgresql://u:pw@127.0.0.1:5432/bench
    python bench/storage_bench.py --load-rows 1000000  # also time load() of that many offsets

Every writer loops ``await writer.write(<n offsets>)``; a "commit" is one such call, durable when
it returns. Without --postgres-dsn a throwaway PostgreSQL (tests/storage/pg_server.py, fsync on,
synchronous_commit on) is started on 127.0.0.1 and removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from storage.base import Store
from storage.memory import MemoryStore
from storage.postgres import PostgresStore
from storage.records import OffsetCommitRecord, Record
from storage.sqlite import SQLiteStore
from storage.writer import BatchWriter


@dataclass
class Result:
    backend: str
    writers: int
    offsets_per_commit: int
    commits: int
    elapsed_s: float
    latencies_s: list[float]
    store_writes: int

    def row(self) -> list[str]:
        lat = sorted(self.latencies_s)
        p50 = statistics.median(lat) * 1000
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        rate = self.commits / self.elapsed_s
        return [
            self.backend,
            str(self.writers),
            str(self.offsets_per_commit),
            f"{rate:,.0f}",
            f"{rate * self.offsets_per_commit:,.0f}",
            f"{p50:.2f}",
            f"{p99:.2f}",
            f"{self.store_writes / self.elapsed_s:,.0f}",
            f"{self.commits / max(self.store_writes, 1):.1f}",
        ]


HEADER = [
    "backend",
    "writers",
    "offsets/commit",
    "commits/s",
    "offsets/s",
    "p50 ms",
    "p99 ms",
    "store writes/s",
    "commits/store write",
]


async def run_scenario(
    store: Store, backend: str, writers: int, per_commit: int, duration_s: float
) -> Result:
    writer = BatchWriter(store)
    latencies: list[float] = []
    stop = False

    async def client(w: int) -> int:
        n = 0
        while not stop:
            n += 1
            records: list[Record] = [
                OffsetCommitRecord(
                    f"bench-group-{w}", "bench-topic", p, n, 0, "", int(time.time() * 1000), None
                )
                for p in range(per_commit)
            ]
            started = time.perf_counter()
            await writer.write(records)
            latencies.append(time.perf_counter() - started)
        return n

    tasks = [asyncio.create_task(client(w)) for w in range(writers)]
    await asyncio.sleep(min(0.5, duration_s / 4))  # warm-up: caches, statements, WAL
    latencies.clear()
    first_batches = writer.stats.batches_written
    started = time.perf_counter()
    await asyncio.sleep(duration_s)
    elapsed = time.perf_counter() - started
    commits = len(latencies)
    store_writes = writer.stats.batches_written - first_batches
    stop = True
    await asyncio.gather(*tasks)
    await writer.close()
    return Result(backend, writers, per_commit, commits, elapsed, latencies, store_writes)


async def time_load(store: Store, rows: int) -> tuple[float, float]:
    chunk = 50_000
    for start in range(0, rows, chunk):
        await store.write(
            [
                OffsetCommitRecord(f"load-group-{i // 1000}", "load-topic", i % 1000, i, 0, "", 0, None)
                for i in range(start, min(rows, start + chunk))
            ]
        )
    started = time.perf_counter()
    state = await store.load()
    elapsed = time.perf_counter() - started
    assert len(state.offsets) >= rows
    return elapsed, rows / elapsed


StoreMaker = Callable[[], contextlib.AbstractAsyncContextManager[Store]]


def memory_maker() -> StoreMaker:
    @contextlib.asynccontextmanager
    async def make() -> AsyncIterator[Store]:
        store = MemoryStore()
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    return make


def sqlite_maker(tmpdir: Path, synchronous: str) -> StoreMaker:
    @contextlib.asynccontextmanager
    async def make() -> AsyncIterator[Store]:
        store = SQLiteStore(tmpdir / f"{uuid.uuid4().hex}.db", synchronous=synchronous)  # type: ignore[arg-type]
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    return make


def postgres_maker(admin_dsn: str) -> StoreMaker:
    import asyncpg

    @contextlib.asynccontextmanager
    async def make() -> AsyncIterator[Store]:
        name = f"bench_{uuid.uuid4().hex}"
        admin = await asyncpg.connect(admin_dsn)
        await admin.execute(f'CREATE DATABASE "{name}"')
        store = PostgresStore(admin_dsn.rsplit("/", 1)[0] + "/" + name)
        try:
            await store.open()
            yield store
        finally:
            await store.close()
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            await admin.close()

    return make


async def main(args: argparse.Namespace) -> None:
    backends: dict[str, StoreMaker] = {}
    server = None
    with tempfile.TemporaryDirectory(prefix="kgc-bench-") as tmp:
        for name in args.backends.split(","):
            if name == "memory":
                backends["memory"] = memory_maker()
            elif name == "sqlite":
                for sync in args.sqlite_synchronous.split(","):
                    backends[f"sqlite {sync}"] = sqlite_maker(Path(tmp), sync)
            elif name == "postgres":
                dsn = args.postgres_dsn
                if dsn is None:
                    from tests.storage.pg_server import PgServer

                    server = await asyncio.to_thread(PgServer.create)
                    dsn = server.dsn()
                backends["postgres"] = postgres_maker(dsn)
            else:
                raise SystemExit(f"unknown backend {name!r}")
        try:
            results: list[Result] = []
            loads: list[tuple[str, float, float]] = []
            for backend, make in backends.items():
                for writers in (1, 50):
                    for per_commit in (1, 100):
                        async with make() as store:
                            result = await run_scenario(store, backend, writers, per_commit, args.duration)
                        results.append(result)
                        print("  ".join(result.row()), file=sys.stderr)
                if args.load_rows:
                    async with make() as store:
                        elapsed, rate = await time_load(store, args.load_rows)
                    loads.append((backend, elapsed, rate))
        finally:
            if server is not None:
                await asyncio.to_thread(server.destroy)

    print_table(HEADER, [r.row() for r in results])
    if loads:
        print()
        print_table(
            ["backend", f"load() of {args.load_rows:,} offsets, s", "offsets/s"],
            [[b, f"{e:.2f}", f"{r:,.0f}"] for b, e, r in loads],
        )


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) + " |")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    parser.add_argument("--sqlite-synchronous", default="FULL,NORMAL", help="comma-separated")
    parser.add_argument("--postgres-dsn", help="use this server instead of a throwaway one")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per scenario")
    parser.add_argument("--load-rows", type=int, default=0, help="also time load() of this many offsets")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.uvloop:
        import uvloop

        uvloop.run(main(arguments))
    else:
        asyncio.run(main(arguments))
