"""A minimal asyncio Kafka connection over our own codecs.

One `Connection` per simulated member. Requests are written as complete frames (built by
`protocol.wire.encode_request`, or pre-encoded once and only re-stamped with a correlation id);
responses are split by `protocol.framing.FrameSplitter` and matched in order. The time a
response frame was read is taken inside `data_received`, so a busy client loop delays the
coroutine that awaits the response but not the measured latency of the bytes themselves (the
loop-lag monitor reports how busy the loop was). All times are `time.perf_counter()`.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections import deque
from typing import Any, Final, cast

from protocol.framing import FrameSplitter
from protocol.wire import decode_response, encode_request

_CORRELATION: Final = struct.Struct(">i")
_MAX_FRAME: Final = 100 * 1024 * 1024


class RequestTimeout(Exception):
    """No response within the request timeout; the connection is closed (a late answer would
    be matched to the wrong request)."""


class ConnectionLost(Exception):
    """The connection closed (or could not be opened) before the response arrived."""


class Prepared:
    """A request frame encoded once; each send copies it and stamps a fresh correlation id."""

    __slots__ = ("api_key", "api_version", "frame")

    def __init__(self, api_key: int, api_version: int, client_id: str | None, body: Any) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.frame = encode_request(api_key, api_version, 0, client_id, body)

    def with_correlation(self, correlation_id: int) -> bytes:
        frame = bytearray(self.frame)
        _CORRELATION.pack_into(frame, 8, correlation_id)  # length(4) api_key(2) version(2) correlation(4)
        return bytes(frame)


class Connection(asyncio.Protocol):
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._splitter = FrameSplitter(_MAX_FRAME)
        self._pending: deque[asyncio.Future[tuple[bytes, float]]] = deque()
        self._correlation = 0
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, protocol = await loop.create_connection(lambda: cls(client_id), host, port)
        except TimeoutError as exc:
            raise ConnectionLost(f"connect to {host}:{port} timed out") from exc
        except OSError as exc:
            raise ConnectionLost(f"connect to {host}:{port}: {exc}") from exc
        return protocol

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        try:
            frames = self._splitter.feed(data)
        except Exception as exc:
            self._fail(ConnectionLost(f"bad frame from server: {exc}"))
            return
        pending = self._pending
        for frame in frames:
            if not pending:
                self._fail(ConnectionLost("response without a request"))
                return
            future = pending.popleft()
            if not future.done():
                future.set_result((frame, now))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(ConnectionLost(f"connection closed: {exc}" if exc else "connection closed by server"))

    # API

    @property
    def busy(self) -> bool:
        """A request is in flight (e.g. a JoinGroup parked by the server)."""
        return bool(self._pending)

    def close(self) -> None:
        self._fail(ConnectionLost("connection closed by client"))

    def abort(self) -> None:
        """Drop the connection without a goodbye (simulates a crashed process)."""
        if self._transport is not None:
            self._transport.abort()
        self._fail(ConnectionLost("connection aborted by client"))

    async def request(
        self, api_key: int, api_version: int, body: Any, timeout_s: float
    ) -> tuple[Any, float, float]:
        """(response body, send time, receive time) on the `time.perf_counter` clock.

        (Not the loop's clock: uvloop's `loop.time()` has millisecond resolution and is only
        updated once per loop iteration.)
        """
        self._correlation += 1
        frame = encode_request(api_key, api_version, self._correlation, self.client_id, body)
        return await self._send(api_key, api_version, frame, timeout_s)

    async def request_prepared(self, prepared: Prepared, timeout_s: float) -> tuple[Any, float, float]:
        self._correlation += 1
        frame = prepared.with_correlation(self._correlation)
        return await self._send(prepared.api_key, prepared.api_version, frame, timeout_s)

    async def _send(
        self, api_key: int, api_version: int, frame: bytes, timeout_s: float
    ) -> tuple[Any, float, float]:
        if self.closed or self._transport is None:
            raise ConnectionLost("connection is closed")
        correlation_id = self._correlation
        future: asyncio.Future[tuple[bytes, float]] = self._loop.create_future()
        self._pending.append(future)
        sent = time.perf_counter()
        self._transport.write(frame)
        timer = self._loop.call_later(timeout_s, self._time_out, future, timeout_s)
        try:
            response_frame, received = await future
        finally:
            timer.cancel()
        got_correlation, body = decode_response(api_key, api_version, response_frame)
        if got_correlation != correlation_id:
            self.close()
            raise ConnectionLost(f"correlation id {got_correlation} != {correlation_id}")
        return body, sent, received

    def _time_out(self, future: asyncio.Future[tuple[bytes, float]], timeout_s: float) -> None:
        if not future.done():
            future.set_exception(RequestTimeout(f"no response within {timeout_s:.1f} s"))
            self.close()

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        while self._pending:
            future = self._pending.popleft()
            if not future.done():
                future.set_exception(exc)
                # Mark retrieved: an abandoned request (member cancelled) must not log noise.
                future.exception()
