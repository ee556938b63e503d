"""TCP listener and connections: framing, requests handled in order, replies in request order.

Kafka's rule: a connection's responses come back in request order, and the broker processes
one request per connection at a time (the "mute"). A parked JoinGroup therefore holds its own
connection, never anybody else's. Frames that arrive meanwhile are queued; past a byte budget
the socket stops being read until the queue drains.

One departure (docs/performance.md#pipelined-offsetcommits): consecutive OffsetCommits of one
connection may be in the server together, up to ``--pipelined-commits-per-connection``, so that
they share a storage batch. Their replies still leave in request order, and any other request
waits until every earlier one has been answered, exactly as under the mute.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol, cast

from coordinator.server.sasl_session import SaslSession
from protocol.apis import ApiKey
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


# The API whose consecutive requests may be in the server together (see the module docstring).
PIPELINED_API = ApiKey.OFFSET_COMMIT
_PIPELINED_API_PREFIX = int(PIPELINED_API).to_bytes(2, "big")


class PendingReply:
    """The ReplyTo of one request: encodes the response for the request's API version."""

    __slots__ = (
        "answered",
        "api_key",
        "api_version",
        "connection",
        "correlation_id",
        "frame",
        "joinable",
        "parked_at",
        "response",
        "sent",
        "started",
    )

    def __init__(self, connection: Connection, api_key: int, api_version: int, correlation_id: int) -> None:
        self.connection = connection
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.sent = False
        self.started = time.perf_counter()
        self.parked_at: float | None = None  # when it began waiting for an event (long poll)
        # Set by the dispatcher once the core has handled the request: a later OffsetCommit
        # may then be handled while this one is unanswered (only OffsetCommits are marked).
        self.joinable = False
        self.answered = False  # complete() ran; the response waits for the earlier replies
        self.response: Any = None
        self.frame: bytes | None = None  # the encoded response

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
        max_pipelined_commits: int = 1,
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
        self.max_pipelined_commits = max_pipelined_commits
        # Requests handed to the dispatcher and not yet answered (and holds), in request order.
        self._unanswered: deque[PendingReply] = deque()
        self.closed = False
        self._processing = False
        self._next_slice: asyncio.Handle | None = None
        # Responses due in request order and not yet written: written together at the end of
        # _process, or (answers of a pipeline that go on) once per loop turn by _write_soon.
        self._output: list[bytes] = []
        self._write_soon: asyncio.Handle | None = None
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
        self._drop_output()
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
    @property
    def in_flight(self) -> PendingReply | None:
        """The oldest request not yet answered (or hold), None when the connection is idle."""
        return self._unanswered[0] if self._unanswered else None

    def _process(self) -> None:
        if self._processing or self._next_slice is not None:
            # The loop below, or the next slice already scheduled, picks up whatever came in.
            return
        self._processing = True
        slice_ends = time.perf_counter() + PROCESSING_SLICE_S
        unanswered = self._unanswered
        try:
            while self.queue and not self.closed and not self._writing_paused:
                if unanswered:
                    if not self._joins_pipeline(self.queue[0]):
                        break
                elif self._write_soon is not None:
                    # Answers of a finished pipeline go out before anything a request of
                    # another kind may write past the output list (forwarded responses).
                    self._write_output()
                frame = self.queue.popleft()
                self.queued_bytes -= len(frame)
                self.dispatcher.dispatch(self, frame)
                if self.queue and time.perf_counter() > slice_ends:
                    # Many pipelined requests: let other connections (and timers) have the loop.
                    self._next_slice = asyncio.get_running_loop().call_soon(self._next_slice_due)
                    break
        finally:
            self._processing = False
            if self._output and (self._write_soon is None or not unanswered):
                # Pipelined requests answered synchronously leave in one write (one syscall).
                self._write_output()
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

    def _joins_pipeline(self, frame: bytes) -> bool:
        """May ``frame`` be handled while earlier requests are unanswered? Only an OffsetCommit
        behind OffsetCommits the core has handled, within the bound."""
        unanswered = self._unanswered
        return (
            frame.startswith(_PIPELINED_API_PREFIX)
            and unanswered[-1].joinable  # the ones before it were joinable when it was let in
            and len(unanswered) < self.max_pipelined_commits
            and (self.sasl is None or not self.sasl.raw_tokens)
        )

    def _next_slice_due(self) -> None:
        self._next_slice = None
        self._process()

    def start(self, api_key: int, api_version: int, correlation_id: int) -> PendingReply:
        reply = PendingReply(self, api_key, api_version, correlation_id)
        self._unanswered.append(reply)
        return reply

    def complete(self, reply: PendingReply, response: Any) -> None:
        if self.closed or self.transport is None:
            return
        if response is not None:
            try:
                reply.frame = encode_response(
                    reply.api_key, reply.api_version, reply.correlation_id, response
                )
            except Exception:
                log.exception("could not encode the response to api %d v%d", reply.api_key, reply.api_version)
                self.abort("internal error while encoding a response")
                return
        reply.answered = True
        reply.response = response
        unanswered = self._unanswered
        if unanswered and unanswered[0] is reply:
            self._advance()
        elif reply not in unanswered:
            # Not one of this connection's unanswered requests (none today): written at once.
            self._send_in_turn(reply)
            self._flush()
        # else an earlier request is still unanswered: this reply waits for its turn.

    def _advance(self) -> None:
        """The oldest request is answered: send every answer whose turn has come, handle more."""
        unanswered = self._unanswered
        while unanswered and unanswered[0].answered:
            self._send_in_turn(unanswered.popleft())
        if self._processing:
            return  # answered inside _process, which goes on and writes when it ends
        if unanswered:
            self._flush()  # a pipeline goes on: its answers leave together when the turn ends
        # Else whatever _process answers at once leaves in the same write as these answers.
        self._process()
        self._flush()

    def _send_in_turn(self, reply: PendingReply) -> None:
        """The reply's turn has come: into the output, and into the latency metrics."""
        frame, response = reply.frame, reply.response
        if frame is None:
            return  # no response (Produce with acks=0), or a hold released
        reply.frame = reply.response = None
        self._output.append(frame)
        self.seen = True
        metrics = self.dispatcher.metrics
        if metrics is not None:
            now = time.perf_counter()
            parked_at = reply.parked_at
            handled = now if parked_at is None else parked_at
            metrics.observe_response(
                reply.api_key, reply.api_version, response, handled - reply.started, now - handled
            )

    def _flush(self) -> None:
        """Write the released replies now, or once this loop turn ends while a pipeline goes on."""
        if self._processing or not self._output:
            return  # _process writes them when it ends
        if not self._unanswered:
            self._write_output()
        elif self._write_soon is None:
            self._write_soon = asyncio.get_running_loop().call_soon(self._write_output)

    def _write_output(self) -> None:
        if self._write_soon is not None:
            self._write_soon.cancel()
            self._write_soon = None
        output = self._output
        if output and self.transport is not None and not self.closed:
            if len(output) == 1:
                self.transport.write(output[0])
            else:
                self.transport.writelines(output)
        output.clear()

    def _drop_output(self) -> None:
        self._unanswered.clear()
        self._output.clear()
        if self._write_soon is not None:
            self._write_soon.cancel()
            self._write_soon = None

    def hold(self) -> PendingReply:
        """Occupy the in-flight slot for work that has no Kafka response (bare SASL tokens)."""
        reply = PendingReply(self, -1, -1, -1)
        self._unanswered.append(reply)
        return reply

    def release(self, reply: PendingReply) -> None:
        unanswered = self._unanswered
        if reply in unanswered:
            reply.answered = True
            if unanswered[0] is reply:
                self._advance()

    def send_raw(self, frame: bytes) -> None:
        """Write a response frame that was encoded outside the normal path (ApiVersions errors),
        behind the replies released before it."""
        if not self.closed and self.transport is not None:
            self._output.append(frame)
            if not self._processing:
                self._write_output()

    def abort(self, reason: str, *, log_reason: bool = True) -> None:
        """Close at once, dropping queued requests; `log_reason` False when the caller logged it."""
        if self.closed:
            return
        if log_reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        self.queue.clear()
        self._drop_output()
        if self.transport is not None:
            self.transport.close()

    def stop_reading(self) -> None:
        """Shutdown: take no further requests; those in the server may still be answered."""
        self._stopped = True
        self.queue.clear()
        if self.transport is not None and not self.closed and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True

    def close(self) -> None:
        """Close after writing the replies already released (the transport sends them first)."""
        if not self.closed and self.transport is not None:
            self._write_output()
            self.closed = True
            self._drop_output()
            self.transport.close()
