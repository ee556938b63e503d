"""Connections to upstream brokers: framing, FIFO response matching, TLS and SASL.

Kafka answers a connection's requests in order, so responses are matched to requests by
position. A connection of one client passes the client's correlation ids through unchanged; a
pooled connection, shared by many clients, sends each request with an id of its own, checks that
the response carries it, and gives the response back the client's id (upstream_pool.py).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import socket
import ssl
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from coordinator.gateway.cut_through import ResponseStream
from coordinator.gateway.sasl_client import SaslClientError, ScramClient, plain_token
from coordinator.server.byte_budget import ByteBudget
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.wire import decode_response, encode_request

log = logging.getLogger(__name__)

_LENGTH: Final = struct.Struct(">i")
MAX_RESPONSE_BYTES: Final = 1 << 30
_HEAD: Final = 8  # a response's length prefix and correlation id
_SHARED_HEAD: Final = struct.Struct(">i4si")  # length prefix, api key and version, correlation id
CLIENT_ID: Final = "kafka-group-coordinator-gateway"


class UpstreamError(Exception):
    """An upstream broker could not be reached, refused our credentials or went away."""

    def __init__(self, message: str, *, credentials: bool = False) -> None:
        super().__init__(message)
        self.credentials = credentials


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    connect_timeout_s: float = 10.0

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol.upper() in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.upper().startswith("SASL")

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ssl_cafile or None)
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
        return context


ResponseCallback = Callable[[bytes], None]


class ResponseHandler(Protocol):
    """What a request sent upstream waits with for its response."""

    def stream(self, size: int) -> ResponseStream | None:
        """Asked when the response starts arriving (``size`` bytes with its length prefix): where
        to pass its bytes on as they come, or None to get it whole through ``whole``."""

    def whole(self, frame: bytes, budgeted: int) -> None:
        """The complete response frame, with its length prefix; ``budgeted`` bytes of the
        ByteBudget are the handler's to give back once the frame is written."""


class _Whole:
    __slots__ = ("callback",)

    def __init__(self, callback: ResponseCallback) -> None:
        self.callback = callback

    def whole(self, frame: bytes, budgeted: int) -> None:
        self.callback(frame)

    def stream(self, size: int) -> ResponseStream | None:
        return None


class PauseReason(enum.Enum):
    CLIENT_NOT_READING = "client_not_reading"  # the client connection's unsent responses are at their bound
    BUDGET_SPENT = "budget_spent"  # the ByteBudget refused the response being received


