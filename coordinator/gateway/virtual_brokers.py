"""One gateway listener per upstream broker, so partition leadership maps one-to-one.

The virtual broker of upstream node N listens on ``gateway.broker.port.base + i``, where i is
N's position among the upstream node ids sorted at the first metadata answer; nodes that appear
later take the next indexes in order of appearance. With the same upstream brokers the mapping is
the same after a restart. A node that leaves the metadata keeps its port until the gateway
stops (clients that still know it get their connection closed and refresh their metadata).
With base 0 every virtual broker gets a free port from the OS (tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

log = logging.getLogger(__name__)

# port to bind (0 = any) -> the opened server and the address it advertises
OpenListener = Callable[[int], Awaitable[tuple[asyncio.Server, tuple[str, int]]]]


class VirtualBrokers:
    def __init__(self, port_base: int, open_listener: OpenListener) -> None:
        self.port_base = port_base
        self._open_listener = open_listener
        self._order: list[int] = []
        self._address: dict[int, tuple[str, int]] = {}
        self._node_by_address: dict[tuple[str, int], int] = {}
        self.servers: list[asyncio.Server] = []
        self._failed: set[int] = set()
        self._lock = asyncio.Lock()

    def address_of(self, node_id: int) -> tuple[str, int] | None:
        return self._address.get(node_id)

    def node_at(self, advertised: tuple[str, int] | None) -> int | None:
        """The upstream node a connection's listener stands for; None for the bootstrap port."""
        return self._node_by_address.get(advertised) if advertised is not None else None

    def missing(self, node_ids: Iterable[int]) -> list[int]:
        return [n for n in node_ids if n not in self._address]

    async def ensure(self, node_ids: Iterable[int]) -> None:
        """Open listeners for nodes that have none yet."""
        async with self._lock:
            for node_id in sorted(set(self.missing(node_ids))):
                index = self._order.index(node_id) if node_id in self._order else len(self._order)
                port = self.port_base + index if self.port_base else 0
                try:
                    server, address = await self._open_listener(port)
                except OSError as exc:
                    if node_id not in self._failed:
                        self._failed.add(node_id)
                        log.error(
                            "cannot open the virtual broker of upstream node %d on port %d: %s "
                            "(its address is left out of responses until it can)",
                            node_id, port, exc,
                        )  # fmt: skip
                    if node_id not in self._order:
                        self._order.append(node_id)  # keeps its index: retried on the same port
                    continue
                self._failed.discard(node_id)
                if node_id not in self._order:
                    self._order.append(node_id)
                self._address[node_id] = address
                self._node_by_address[address] = node_id
                self.servers.append(server)
                log.info("virtual broker for upstream node %d listening as %s:%d", node_id, *address)

    def close(self) -> None:
        for server in self.servers:
            server.close()
