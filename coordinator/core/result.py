"""The only output of the pure core: records to persist, the state change they carry, and the
replies to release once it is applied."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.context import ReplyTo
from storage.records import Record

Reply = tuple[ReplyTo, Any]


@dataclass(slots=True)
class Result:
    """Records to make durable, the state change they carry, then replies to send.

    The runtime writes ``records`` (one atomic batch, possibly group-committed with others).
    Once they are durable it calls :meth:`deliver`: ``on_durable(now_ms)`` applies the state
    change the records carry, and only then are ``replies`` sent, in order, so that whatever a
    reply reports is already visible to the next request. The Result ``on_durable`` returns is
    applied the same way. When the write fails it sends nothing from this Result and calls
    ``on_failed(now_ms, error_code)`` instead, which applies nothing and answers the affected
    requests (every Result with records must set ``on_failed``). A write that timed out gets
    ``on_failed`` at the deadline and, should it land after all, ``on_durable`` too: storage has
    the records, so memory applies them. A Result without records is delivered at once.
    """

    records: list[Record] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    on_durable: Callable[[int], Result] | None = None
    on_failed: Callable[[int, int], Result] | None = None

    def deliver(self, now_ms: int) -> Result | None:
        """The records are durable (or there were none): apply, then answer; returns the
        follow-up Result for the caller to apply."""
        follow_up = self.on_durable(now_ms) if self.on_durable is not None else None
        for reply_to, response in self.replies:
            reply_to.send(response)
        return follow_up
