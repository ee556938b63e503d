"""What a simulated member needs from the task that runs it.

Members (`loadtest.member`, `loadtest.consumer`) depend on this interface, not on
`loadtest.task.TaskRuntime` itself, so the task can import the member modules without an
import circle.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from loadtest.scenario import Scenario


class Recorded(Protocol):
    """The identity of a member as it appears in result rows."""

    number: int
    group: str


class MemberRuntime(Protocol):
    scenario: Scenario
    task: int
    loop: asyncio.AbstractEventLoop
    versions: dict[int, int]

    def record(
        self, member: Recorded, op: str, start: float, end: float, code: int, generation: int
    ) -> None: ...

    def record_row(
        self,
        number: int,
        group: str,
        op: str,
        start: float,
        end: float,
        code: int,
        generation: int,
        record: int = -1,
    ) -> None: ...

    def subscription(self, topic: str) -> bytes: ...

    def note(self, message: str, code: int) -> None: ...

    def loopback_ok(self, host: str) -> bool: ...

    def fail(self, exc: BaseException) -> None: ...
