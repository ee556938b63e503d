"""Event-loop lag: how late a callback runs behind its schedule (every request waits that long).

One repeating ``call_later`` measures it; the metrics expose the distribution and the largest
lag since start, the figure to watch for a request or a timer pass that holds the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

INTERVAL_S = 0.05


class LoopLagMonitor:
    def __init__(self, observe: Callable[[float], None], interval_s: float = INTERVAL_S) -> None:
        self.observe = observe
        self.interval_s = interval_s
        self.max_lag_s = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self._loop.time() + self.interval_s
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        lag = max(self._loop.time() - self._due, 0.0)
        self.max_lag_s = max(self.max_lag_s, lag)
        self.observe(lag)
        self._schedule()
