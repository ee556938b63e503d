"""Virtual brokers: gateway listeners that stand for the upstream brokers, one per upstream broker
and per gateway listener, so partition leadership maps one-to-one and every listener keeps its
own security protocol and SASL mechanisms on its virtual brokers (docs/gateway.md#security-model).

With L listeners (``listeners``, in order; one when it is empty), the virtual broker of upstream
node N on listener k listens on ``gateway.broker.port.base + i * L + k``, where i is N's position
among the upstream node ids sorted at the first metadata answer; nodes that appear later take the
next indexes in order of appearance. With the same upstream brokers and listeners the mapping is
the same after a restart. A node that leaves the metadata keeps its ports until the gateway stops
(clients that still know it get their connection closed and refresh their metadata). With base 0
every virtual broker gets a free port from the OS (tests).

A client is told the virtual brokers of the listener it came in on, as Kafka advertises the
endpoints of the listener name a request arrived on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

log = logging.getLogger(__name__)

Address = tuple[str, int]
# (port to bind (0 = any), listener index) -> the opened server and the address it advertises
OpenListener = Callable[[int, int], Awaitable[tuple[asyncio.Server, Address]]]


class VirtualBrokers:
    def __init__(
        self, port_base: int, open_listener: OpenListener, bootstraps: Sequence[Address] = ()
    ) -> None:
        """``bootstraps``: the advertised address of each gateway listener, in order."""
        self.port_base = port_base
        self._open_listener = open_listener
        self.bootstraps = list(bootstraps) or [("", 0)]
        self._listener_of_bootstrap = {address: k for k, address in enumerate(self.bootstraps)}
        self._order: list[int] = []
        self._address: list[dict[int, Address]] = [{} for _ in self.bootstraps]
        self._node_by_address: dict[Address, tuple[int, int]] = {}  # -> (node id, listener index)
        self.servers: list[asyncio.Server] = []
        self._failed: set[tuple[int, int]] = set()
        self._lock = asyncio.Lock()

    def address_of(self, node_id: int, listener: int = 0) -> Address | None:
        return self._address[listener].get(node_id)

    def listener_of(self, advertised: Address | None) -> int:
        """The index of the listener a connection came in on (its bootstrap or a virtual broker)."""
        if advertised is None:
            return 0
        found = self._node_by_address.get(advertised)
        if found is not None:
            return found[1]
        return self._listener_of_bootstrap.get(advertised, 0)

    def addresses_for(self, advertised: Address | None) -> Callable[[int], Address | None]:
        """node id -> the address of its virtual broker on the connection's listener."""
        return self._address[self.listener_of(advertised)].get

    def bootstrap_of(self, advertised: Address | None) -> Address | None:
        """The bootstrap address of the listener whose virtual broker is at ``advertised``."""
        found = self._node_by_address.get(advertised) if advertised is not None else None
        if found is None or not self.bootstraps[found[1]][0]:
            return None
        return self.bootstraps[found[1]]

    def node_at(self, advertised: Address | None) -> int | None:
        """The upstream node a connection's listener stands for; None for the bootstrap port."""
        found = self._node_by_address.get(advertised) if advertised is not None else None
        return found[0] if found is not None else None

    def missing(self, node_ids: Iterable[int]) -> list[int]:
        return [n for n in node_ids if any(n not in addresses for addresses in self._address)]

    async def ensure(self, node_ids: Iterable[int]) -> None:
        """Open listeners for nodes that have none yet, on every gateway listener."""
        async with self._lock:
            for node_id in sorted(set(self.missing(node_ids))):
                index = self._order.index(node_id) if node_id in self._order else len(self._order)
                if node_id not in self._order:
                    self._order.append(node_id)  # keeps its index: a failed port is retried the same
                for listener, addresses in enumerate(self._address):
                    if node_id not in addresses:
                        await self._open(node_id, index, listener)

    async def _open(self, node_id: int, index: int, listener: int) -> None:
        port = self.port_base + index * len(self._address) + listener if self.port_base else 0
        try:
            server, address = await self._open_listener(port, listener)
        except OSError as exc:
            if (node_id, listener) not in self._failed:
                self._failed.add((node_id, listener))
                log.error(
                    "cannot open the virtual broker of upstream node %d on port %d: %s "
                    "(its address is left out of responses until it can)",
                    node_id, port, exc,
                )  # fmt: skip
            return
        self._failed.discard((node_id, listener))
        self._address[listener][node_id] = address
        self._node_by_address[address] = (node_id, listener)
        self.servers.append(server)
        log.info(
            "virtual broker for upstream node %d listening as %s:%d (listener %d)",
            node_id,
            *address,
            listener,
        )

    def close(self) -> None:
        for server in self.servers:
            server.close()
