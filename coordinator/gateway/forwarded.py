"""A forwarded request waiting for its response, and the ways that response reaches its client:
passed on while it arrives (cut-through, cut_through.py), gathered whole for a client that does
not read, read and dropped for a client that is gone, or received whole and handed back to the
forwarder to be made ready (forwarded_responses.py).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Final, Protocol

from coordinator.gateway.broker_addresses import REWRITTEN
from coordinator.gateway.cut_through import FetchTail
from coordinator.gateway.high_watermarks import FetchWatch
from coordinator.gateway.node_endpoints import carries_node_endpoints
from coordinator.gateway.old_formats import converts
from coordinator.gateway.transactions import Observed
from coordinator.gateway.upstream_pool import SlowClientBytes
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.connection import Connection, PendingReply
from protocol.apis import ApiKey
from protocol.primitives import DecodeError

log = logging.getLogger(__name__)

# What an upstream response that cannot be read raises while it is read or rewritten.
MALFORMED: Final = (DecodeError, struct.error, IndexError, UnicodeDecodeError)


class Responder(Protocol):
    """What a forwarded request's response asks of the forwarder."""

    @property
    def brokers(self) -> VirtualBrokers: ...

    @property
    def slow(self) -> SlowClientBytes: ...

    def respond(self, forwarded: Forwarded, frame: bytes, budgeted: int) -> None:
        """A response received whole: rewritten where it must be, then sent to the client."""
        ...

    def watch(self, reply: PendingReply) -> FetchWatch | None: ...

    def cut_off(self, connection: Connection, size: int) -> None: ...


class Forwarded:
    """A forwarded request waiting for its response (the upstream connection's ResponseHandler)."""

    __slots__ = ("forwarder", "latest", "merge", "observed", "reply", "shared")

    def __init__(
        self,
        forwarder: Responder,
        reply: PendingReply,
        merge: Callable[[bytes], bytes] | None = None,
        latest: frozenset[tuple[str, int]] = frozenset(),
    ) -> None:
        self.forwarder = forwarder
        self.reply = reply
        # Puts the refusals of an authorized-in-part request back into upstream's response.
        self.merge = merge
        # ListOffsets: the partitions asked for their latest offset (their answers are checked
        # against the fetched high watermarks: high_watermarks.py).
        self.latest = latest
        # A transactional request whose response teaches the gateway an outcome (transactions.py):
        # held whole until what it taught is durable.
        self.observed: Observed | None = None
        self.shared = False  # sent on a pooled connection

    def stream(self, size: int) -> ToClient | Collected | Discarded | None:
        """Cut-through when the response is next in line for the client and needs no rewriting
        that changes its length (Produce v10+ answers are small: they are held and rewritten).
        On a shared connection, the answer of a client that does not read is taken in without
        pausing the connection, within SlowClientBytes, or the client is cut off."""
        if self.shared:
            connection = self.reply.connection
            if connection.closed:
                return DISCARDED
            if connection.client_not_reading:
                if not self.forwarder.slow.admit(connection, size):
                    self.forwarder.cut_off(connection, size)
                    return DISCARDED
                return self._cut_through() or Collected(self)
        return self._cut_through()

    def _cut_through(self) -> ToClient | None:
        reply = self.reply
        if reply.api_key in REWRITTEN or self.merge is not None or self.observed is not None:
            return None
        if self.latest:
            return None  # held whole: its log ends may be corrected
        if converts(reply.api_key, reply.api_version):
            return None  # converted whole (old_formats.py)
        tail = carries_node_endpoints(reply.api_key, reply.api_version)
        if tail and reply.api_key != ApiKey.FETCH:
            return None
        if not reply.connection.stream_turn(reply):
            return None  # earlier responses are still owed: this one waits its turn, whole
        return ToClient(self, tail)

    def whole(self, frame: bytes, budgeted: int) -> None:
        self.forwarder.respond(self, frame, budgeted)


class Collected:
    """An answer for a client that does not read, gathered whole outside the byte budget (its
    bytes are counted in SlowClientBytes) and then handled as any answer received whole."""

    __slots__ = ("chunks", "forwarded")

    def __init__(self, forwarded: Forwarded) -> None:
        self.forwarded = forwarded
        self.chunks: list[bytes] = []

    def write(self, chunk: memoryview) -> None:
        self.chunks.append(bytes(chunk))

    def end(self) -> None:
        forwarded = self.forwarded
        forwarded.forwarder.respond(forwarded, b"".join(self.chunks), 0)


class Discarded:
    """The answer of a client connection that is gone: read and dropped."""

    __slots__ = ()

    def write(self, chunk: memoryview) -> None:
        pass

    def end(self) -> None:
        pass


DISCARDED: Final = Discarded()


class ToClient:
    """A response passed on to the client while it arrives (upstream.ResponseStream)."""

    __slots__ = ("failed", "forwarded", "tail", "watch")

    def __init__(self, forwarded: Forwarded, fetch_tail: bool) -> None:
        self.forwarded = forwarded
        self.failed = False
        brokers, advertised = forwarded.forwarder.brokers, forwarded.reply.connection.advertised
        self.tail = FetchTail(self._send, brokers.addresses_for(advertised)) if fetch_tail else None
        self.watch = forwarded.forwarder.watch(forwarded.reply)

    def _send(self, chunk: memoryview) -> None:
        if not self.failed:
            reply = self.forwarded.reply
            reply.connection.stream(reply, chunk)
        if self.watch is not None:
            self.watch.feed(chunk)

    def write(self, chunk: memoryview) -> None:
        if self.tail is None:
            self._send(chunk)
            return
        try:
            self.tail.write(chunk)
        except MALFORMED as exc:
            self._fail(exc)

    def end(self) -> None:
        if self.tail is not None:
            try:
                self.tail.end()
            except MALFORMED as exc:
                self._fail(exc)
        reply = self.forwarded.reply
        reply.connection.end_stream(reply)

    def _fail(self, exc: Exception) -> None:
        if not self.failed:
            self.failed = True
            reply = self.forwarded.reply
            log.warning(
                "malformed api %d v%d response from upstream: %s", reply.api_key, reply.api_version, exc
            )
            reply.connection.close()  # half a response went out: the client must drop it
