"""Protection of SASL logins against floods: a credential cache and a failed-login limit.

* ``CredentialCache`` answers credential look-ups for ``ttl_s`` from memory (users changed with
  ``coordinator users`` apply within that time, without a restart), asks the storage once for
  concurrent logins of the same user, and never runs more than ``max_concurrent`` storage
  look-ups at once: unauthenticated clients cannot exhaust the database's connections, and the
  logins of known users keep being served from the cache meanwhile.
* ``FailedLoginLimit`` counts failed authentications per client address; past ``max_failures``
  within ``window_s`` that address's logins are refused at once, without a storage look-up,
  until the window has passed.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

from storage.records import UserCredentialRecord

CredentialLoader = Callable[[str], Awaitable[list[UserCredentialRecord]]]


class CredentialCache:
    def __init__(
        self,
        loader: CredentialLoader,
        *,
        ttl_s: float = 1.0,
        max_concurrent: int = 4,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loader = loader
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._slots = asyncio.Semaphore(max_concurrent)
        self._entries: OrderedDict[str, tuple[float, list[UserCredentialRecord]]] = OrderedDict()
        self._in_flight: dict[str, asyncio.Future[list[UserCredentialRecord]]] = {}
        self.storage_lookups = 0

    async def load(self, user: str) -> list[UserCredentialRecord]:
        entry = self._entries.get(user)
        if entry is not None and self._clock() - entry[0] < self._ttl_s:
            return entry[1]
        pending = self._in_flight.get(user)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[list[UserCredentialRecord]] = asyncio.get_running_loop().create_future()
        self._in_flight[user] = future
        try:
            async with self._slots:
                self.storage_lookups += 1
                records = await self._loader(user)
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: a failed look-up with no other waiter is not an error
            raise
        finally:
            self._in_flight.pop(user, None)
        self._remember(user, records)
        future.set_result(records)
        return records

    def _remember(self, user: str, records: list[UserCredentialRecord]) -> None:
        self._entries[user] = (self._clock(), records)
        self._entries.move_to_end(user)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)


class FailedLoginLimit:
    def __init__(
        self,
        *,
        max_failures: int = 100,
        window_s: float = 60.0,
        max_addresses: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_failures = max_failures
        self._window_s = window_s
        self._max_addresses = max_addresses
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def blocked(self, address: str) -> bool:
        times = self._failures.get(address)
        if times is None:
            return False
        self._forget_old(times)
        return len(times) >= self._max_failures

    def failed(self, address: str) -> None:
        times = self._failures.get(address)
        if times is None:
            times = self._failures[address] = deque()
        self._failures.move_to_end(address)
        self._forget_old(times)
        times.append(self._clock())
        while len(self._failures) > self._max_addresses:
            self._failures.popitem(last=False)

    def _forget_old(self, times: deque[float]) -> None:
        horizon = self._clock() - self._window_s
        while times and times[0] <= horizon:
            times.popleft()