class UpstreamConnection(asyncio.Protocol):
    """One TCP connection to one upstream broker.

    With a ByteBudget (the forwarder's connections), a response that is received whole reserves
    its size as soon as its length prefix is in, and reading stops while the budget refuses it
    (docs/gateway.md#back-pressure). A response passed on as it arrives reserves nothing: the
    client connection's bound on unsent bytes stops reading instead (``pause``)."""

    def __init__(
        self,
        label: str,
        on_lost: Callable[[UpstreamConnection], None] | None = None,
        budget: ByteBudget | None = None,
    ) -> None:
        self.label = label
        self.on_lost = on_lost
        self.budget = budget
        self.paused: set[PauseReason] = set()
        self._reserved = 0  # bytes of the budget held for the response being received whole
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._need = -1  # size of the frame being received (with its length prefix); -1 unknown
        self._waiting: deque[ResponseHandler] = deque()
        # Per waiting request, when its correlation id was rewritten: (the id sent, the client's).
        self._ids: deque[tuple[int, int] | None] = deque()
        self._sent_ids = itertools.count(1)
        # The requests a lost connection leaves unanswered (read by on_lost).
        self.orphans: list[ResponseHandler] = []
        self._streaming: ResponseHandler | None = None  # whose response is being passed on
        self._stream: ResponseStream | None = None  # the response being passed on as it arrives
        self._stream_left = 0  # its bytes still to come
        self._correlation = itertools.count(1)

    # ---- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        # A response is either passed on as its chunks arrive (cut_through.py), or its chunks are
        # joined once, when it is complete, and handed on with their length prefix.
        if self._stream is not None:
            data = self._pass_on(data)
            if not data:
                return
        self._chunks.append(data)
        self._buffered += len(data)
        self._count_read_bytes()
        while not self.closed:
            if self._need < 0:
                if self._buffered < _HEAD:
                    return
                head = self._joined()
                (size,) = _LENGTH.unpack_from(head, 0)
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    self.close(f"invalid response frame size {size}")
                    return
                self._need = size + 4
                if not self._waiting:
                    self.close("a response nobody asked for")
                    return
                ids = self._ids[0]
                if ids is not None:
                    (received,) = _LENGTH.unpack_from(head, 4)
                    if received != ids[0]:
                        self.close(f"response with correlation id {received}, expected {ids[0]}")
                        return
                    head = self._chunks[0] = _with_correlation(head, ids[1])
                stream = self._waiting[0].stream(self._need)
                if stream is not None:
                    self._streaming = self._waiting.popleft()
                    self._ids.popleft()
                    self._stream, self._stream_left = stream, self._need
                    self._chunks, self._buffered, self._need = [], 0, -1
                    self._give_back(self._reserved)
                    rest = self._pass_on(head)
                    if not rest:
                        return
                    self._chunks, self._buffered = [rest], len(rest)
                    self._count_read_bytes()
                    continue
                self._reserve_whole()
            if self._buffered < self._need:
                return
            whole = self._joined()
            frame, rest = (
                (whole, b"") if len(whole) == self._need else (whole[: self._need], whole[self._need :])
            )
            self._chunks = [rest] if rest else []
            self._buffered = len(rest)
            self._need = -1
            budgeted = min(self._reserved, len(frame))
            self._reserved -= budgeted
            self._ids.popleft()
            self._waiting.popleft().whole(frame, budgeted)

    def _pass_on(self, data: bytes) -> bytes:
        """Pass the streamed response's bytes on; what follows it (the next responses) is returned."""
        stream = self._stream
        assert stream is not None
        take = min(len(data), self._stream_left)
        stream.write(memoryview(data)[:take])
        self._stream_left -= take
        if self._stream_left:
            return b""
        self._stream = self._streaming = None
        stream.end()
        return data[take:]

    # ---- back-pressure (docs/gateway.md#back-pressure) ------------------------------------------
    def pause(self, reason: PauseReason) -> None:
        if reason not in self.paused:
            self.paused.add(reason)
            if len(self.paused) == 1 and self.transport is not None and not self.closed:
                self.transport.pause_reading()

    def resume(self, reason: PauseReason) -> None:
        if reason in self.paused:
            self.paused.discard(reason)
            if not self.paused and self.transport is not None and not self.closed:
                self.transport.resume_reading()

    def _reserve_whole(self) -> None:
        budget = self.budget
        if budget is None or self._need <= self._reserved:
            return
        if budget.reserve(self._need - self._reserved):
            self._reserved = self._need
        elif PauseReason.BUDGET_SPENT not in self.paused:
            self.pause(PauseReason.BUDGET_SPENT)
            budget.wait(self._retry_budget)

    def _retry_budget(self) -> None:
        budget = self.budget
        if self.closed or budget is None:
            return
        if self._need <= self._reserved or budget.reserve(self._need - self._reserved):
            self._reserved = max(self._need, self._reserved)
            self.resume(PauseReason.BUDGET_SPENT)
        else:
            budget.wait(self._retry_budget)

    def _count_read_bytes(self) -> None:
        """Bytes read are in memory whatever the budget says: counted."""
        if self.budget is not None and self._buffered > self._reserved:
            self.budget.take(self._buffered - self._reserved)
            self._reserved = self._buffered

    def _give_back(self, size: int) -> None:
        if self.budget is not None and size > 0:
            self._reserved -= size
            self.budget.give_back(size)

    def _joined(self) -> bytes:
        if len(self._chunks) > 1:
            self._chunks = [b"".join(self._chunks)]
        return self._chunks[0]

    def connection_lost(self, exc: Exception | None) -> None:
        was_closed = self.closed
        self.closed = True
        self._orphan()
        self._chunks, self._buffered = [], 0
        self._give_back(self._reserved)
        if self.on_lost is not None and not was_closed:
            self.on_lost(self)

    def _orphan(self) -> None:
        """Keep the unanswered requests (the one being streamed first) for on_lost; forget them here."""
        if not self.orphans:
            streaming = [] if self._streaming is None else [self._streaming]
            self.orphans = [*streaming, *self._waiting]
        self._waiting.clear()
        self._ids.clear()
        self._stream = self._streaming = None

    # ---- requests ------------------------------------------------------------------------
    def send(self, frame: bytes, on_response: ResponseCallback | None) -> None:
        """Send a request frame (with its length prefix); on_response gets the response frame,
        also with its length prefix. None for requests that get no response (acks=0)."""
        self.send_to(frame, None if on_response is None else _Whole(on_response))

    def send_to(self, frame: bytes, handler: ResponseHandler | None, *, prefixed: bool = True) -> None:
        """``send``, with a handler that may take the response as a stream. ``prefixed=False``:
        the frame has no length prefix yet (a client's request as it arrived; writing the prefix
        apart spares a copy of the whole request)."""
        if self.closed or self.transport is None:
            raise UpstreamError(f"connection to {self.label} is closed")
        if handler is not None:
            self._waiting.append(handler)
            self._ids.append(None)
        if prefixed:
            self.transport.write(frame)
        else:
            self.transport.writelines((_LENGTH.pack(len(frame)), frame))

    def send_shared(self, frame: bytes, handler: ResponseHandler | None, client_correlation: int) -> None:
        """``send_to`` on a pooled connection: the request (without its length prefix) goes with
        an id unique on this connection; its response gets ``client_correlation`` back."""
        if self.closed or self.transport is None:
            raise UpstreamError(f"connection to {self.label} is closed")
        sent = next(self._sent_ids) & 0x7FFFFFFF
        if handler is not None:
            self._waiting.append(handler)
            self._ids.append((sent, client_correlation))
        # Length prefix, api key and version, our id: one small piece before the rest of the frame.
        head = _SHARED_HEAD.pack(len(frame), frame[:4], sent)
        self.transport.writelines((head, memoryview(frame)[8:]))

    @property
    def unanswered(self) -> int:
        return len(self._waiting) + (self._streaming is not None)

    async def request(self, api_key: int, api_version: int, body: Any, timeout_s: float = 30.0) -> Any:
        """Our own request (metadata, list offsets, SASL): encode, send, decode the response."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()

        def done(frame: bytes) -> None:
            if not future.done():
                future.set_result(frame)

        self.send(encode_request(api_key, api_version, next(self._correlation), CLIENT_ID, body), done)
        try:
            frame = await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            self.close(f"no response to api {api_key} within {timeout_s:.0f} s")
            raise UpstreamError(f"{self.label} did not answer within {timeout_s:.0f} s") from None
        return decode_response(api_key, api_version, frame[4:])[1]

    def close(self, reason: str | None = None) -> None:
        if self.closed:
            return
        if reason:
            log.warning("closing upstream connection to %s: %s", self.label, reason)
        self.closed = True
        self._orphan()
        self._chunks, self._buffered = [], 0
        self._give_back(self._reserved)
        if self.transport is not None:
            self.transport.close()
        if self.on_lost is not None:
            self.on_lost(self)


async def connect(
    host: str,
    port: int,
    settings: UpstreamSettings,
    on_lost: Callable[[UpstreamConnection], None] | None = None,
    budget: ByteBudget | None = None,
) -> UpstreamConnection:
    """Open, secure and authenticate a connection; UpstreamError when that fails."""
    loop = asyncio.get_running_loop()
    label = f"{host}:{port}"
    try:
        _transport, connection = await asyncio.wait_for(
            loop.create_connection(
                lambda: UpstreamConnection(label),
                host,
                port,
                ssl=settings.ssl_context() if settings.uses_tls else None,
                server_hostname=host if settings.uses_tls else None,
            ),
            settings.connect_timeout_s,
        )
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        raise UpstreamError(
            f"cannot connect to upstream broker {label}: {exc or type(exc).__name__}"
        ) from None
    try:
        if settings.uses_sasl:
            await _authenticate(connection, settings)
    except BaseException:
        connection.close()
        raise
    connection.on_lost = on_lost
    connection.budget = budget
    return connection


async def _authenticate(connection: UpstreamConnection, settings: UpstreamSettings) -> None:
    mechanism = settings.sasl_mechanism.upper()
    handshake = await connection.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))
    if handshake.error_code != ErrorCode.NONE:
        raise UpstreamError(
            f"upstream {connection.label} does not accept SASL mechanism {mechanism} "
            f"(it offers {', '.join(handshake.mechanisms) or 'none'})",
            credentials=True,
        )
    if mechanism == "PLAIN":
        tokens = [plain_token(settings.sasl_username, settings.sasl_password)]
        scram = None
    else:
        scram = ScramClient(mechanism, settings.sasl_username, settings.sasl_password)
        tokens = [scram.first()]
    while tokens:
        response = await connection.request(
            ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=tokens.pop())
        )
        if response.error_code != ErrorCode.NONE:
            raise UpstreamError(
                f"upstream {connection.label} refused the credentials of {settings.sasl_username!r}: "
                f"{response.error_message or ErrorCode(response.error_code).name}",
                credentials=True,
            )
        if scram is not None and not scram.done:
            try:
                next_token = scram.step(response.auth_bytes)
            except SaslClientError as exc:
                raise UpstreamError(f"upstream {connection.label}: {exc}", credentials=True) from None
            if next_token is not None:
                tokens.append(next_token)


def _with_correlation(frame: bytes, correlation_id: int) -> bytes:
    """``frame`` (length prefix first) with another correlation id."""
    if _LENGTH.unpack_from(frame, 4)[0] == correlation_id:
        return frame
    return b"".join((frame[:4], _LENGTH.pack(correlation_id), memoryview(frame)[8:]))


def frame_with_length(frame: bytes) -> bytes:
    return _LENGTH.pack(len(frame)) + frame
