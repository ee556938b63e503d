"""TCP listener and connections: framing, one request in flight per connection, in-order replies.

Kafka's rule: a connection's responses come back in request order, and the broker processes
one request per connection at a time (the "mute"). A parked JoinGroup therefore holds its own
connection, never anybody else's. Frames that arrive meanwhile are queued; past a byte budget
the socket stops being read until the queue drains.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol, cast

from coordinator.server.sasl_session import SaslSession
from protocol.framing import FrameError, FrameSplitter
from protocol.wire import encode_response

if TYPE_CHECKING:
    from coordinator.server.listeners import BoundListener

log = logging.getLogger(__name__)


class ResponseObserver(Protocol):
    def observe_response(
        self, api_key: int, api_version: int, response: Any, seconds: float, parked_seconds: float = 0.0
    ) -> None: ...


class FrameHandler(Protocol):
    """What a connection hands its frames to (the dispatcher, or the gateway's forwarder)."""

    @property
    def metrics(self) -> ResponseObserver | None: ...

    def connection_opened(self, connection: Connection) -> None: ...

    def connection_closed(self, connection: Connection) -> None: ...

    def dispatch(self, connection: Connection, frame: bytes) -> None: ...


class Admission(Protocol):
    """Connection limits: admit on connect, release on loss."""

    def admit(self, connection: Connection) -> bool: ...

    def release(self, connection: Connection) -> None: ...


class PendingReply:
    """The ReplyTo of one request: encodes the response for the request's API version."""

    __slots__ = ("api_key", "api_version", "connection", "correlation_id", "parked_at", "sent", "started")

    def __init__(self, connection: Connection, api_key: int, api_version: int, correlation_id: int) -> None:
        self.connection = connection
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.sent = False
        self.started = time.perf_counter()
        self.parked_at: float | None = None  # when it began waiting for an event (long poll)

    def park(self) -> None:
        """Handled, but the answer waits for an event: from now on the time counts as parked."""
        if not self.sent and self.parked_at is None:
            self.parked_at = time.perf_counter()

    def send(self, response: Any) -> None:
        if self.sent:
            log.error("second response for %s correlation %d dropped", self.api_key, self.correlation_id)
            return
        self.sent = True
        self.connection.complete(self, response)

    def finish_without_response(self) -> None:
        """For requests Kafka never answers (Produce with acks=0)."""
        if not self.sent:
            self.sent = True
            self.connection.complete(self, None)


# Longest run of one connection's pipelined requests before the loop serves others.
PROCESSING_SLICE_S = 0.01


class Connection(asyncio.Protocol):
    def __init__(
        self,
        dispatcher: FrameHandler,
        max_frame_bytes: int,
        max_queued_bytes: int,
        limits: Admission | None = None,
        max_queued_requests: int = 500,
        listener: BoundListener | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.listener = listener
        self.advertised: tuple[str, int] | None = listener.advertised if listener is not None else None
        self.principal = "User:ANONYMOUS"
        self.sasl: SaslSession | None = None  # set on SASL listeners
        self.splitter = FrameSplitter(max_frame_bytes)
        self.max_queued_bytes = max_queued_bytes
        self.max_queued_requests = max_queued_requests
        self.limits = limits
        # Idle bookkeeping read by ConnectionLimits.sweep (see limits.py).
        self.seen = False
        self.idle_since = 0.0
        self.frames_received = 0
        self.partial_frames_mark = 0
        self.partial_since: float | None = None
        self.transport: asyncio.Transport | None = None
        self.peer = "unknown"
        self.client_host = ""
        self.queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self.in_flight: PendingReply | None = None
        self.closed = False
        self._processing = False
        self._next_slice: asyncio.Handle | None = None
        self._output: list[bytes] = []  # responses produced while processing, written together
        self._reading_paused = False
        self._writing_paused = False
        self._stopped = False

    # ---- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.client_host, self.peer = str(peer[0]), f"{peer[0]}:{peer[1]}"
        if self.limits is not None and not self.limits.admit(self):
            self.closed = True
            self.transport.abort()
            return
        if self.listener is not None:
            self.advertised = self.listener.advertised  # final once bound (ephemeral ports)
            if self.listener.listener.uses_sasl:
                self.sasl = SaslSession()
            if self.listener.ssl_context is not None:
                from coordinator.server.listeners import certificate_principal

                self.principal = certificate_principal(transport.get_extra_info("peercert")) or self.principal
        self.dispatcher.connection_opened(self)

    def data_received(self, data: bytes) -> None:
        if self.closed or self._stopped:
            return
        try:
            frames = self.splitter.feed(data)
        except FrameError as exc:
            self.abort(f"invalid frame: {exc}")
            return
        self.seen = True
        for frame in frames:
            self.queue.append(frame)
            self.queued_bytes += len(frame)
        if frames:
            self.frames_received += len(frames)
        if (
            self.queued_bytes + self.splitter.buffered > self.max_queued_bytes
            or len(self.queue) >= self.max_queued_requests
        ) and not self._reading_paused:
            assert self.transport is not None
            self.transport.pause_reading()
            self._reading_paused = True
        self._process()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.queue.clear()
        if self.limits is not None:
            self.limits.release(self)
        self.dispatcher.connection_closed(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.seen = True
        self._process()

    # ---- request flow --------------------------------------------------------------------
    def _process(self) -> None:
        if self._processing or self._next_slice is not None:
            # The loop below, or the next slice already scheduled, picks up whatever came in.
            return
        self._processing = True
        slice_ends = time.perf_counter() + PROCESSING_SLICE_S
        try:
            while self.queue and self.in_flight is None and not self.closed and not self._writing_paused:
                frame = self.queue.popleft()
                self.queued_bytes -= len(frame)
                self.dispatcher.dispatch(self, frame)
                if self.queue and time.perf_counter() > slice_ends:
                    # Many pipelined requests: let other connections (and timers) have the loop.
                    self._next_slice = asyncio.get_running_loop().call_soon(self._next_slice_due)
                    break
        finally:
            self._processing = False
            if self._output and self.transport is not None and not self.closed:
                # Pipelined requests answered synchronously leave in one write (one syscall).
                self.transport.writelines(self._output)
            self._output.clear()
        if (
            self._reading_paused
            and self.queued_bytes <= self.max_queued_bytes // 2
            and len(self.queue) <= self.max_queued_requests // 2
            and not self.closed
            and not self._stopped
        ):
            assert self.transport is not None
            self.transport.resume_reading()
            self._reading_paused = False

    def _next_slice_due(self) -> None:
        self._next_slice = None
        self._process()

    def start(self, api_key: int, api_version: int, correlation_id: int) -> PendingReply:
        reply = PendingReply(self, api_key, api_version, correlation_id)
        self.in_flight = reply
        return reply

    def complete(self, reply: PendingReply, response: Any) -> None:
        if self.closed or self.transport is None:
            return
        if response is not None:
            try:
                frame = encode_response(reply.api_key, reply.api_version, reply.correlation_id, response)
            except Exception:
                log.exception("could not encode the response to api %d v%d", reply.api_key, reply.api_version)
                self.abort("internal error while encoding a response")
                return
            if self._processing:
                self._output.append(frame)
            else:
                self.transport.write(frame)
            self.seen = True
            metrics = self.dispatcher.metrics
            if metrics is not None:
                now = time.perf_counter()
                parked_at = reply.parked_at
                handled = now if parked_at is None else parked_at
                metrics.observe_response(
                    reply.api_key, reply.api_version, response, handled - reply.started, now - handled
                )
        if self.in_flight is reply:
            self.in_flight = None
            self._process()

    def hold(self) -> PendingReply:
        """Occupy the in-flight slot for work that has no Kafka response (bare SASL tokens)."""
        reply = PendingReply(self, -1, -1, -1)
        self.in_flight = reply
        return reply

    def release(self, reply: PendingReply) -> None:
        if self.in_flight is reply:
            self.in_flight = None
            self._process()

    def send_raw(self, frame: bytes) -> None:
        """Write a response frame that was encoded outside the normal path (ApiVersions errors)."""
        if not self.closed and self.transport is not None:
            self.transport.write(frame)

    def abort(self, reason: str, *, log_reason: bool = True) -> None:
        """Close at once, dropping queued requests; `log_reason` False when the caller logged it."""
        if self.closed:
            return
        if log_reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        self.queue.clear()
        if self.transport is not None:
            self.transport.close()

    def stop_reading(self) -> None:
        """Shutdown: take no further requests; the one in flight may still be answered."""
        self._stopped = True
        self.queue.clear()
        if self.transport is not None and not self.closed and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True

    def close(self) -> None:
        if not self.closed and self.transport is not None:
            self.closed = True
            self.transport.close()
