"""A gateway run inside the test process (its own event loop thread), recording every byte it
sends to clients."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import load_config
from coordinator.server.connection import Connection


class RecordingTransport:
    def __init__(self, inner: asyncio.Transport, sink: list[bytes]) -> None:
        self._inner = inner
        self._sink = sink

    def write(self, data: bytes) -> None:
        self._sink.append(bytes(data))
        self._inner.write(data)

    def writelines(self, items: Iterable[bytes]) -> None:
        items = [bytes(item) for item in items]
        self._sink.extend(items)
        self._inner.writelines(items)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def recorded_gateway(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any]
) -> Iterator[tuple[str, list[bytes]]]:
    """Yields the bootstrap address and the list every response byte string lands in."""
    sent: list[bytes] = []
    original = Connection.connection_made

    def connection_made(self: Connection, transport: asyncio.BaseTransport) -> None:
        original(self, transport)
        if self.transport is not None:
            self.transport = RecordingTransport(self.transport, sent)  # type: ignore[assignment]

    monkeypatch.setattr(Connection, "connection_made", connection_made)
    config = load_config(
        cli={"host": "127.0.0.1", "port": 0, "storage": "memory://", "group_initial_rebalance_delay_ms": 0,
             "group_min_session_timeout_ms": 1000, **settings},
        env={},
    )  # fmt: skip
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        server: RunningServer = await start_server(config)
        holder["server"], holder["loop"], holder["stop"] = server, asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        await holder["stop"].wait()
        await server.shutdown()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:
            holder["error"] = exc
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30), "the gateway did not start"
    assert "error" not in holder, holder.get("error")
    try:
        yield f"127.0.0.1:{holder['server'].port}", sent
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        thread.join(30)
