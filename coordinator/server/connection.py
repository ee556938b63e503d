"""TCP listener and connections: framing, requests handled in order, replies in request order.

Kafka's rule: a connection's responses come back in request order, and the broker processes
one request per connection at a time (the "mute"). A parked JoinGroup therefore holds its own
connection, never anybody else's. Frames that arrive meanwhile are queued; past a byte budget
the socket stops being read until the queue drains.

The connection and each of its requests move through the states of connection_states.py, one
transition table each (docs/architecture.md#the-connection-state-machine). The connection is the
only writer of its socket: locally served answers, forwarded ones and forwarded answers passed
on while they arrive (cut-through) all go out through it. Answering a request never serves the
next one: the pump does, once per loop turn, from the queue.

Pipelines (docs/performance.md#pipelined-offsetcommits, docs/gateway.md): consecutive requests
of one pipeline may be in the server together, up to the pipeline's bound — OffsetCommits, so
that they share a storage batch, and forwarded requests, which go upstream at once. Their replies
still leave in request order, and any other request waits until every earlier one has been
answered, exactly as under the mute.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, cast

from coordinator.server.byte_budget import ByteBudget
from coordinator.server.connection_states import (
    ANSWERED,
    JOINABLE,
    REPLY_NEXT,
    ConnectionEvent,
    ConnectionState,
    MuteReason,
    ReplyEvent,
    ReplyState,
    next_connection_state,
)
from coordinator.server.sasl_session import SaslSession
from protocol.apis import ApiKey
from protocol.framing import FrameError, FrameSplitter
from protocol.wire import encode_response

if TYPE_CHECKING:
    from coordinator.server.listeners import BoundListener

log = logging.getLogger(__name__)

# Enum members as module constants: a member lookup on the class costs a descriptor call.
_DO_ANSWER: Final = ReplyEvent.ANSWER
_DO_HANDLE: Final = ReplyEvent.HANDLE
_DO_PARK: Final = ReplyEvent.PARK
_DO_STREAM: Final = ReplyEvent.STREAM
_DO_WRITE: Final = ReplyEvent.WRITE
_MUTED_BY_BUDGET_SPENT: Final = MuteReason.BUDGET_SPENT
_MUTED_BY_CLIENT_NOT_READING: Final = MuteReason.CLIENT_NOT_READING
_MUTED_BY_QUEUE_FULL: Final = MuteReason.QUEUE_FULL
_ON_CLOSE: Final = ConnectionEvent.CLOSE
_ON_LOST: Final = ConnectionEvent.LOST
_ON_MUTE: Final = ConnectionEvent.MUTE
_ON_STOP_READING: Final = ConnectionEvent.STOP_READING
_ON_UNMUTE: Final = ConnectionEvent.UNMUTE
_REPLY_ANSWERED: Final = ReplyState.ANSWERED
_REPLY_IN_SERVER: Final = ReplyState.IN_SERVER
_REPLY_SENT: Final = ReplyState.SENT
_REPLY_STREAMING: Final = ReplyState.STREAMING
_STATE_CLOSED: Final = ConnectionState.CLOSED
_STATE_DRAINING: Final = ConnectionState.DRAINING
_STATE_OPEN: Final = ConnectionState.OPEN


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

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None:
        """The pipeline ``frame`` would join if it were let in now, None for none."""


class Admission(Protocol):
    """Connection limits: admit on connect, release on loss."""

    def admit(self, connection: Connection) -> bool: ...

    def release(self, connection: Connection) -> None: ...


class Pipeline(NamedTuple):
    """Requests of one kind that may be in the server together, up to ``bound`` of them."""

    name: str
    bound: int


# The API whose consecutive requests may be in the server together (see the module docstring).
PIPELINED_API = ApiKey.OFFSET_COMMIT
COMMITS = "commits"
_PIPELINED_API_PREFIX = int(PIPELINED_API).to_bytes(2, "big")
DEFAULT_MAX_UNSENT_BYTES = 1 << 20


def is_pipelined_commit(frame: bytes) -> bool:
    return frame.startswith(_PIPELINED_API_PREFIX)


class PendingReply:
    """The ReplyTo of one request: encodes the response for the request's API version."""

    __slots__ = (
        "api_key",
        "api_version",
        "budgeted",
        "connection",
        "correlation_id",
        "frame",
        "parked_at",
        "pipeline",
        "response",
        "started",
        "state",
    )

    def __init__(self, connection: Connection, api_key: int, api_version: int, correlation_id: int) -> None:
        self.connection = connection
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.state = _REPLY_IN_SERVER
        self.pipeline: Pipeline | None = None
        self.started = time.perf_counter()
        self.parked_at: float | None = None  # when it began waiting for an event (long poll)
        self.response: Any = None
        self.frame: bytes | None = None  # the encoded response, with its length prefix
        self.budgeted = 0  # bytes of the frame reserved from the connection's ByteBudget

    @property
    def answered(self) -> bool:
        return self.state in ANSWERED

    def move(self, event: ReplyEvent) -> bool:
        """Take the transition of the table; False (nothing changes) when there is none."""
        state = REPLY_NEXT[self.state][event]
        if state is None:
            return False
        self.state = state
        return True

    def handled(self, pipeline: Pipeline | None = None) -> None:
        """Handled (the core validated it, or it went upstream): a later request of ``pipeline``
        may now join it in the server."""
        self.pipeline = pipeline
        self.move(_DO_HANDLE)

    def park(self) -> None:
        """Handled, but the answer waits for an event: from now on the time counts as parked."""
        if self.move(_DO_PARK) and self.parked_at is None:
            self.parked_at = time.perf_counter()

    def send(self, response: Any) -> None:
        self.connection.answer(self, response)

    def send_frame(self, frame: bytes | None, budgeted: int = 0) -> None:
        """An answer encoded already, with its length prefix (forwarded, or a bare SASL token);
        ``budgeted`` bytes of the ByteBudget are given back once it is written."""
        self.connection.answer_frame(self, frame, budgeted)

    def finish_without_response(self) -> None:
        """For requests Kafka never answers (Produce with acks=0), and holds released."""
        if not self.answered:
            self.connection.answer_frame(self, None)


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
        budget: ByteBudget | None = None,
        max_unsent_bytes: int = DEFAULT_MAX_UNSENT_BYTES,
    ) -> None:
        self.dispatcher = dispatcher
        self.listener = listener
        self.advertised: tuple[str, int] | None = listener.advertised if listener is not None else None
        self.principal = "User:ANONYMOUS"
        self.sasl: SaslSession | None = None  # set on SASL listeners
        self.splitter = FrameSplitter(max_frame_bytes)
        self.max_queued_bytes = max_queued_bytes
        self.max_queued_requests = max_queued_requests
        self.max_unsent_bytes = max_unsent_bytes
        self.limits = limits
        self.budget = budget if budget is not None else ByteBudget()
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
        self.commit_pipeline = Pipeline(COMMITS, max_pipelined_commits)
        self.state = _STATE_OPEN
        self.mute_reasons: set[MuteReason] = set()
        # Requests handed to the dispatcher and not yet released to the output, in request order.
        self._unanswered: deque[PendingReply] = deque()
        # Answers whose turn has come, written together when the pump ends (one syscall).
        self._output: list[bytes] = []
        self._output_budgeted = 0
        self._reserved = 0  # request bytes reserved from the budget
        self._pump: asyncio.Handle | None = None  # the pump, scheduled for the next loop turn
        self._pumping = False
        self._output_watchers: list[Callable[[bool], None]] = []

    @property
    def max_pipelined_commits(self) -> int:
        return self.commit_pipeline.bound

    @property
    def closed(self) -> bool:
        return self.state is _STATE_CLOSED

    @property
    def client_not_reading(self) -> bool:
        return _MUTED_BY_CLIENT_NOT_READING in self.mute_reasons

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
            self._event(_ON_CLOSE)
            self.transport.abort()
            return
        self.transport.set_write_buffer_limits(high=self.max_unsent_bytes)
        if self.listener is not None:
            self.advertised = self.listener.advertised  # final once bound (ephemeral ports)
            if self.listener.listener.uses_sasl:
                self.sasl = SaslSession()
            if self.listener.ssl_context is not None:
                from coordinator.server.listeners import certificate_principal

                self.principal = certificate_principal(transport.get_extra_info("peercert")) or self.principal
        self.dispatcher.connection_opened(self)

    def data_received(self, data: bytes) -> None:
        if self.state >= _STATE_DRAINING:  # draining or closed
            return
        splitter = self.splitter
        try:
            frames = splitter.feed(data)
        except FrameError as exc:
            self.abort(f"invalid frame: {exc}")
            return
        self.seen = True
        if frames:
            queue = self.queue
            for frame in frames:
                queue.append(frame)
                self.queued_bytes += len(frame)
            self.frames_received += len(frames)
            if self._pump is None:  # else the next slice, already due, serves them
                self._run_pump()
        # What stays buffered after the pump is reserved from the budget (requests served at
        # once never are), and bounded per connection.
        if self.queued_bytes + splitter.pending_frame_bytes > self._reserved:
            self._reserve_requests()
        if (
            self.queued_bytes + splitter.buffered > self.max_queued_bytes
            or len(self.queue) >= self.max_queued_requests
        ):
            self._mute(_MUTED_BY_QUEUE_FULL)

    def connection_lost(self, exc: Exception | None) -> None:
        self._event(_ON_LOST)
        self._drop()
        if self.limits is not None:
            self.limits.release(self)
        self.dispatcher.connection_closed(self)

    def pause_writing(self) -> None:
        self._mute(_MUTED_BY_CLIENT_NOT_READING)

    def resume_writing(self) -> None:
        self.seen = True
        self._unmute(_MUTED_BY_CLIENT_NOT_READING)
        self._wake()

    # ---- states --------------------------------------------------------------------------
    def _event(self, event: ConnectionEvent) -> None:
        before = self.state
        after = next_connection_state(before, event)
        self.state = after
        transport = self.transport
        if transport is None or after is _STATE_CLOSED:
            return
        if before is _STATE_OPEN and after is not _STATE_OPEN:
            transport.pause_reading()
        elif before is not _STATE_OPEN and after is _STATE_OPEN:
            transport.resume_reading()

    def _mute(self, reason: MuteReason) -> None:
        if reason in self.mute_reasons:
            return
        self.mute_reasons.add(reason)
        if len(self.mute_reasons) == 1:
            self._event(_ON_MUTE)
        if reason is _MUTED_BY_CLIENT_NOT_READING:
            for watcher in list(self._output_watchers):
                watcher(True)

    def _unmute(self, reason: MuteReason) -> None:
        if reason not in self.mute_reasons:
            return
        self.mute_reasons.discard(reason)
        if not self.mute_reasons:
            self._event(_ON_UNMUTE)
        if reason is _MUTED_BY_CLIENT_NOT_READING:
            for watcher in list(self._output_watchers):
                watcher(False)

    def watch_output(self, watcher: Callable[[bool], None]) -> None:
        """``watcher(True)`` when the client stops reading its responses (its unsent bytes reached
        the bound), ``watcher(False)`` when it reads again (the gateway pauses upstream reading)."""
        self._output_watchers.append(watcher)

    def _check_queue_bound(self) -> None:
        if (
            self.queued_bytes + self.splitter.buffered > self.max_queued_bytes
            or len(self.queue) >= self.max_queued_requests
        ):
            self._mute(_MUTED_BY_QUEUE_FULL)
        elif (
            self.queued_bytes <= self.max_queued_bytes // 2
            and len(self.queue) <= self.max_queued_requests // 2
        ):
            self._unmute(_MUTED_BY_QUEUE_FULL)

    # ---- the byte budget (docs/gateway.md#back-pressure) -----------------------------------
    def _reserve_requests(self) -> None:
        """Reserve the queued requests and the whole of the one being received; refused, the
        bytes already read are counted and the socket is not read until bytes come back."""
        target = self.queued_bytes + self.splitter.pending_frame_bytes
        if target <= self._reserved or _MUTED_BY_BUDGET_SPENT in self.mute_reasons:
            if target > self._reserved:
                self._count_read_bytes()
            return
        if self.budget.reserve(target - self._reserved):
            self._reserved = target
            return
        self._count_read_bytes()
        self._mute(_MUTED_BY_BUDGET_SPENT)
        self.budget.wait(self._retry_budget)

    def _count_read_bytes(self) -> None:
        in_memory = self.queued_bytes + self.splitter.buffered - self._reserved
        if in_memory > 0:
            self.budget.take(in_memory)
            self._reserved += in_memory

    def _retry_budget(self) -> None:
        if self.closed:
            return
        target = self.queued_bytes + self.splitter.pending_frame_bytes
        if target <= self._reserved or self.budget.reserve(target - self._reserved):
            self._reserved = max(target, self._reserved)
            self._unmute(_MUTED_BY_BUDGET_SPENT)
        else:
            self.budget.wait(self._retry_budget)

    def _give_back_request(self, size: int) -> None:
        if size <= 0 or not self._reserved:
            return
        size = min(size, self._reserved)
        self._reserved -= size
        self.budget.give_back(size)

    # ---- the pump: serves the queue, writes the answers whose turn has come ----------------------
    @property
    def in_flight(self) -> PendingReply | None:
        """The oldest request not yet answered (or hold), None when the connection is idle."""
        return self._unanswered[0] if self._unanswered else None

    def _wake(self) -> None:
        """Run the pump at the next loop turn (answers arrive outside it: they never serve)."""
        if self._pump is None and not self._pumping and not self.closed:
            self._pump = asyncio.get_running_loop().call_soon(self._run_pump)

    def _run_pump(self) -> None:
        if self._pumping:
            return
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        self._pumping = True
        try:
            self._serve_queue()
        finally:
            self._pumping = False
        self._release_in_turn()
        if self._output:
            self._write_out()
        if self.mute_reasons and _MUTED_BY_QUEUE_FULL in self.mute_reasons and not self.closed:
            self._check_queue_bound()

    def _serve_queue(self) -> None:
        slice_ends = time.perf_counter() + PROCESSING_SLICE_S
        unanswered = self._unanswered
        while (
            self.queue
            and self.state is not _STATE_CLOSED
            and (not self.mute_reasons or _MUTED_BY_CLIENT_NOT_READING not in self.mute_reasons)
        ):
            if unanswered:
                self._release_in_turn()
                if unanswered and not self._joins_pipeline(self.queue[0]):
                    break
            frame = self.queue.popleft()
            self.queued_bytes -= len(frame)
            if self._reserved:
                self._give_back_request(
                    self._reserved - self.queued_bytes - self.splitter.pending_frame_bytes
                )
            self.dispatcher.dispatch(self, frame)
            if self.queue and time.perf_counter() > slice_ends:
                # Many pipelined requests: let other connections (and timers) have the loop.
                self._pump = asyncio.get_running_loop().call_soon(self._run_pump)
                break

    def _joins_pipeline(self, frame: bytes) -> bool:
        """May ``frame`` be handled while earlier requests are unanswered? Only behind handled
        requests of its own pipeline, within the pipeline's bound."""
        unanswered = self._unanswered
        last = unanswered[-1]
        pipeline = last.pipeline
        return (
            pipeline is not None
            and last.state in JOINABLE  # the ones before it were joinable when it was let in
            and len(unanswered) < pipeline.bound
            and (self.sasl is None or not self.sasl.raw_tokens)
            and (
                frame.startswith(_PIPELINED_API_PREFIX)  # the connection knows its commits itself
                if pipeline is self.commit_pipeline
                else self.dispatcher.pipeline_of(self, frame) == pipeline.name
            )
        )

    def start(self, api_key: int, api_version: int, correlation_id: int) -> PendingReply:
        reply = PendingReply(self, api_key, api_version, correlation_id)
        self._unanswered.append(reply)
        return reply

    def hold(self) -> PendingReply:
        """Occupy the in-flight slot for work that has no Kafka response (bare SASL tokens)."""
        return self.start(-1, -1, -1)

    def release(self, reply: PendingReply) -> None:
        reply.finish_without_response()

    def send_raw(self, frame: bytes) -> None:
        """An answer encoded outside the normal path (ApiVersions errors), in request order."""
        self.start(-1, -1, -1).send_frame(frame)

    # ---- answers -------------------------------------------------------------------------
    def answer(self, reply: PendingReply, response: Any) -> None:
        # State reads inlined, not the properties: this runs for every answer.
        if reply.state in ANSWERED:
            log.error("second response for %s correlation %d dropped", reply.api_key, reply.correlation_id)
            return
        if self.state is _STATE_CLOSED or self.transport is None:
            reply.move(_DO_ANSWER)
            return
        try:
            frame = encode_response(reply.api_key, reply.api_version, reply.correlation_id, response)
        except Exception:
            log.exception("could not encode the response to api %d v%d", reply.api_key, reply.api_version)
            self.abort("internal error while encoding a response")
            return
        reply.response = response
        self._answered(reply, frame, 0)

    def answer_frame(self, reply: PendingReply, frame: bytes | None, budgeted: int = 0) -> None:
        if reply.answered:
            log.error("second response for %s correlation %d dropped", reply.api_key, reply.correlation_id)
            self.budget.give_back(budgeted)
            return
        if self.closed or self.transport is None:
            reply.move(_DO_ANSWER)
            self.budget.give_back(budgeted)
            return
        self._answered(reply, frame, budgeted)

    def _answered(self, reply: PendingReply, frame: bytes | None, budgeted: int) -> None:
        reply.frame, reply.budgeted = frame, budgeted
        answered = REPLY_NEXT[reply.state][_DO_ANSWER]  # reply.move(_DO_ANSWER), inlined
        if answered is not None:
            reply.state = answered
        if self._pumping or not self._unanswered or self._unanswered[0] is not reply:
            return  # the pump writes it when it ends, or an earlier request is still owed
        self._turn_moved()

    def _turn_moved(self) -> None:
        """The oldest request was answered outside the pump."""
        self._release_in_turn()
        if not self._unanswered and not self.queue:
            self._write_out()  # nothing else owed, nothing waiting: at once
        else:
            # The pump serves what waits and writes these answers with the ones it gets at once,
            # or a pipeline goes on: its answers leave together when this loop turn ends.
            self._wake()

    def _release_in_turn(self) -> None:
        """Move every answer whose turn has come to the output, in request order."""
        unanswered = self._unanswered
        while unanswered and unanswered[0].state is _REPLY_ANSWERED:
            reply = unanswered.popleft()
            reply.state = _REPLY_SENT  # the table's (ANSWERED, WRITE) move, inlined
            frame, response = reply.frame, reply.response
            if frame is None:
                continue  # no response (Produce with acks=0), or a hold released
            reply.frame = reply.response = None
            self._output.append(frame)
            self._output_budgeted += reply.budgeted
            self.seen = True
            metrics = self.dispatcher.metrics
            if metrics is not None and response is not None:
                now = time.perf_counter()
                parked_at = reply.parked_at
                handled = now if parked_at is None else parked_at
                metrics.observe_response(
                    reply.api_key, reply.api_version, response, handled - reply.started, now - handled
                )

    def _write_out(self) -> None:
        """The one place that writes answers to the socket."""
        output = self._output
        if output and self.transport is not None and not self.closed:
            if len(output) == 1:
                self.transport.write(output[0])
            else:
                self.transport.writelines(output)
        output.clear()
        budgeted, self._output_budgeted = self._output_budgeted, 0
        self.budget.give_back(budgeted)

    # ---- cut-through: an answer passed on while it arrives (coordinator/gateway/cut_through.py) ----
    def stream_turn(self, reply: PendingReply) -> bool:
        """May ``reply``'s answer go out now, chunk by chunk? Yes when every earlier answer is out."""
        if self.closed or self.transport is None:
            return False
        self._release_in_turn()
        if not self._unanswered or self._unanswered[0] is not reply or not reply.move(_DO_STREAM):
            return False
        self._write_out()  # the answers before it go first
        return True

    def stream(self, reply: PendingReply, chunk: memoryview) -> None:
        if reply.state is _REPLY_STREAMING and not self.closed and self.transport is not None:
            self.transport.write(chunk)
            self.seen = True

    def end_stream(self, reply: PendingReply) -> None:
        if not reply.move(_DO_WRITE):
            return
        if self._unanswered and self._unanswered[0] is reply:
            self._unanswered.popleft()
        if not self._pumping and not self.closed:
            self._turn_moved()

    # ---- closing -------------------------------------------------------------------------
    def _drop(self) -> None:
        """Give back every byte this connection holds of the budget; forget its work."""
        self.queue.clear()
        self.queued_bytes = 0
        self._give_back_request(self._reserved)
        for reply in self._unanswered:
            self.budget.give_back(reply.budgeted)
            reply.budgeted = 0
        self._unanswered.clear()
        self._output.clear()
        budgeted, self._output_budgeted = self._output_budgeted, 0
        self.budget.give_back(budgeted)
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None
        self._output_watchers.clear()

    def abort(self, reason: str, *, log_reason: bool = True) -> None:
        """Close at once, dropping queued requests; `log_reason` False when the caller logged it."""
        if self.closed:
            return
        if log_reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._event(_ON_CLOSE)
        self._drop()
        if self.transport is not None:
            self.transport.close()

    def stop_reading(self) -> None:
        """Shutdown: take no further requests; those in the server may still be answered."""
        self._event(_ON_STOP_READING)
        self.queue.clear()
        self._give_back_request(self.queued_bytes)
        self.queued_bytes = 0

    def close(self) -> None:
        """Close after writing the replies already answered in turn (the transport sends them first)."""
        if not self.closed and self.transport is not None:
            self._release_in_turn()
            self._write_out()
            self._event(_ON_CLOSE)
            self._drop()
            self.transport.close()
