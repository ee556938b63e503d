"""Background tasks of the server shell."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from coordinator.core.result import Result


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancel a background loop and wait until it has ended (None: nothing runs)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class StorageAnswers:
    """Answers that need a storage read first (any node's group configs, SCRAM users): each runs
    as a task off the request path and its Result goes through ``apply`` (the runtime: writes,
    then state, then the reply), so the reply still leaves only once what it reports is durable."""

    def __init__(self, apply: Callable[[Result], None]) -> None:
        self.apply = apply
        self.tasks: set[asyncio.Task[None]] = set()

    def spawn(self, answer: Callable[[], Awaitable[Result]]) -> None:
        async def run() -> None:
            self.apply(await answer())

        task = asyncio.get_running_loop().create_task(run())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
