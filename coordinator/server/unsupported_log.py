"""One WARNING line per client and interval for requests of an API or version we do not serve.

Clients from before KIP-511 (e.g. 2018-era Go clients) send versions Kafka 4.0 dropped without
asking ApiVersions first; when refused they reconnect and retry many times a second. Each refusal
still closes the connection, as Kafka does, but a client (its address and client id) gets one
line per interval, the next one counting what was not logged in between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

INTERVAL_S: Final = 60.0
# Clients remembered at most; beyond it, those last logged longest ago are forgotten.
MAX_CLIENTS: Final = 4096


@dataclass(slots=True)
class _Seen:
    logged_at: float
    unlogged: int = 0


class UnsupportedRequestLog:
    def __init__(self, clock: Callable[[], float], interval_s: float = INTERVAL_S) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self._clients: dict[tuple[str, str], _Seen] = {}

    def refused(self, peer: str, client_host: str, client_id: str | None, what: str) -> None:
        """Log (or count) the refusal of `what`, a request from `peer`."""
        now = self.clock()
        key = (client_host, client_id or "")
        seen = self._clients.get(key)
        if seen is not None and now - seen.logged_at < self.interval_s:
            seen.unlogged += 1
            return
        since = f" ({seen.unlogged} more from this client not logged)" if seen and seen.unlogged else ""
        log.warning(
            "closing connection from %s (client id %r): unsupported request: %s%s; further refusals "
            "of this client are logged at most once every %.0f s",
            peer, client_id or "", what, since, self.interval_s,
        )  # fmt: skip
        self._clients.pop(key, None)  # re-inserted last: the dict stays ordered by logging time
        self._clients[key] = _Seen(now)
        while len(self._clients) > MAX_CLIENTS:
            del self._clients[next(iter(self._clients))]
