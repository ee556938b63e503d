"""The only output of the pure core: records to persist and replies to release after them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.context import ReplyTo
from storage.records import Record

Reply = tuple[ReplyTo, Any]


@dataclass(slots=True)
class Result:
    """Records to make durable, then replies to send.

    The runtime writes ``records`` (one atomic batch, possibly group-committed with others),
    and only when they are durable sends ``replies`` in order and calls ``on_durable(now_ms)``,
    whose own Result is applied the same way. When the write fails it sends nothing from this
    Result and calls ``on_failed(now_ms, error_code)`` instead; the core answers the affected
    requests from there (every Result with records must set ``on_failed``). A Result without
    records is applied at once.
    """

    records: list[Record] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    on_durable: Callable[[int], Result] | None = None
    on_failed: Callable[[int, int], Result] | None = None
