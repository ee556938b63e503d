"""Connection limits: max.connections, max.connections.per.ip and connections.max.idle.ms.

Admission is counted when a connection is made and released when it is lost. Connections over a
limit are closed at once with one (rate-limited) WARNING line, which is what a Kafka broker does
for ``max.connections.per.ip``; for ``max.connections`` Kafka stops accepting instead, which a
client sees the same way (the connection attempt fails and is retried).

The idle sweep is one repeating ``call_later`` (no task, nothing on the request path besides a
flag and a counter set in ``data_received``). A connection is closed when for
``connections.max.idle.ms`` it has

* neither received nor sent anything and has no request parked in the core (plain idleness, and
  also clients that stopped reading their responses), or
* kept a partial frame buffered without completing any frame (slow-loris: a length prefix and a
  trickle of bytes, then silence).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from coordinator.server.connection import Connection

log = logging.getLogger(__name__)

_REFUSAL_LOG_INTERVAL_S = 10.0


class ConnectionLimits:
    def __init__(
        self,
        max_connections: int,
        max_connections_per_ip: int,
        connections_max_idle_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.idle_s = connections_max_idle_ms / 1000
        self.clock = clock
        self.connections: set[Connection] = set()
        self.per_ip: dict[str, int] = {}
        self.refused = 0
        self.refused_by_reason: dict[str, int] = {}  # max_connections, max_connections_per_ip
        self.idle_closed = 0
        self._refusals_unlogged = 0
        self._last_refusal_log = -_REFUSAL_LOG_INTERVAL_S
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- admission -------------------------------------------------------------------------
    def admit(self, connection: Connection) -> bool:
        """Register a new connection; False (and a log line) when it is over a limit."""
        host = connection.client_host
        reason = kind = None
        if len(self.connections) >= self.max_connections:
            reason, kind = f"max.connections ({self.max_connections}) reached", "max_connections"
        elif self.per_ip.get(host, 0) >= self.max_connections_per_ip:
            reason = f"max.connections.per.ip ({self.max_connections_per_ip}) reached for {host}"
            kind = "max_connections_per_ip"
        if reason is not None and kind is not None:
            self.refused += 1
            self.refused_by_reason[kind] = self.refused_by_reason.get(kind, 0) + 1
            self._log_refusal(connection.peer, reason)
            return False
        self.connections.add(connection)
        self.per_ip[host] = self.per_ip.get(host, 0) + 1
        connection.idle_since = self.clock()
        return True

    def release(self, connection: Connection) -> None:
        if connection not in self.connections:
            return
        self.connections.discard(connection)
        host = connection.client_host
        left = self.per_ip.get(host, 0) - 1
        if left > 0:
            self.per_ip[host] = left
        else:
            self.per_ip.pop(host, None)

    def _log_refusal(self, peer: str, reason: str) -> None:
        now = self.clock()
        if now - self._last_refusal_log >= _REFUSAL_LOG_INTERVAL_S:
            suppressed = (
                f" ({self._refusals_unlogged} more refused since the last line)"
                if self._refusals_unlogged
                else ""
            )
            log.warning("refusing connection from %s: %s%s", peer, reason, suppressed)
            self._last_refusal_log = now
            self._refusals_unlogged = 0
        else:
            self._refusals_unlogged += 1

    # ---- idle sweep ------------------------------------------------------------------------
    @property
    def sweep_interval_s(self) -> float:
        return min(max(self.idle_s / 10, 0.01), 1.0)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer = loop.call_later(self.sweep_interval_s, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._loop = None

    def _tick(self) -> None:
        try:
            self.sweep()
        finally:
            if self._loop is not None:
                self._timer = self._loop.call_later(self.sweep_interval_s, self._tick)

    def sweep(self) -> int:
        """Close the connections idle (or stuck on a partial frame) for too long; how many."""
        now = self.clock()
        limit = self.idle_s
        expired: list[tuple[Connection, str]] = []
        for connection in self.connections:
            if connection.seen:
                connection.seen = False
                connection.idle_since = now
            if connection.splitter.buffered and connection.frames_received == connection.partial_frames_mark:
                if connection.partial_since is None:
                    connection.partial_since = now
                elif now - connection.partial_since >= limit:
                    expired.append((connection, "partial request frame not completed"))
                    continue
            else:
                connection.partial_since = None
                connection.partial_frames_mark = connection.frames_received
            if connection.in_flight is None and now - connection.idle_since >= limit:
                expired.append((connection, "idle"))
        for connection, why in expired:
            self.idle_closed += 1
            connection.abort(f"{why} for longer than connections.max.idle.ms ({round(limit * 1000)} ms)")
        return len(expired)
