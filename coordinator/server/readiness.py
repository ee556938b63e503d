"""Readiness that recovers by itself: while storage is failing, probe it with a write.

``/readyz`` answers 503 while the last storage write failed. Without a probe only the next
client write could prove storage is back, and behind a load balancer that routes no traffic to
an unready server that write never comes. So while storage is marked failing, a no-op write
goes through the same BatchWriter every ``interval_s``; once one lands, the runtime marks storage
as answering again and ``/readyz`` turns 200. A client write that fails marks it failing again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from coordinator.server.runtime import Runtime
from coordinator.server.tasks import cancel_and_wait
from storage.base import StoreError
from storage.records import UserCredentialTombstone

log = logging.getLogger(__name__)

PROBE_INTERVAL_S: Final = 1.0
# Deletes a credential that cannot exist (no user name, no such mechanism): a real write
# transaction in every backend that changes nothing.
PROBE_RECORD: Final = UserCredentialTombstone(user="", mechanism="readiness-probe")


class StorageProbe:
    def __init__(self, runtime: Runtime, interval_s: float = PROBE_INTERVAL_S) -> None:
        self._runtime = runtime
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="storage-readiness-probe")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            if self._runtime.storage_failing and await self._probe():
                self._runtime.storage_recovered("a readiness probe write landed")

    async def _probe(self) -> bool:
        timeout_s = self._runtime.write_timeout_ms / 1000
        try:
            written = self._runtime.writer.write([PROBE_RECORD])
            await asyncio.wait_for(asyncio.shield(written), timeout_s)
        except (StoreError, TimeoutError) as exc:
            log.debug("storage readiness probe failed: %s", exc)
            return False
        return True
