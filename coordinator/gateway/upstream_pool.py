"""Upstream connections shared by client connections (docs/gateway.md#shared-upstream-connections).

Each upstream broker gets at most ``size`` connections, opened when first needed, each
authenticated with the gateway's own identity. A client connection is given one of them (the
one fewest clients use) and keeps it while it stays open: its requests travel in order on one
connection, which upstream answers in order, so the client's order (and an idempotent
producer's sequence order) is kept. Requests go with correlation ids of the pooled connection
(upstream.UpstreamConnection.send_shared).

A pooled connection that is lost takes with it the client connections whose requests it left
unanswered (``on_lost``, as an unshared connection's loss closes its one client); the others
get a new connection at their next request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from coordinator.gateway.upstream import UpstreamConnection, UpstreamError

OpenConnection = Callable[[int, Callable[[UpstreamConnection], None]], Awaitable[UpstreamConnection]]


@dataclass(slots=True)
class PoolStats:
    opened: int = 0  # pooled connections opened since start
    lost: int = 0  # pooled connections lost (closed by upstream or failed)
    failed_opens: int = 0


class _Slot:
    __slots__ = ("clients", "connection", "opening", "target")

    def __init__(self, target: int) -> None:
        self.target = target
        self.connection: UpstreamConnection | None = None
        self.opening: asyncio.Future[UpstreamConnection] | None = None
        self.clients: set[object] = set()

    @property
    def usable(self) -> bool:
        return self.connection is not None and not self.connection.closed


class UpstreamPool:
    """At most ``size`` shared connections per upstream target (a node id, or the forwarder's
    ANY_BROKER for the bootstrap port)."""

    def __init__(
        self,
        size: int,
        open_connection: OpenConnection,
        on_lost: Callable[[UpstreamConnection], None],
    ) -> None:
        if size < 1:
            raise ValueError("a pool has at least one connection per broker")
        self.size = size
        self._open = open_connection
        self._on_lost = on_lost
        self._slots: dict[int, list[_Slot]] = {}
        self._assigned: dict[object, _Slot] = {}
        self.stats = PoolStats()

    async def connection_for(self, client: object, target: int) -> UpstreamConnection:
        """The client's pooled connection to ``target`` (opened if it must be); UpstreamError
        when it cannot be opened."""
        slot = self._assigned.get(client)
        if slot is None or slot.target != target:
            self.detach(client)
            slot = self._least_used(target)
            slot.clients.add(client)
            self._assigned[client] = slot
        if slot.usable:
            assert slot.connection is not None
            return slot.connection
        if slot.opening is None:
            slot.opening = asyncio.get_running_loop().create_future()
            opening = slot.opening
            try:
                connection = await self._open(target, lambda lost: self._lost(slot, lost))
            except BaseException as exc:
                slot.opening = None
                self.stats.failed_opens += 1
                if not opening.done():
                    opening.set_exception(exc if isinstance(exc, UpstreamError) else UpstreamError(str(exc)))
                    opening.exception()  # retrieved: no "never retrieved" warning without waiters
                raise
            slot.opening = None
            slot.connection = connection
            self.stats.opened += 1
            opening.set_result(connection)
            return connection
        return await asyncio.shield(slot.opening)

    def detach(self, client: object) -> None:
        """The client connection closed: its place in its slot is free (the connection stays)."""
        slot = self._assigned.pop(client, None)
        if slot is not None:
            slot.clients.discard(client)

    def _least_used(self, target: int) -> _Slot:
        slots = self._slots.setdefault(target, [])
        if len(slots) < self.size and all(s.clients for s in slots):
            slots.append(_Slot(target))
        return min(slots, key=lambda s: len(s.clients))

    def _lost(self, slot: _Slot, lost: UpstreamConnection) -> None:
        if slot.connection is lost:
            slot.connection = None
        self.stats.lost += 1
        self._on_lost(lost)

    def retire(self, nodes: set[int], keep: int) -> None:
        """Close the connections to targets that are no longer among ``nodes`` (brokers that left
        the cluster metadata; ``keep``, the any-broker target, stays): their clients are treated
        as on a lost connection, and the others' next request opens a connection anew."""
        for target in [t for t in self._slots if t != keep and t not in nodes]:
            for slot in self._slots.pop(target):
                for client in slot.clients:
                    self._assigned.pop(client, None)
                if slot.connection is not None:
                    slot.connection.close("its broker left the cluster metadata")

    def close(self) -> None:
        for slots in self._slots.values():
            for slot in slots:
                if slot.connection is not None:
                    connection, slot.connection = slot.connection, None
                    connection.on_lost = None
                    connection.close()
        self._assigned.clear()

    # ---- what the metrics read ------------------------------------------------------------
    @property
    def open_connections(self) -> int:
        return sum(slot.usable for slots in self._slots.values() for slot in slots)

    @property
    def clients(self) -> int:
        return len(self._assigned)

    def connections(self) -> list[UpstreamConnection]:
        return [
            slot.connection
            for slots in self._slots.values()
            for slot in slots
            if slot.connection is not None and not slot.connection.closed
        ]


class SlowClientBytes:
    """Answers received for clients that do not read, over shared connections: a shared
    connection is never paused for one client, so these bytes are taken in, up to ``limit``
    for all such clients together; a client whose next answer does not fit is cut off
    (docs/gateway.md#back-pressure). A client's bytes are given back when it reads again."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.cut_off = 0  # clients closed because their answers did not fit
        self._held: dict[object, int] = {}

    def admit(self, client: object, size: int) -> bool:
        if self.total + size > self.limit:
            return False
        self.total += size
        self._held[client] = self._held.get(client, 0) + size
        return True

    def release(self, client: object) -> None:
        self.total -= self._held.pop(client, 0)
