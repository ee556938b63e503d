"""What the pure core knows about the request it is handling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class ReplyTo(Protocol):
    """Opaque token for one request's pending response; the runtime delivers it.

    Handlers never call it: they return ``(reply_to, response)`` pairs in a Result, possibly
    much later (parked JoinGroup/SyncGroup), and ``Result.deliver`` sends them once the state
    they report is applied. Delivering to a closed connection is a no-op.
    """

    def send(self, response: Any) -> None: ...


@dataclass(slots=True)
class RequestContext:
    now_ms: int  # monotonic milliseconds: deadlines and timers
    wall_ms: int  # wall-clock milliseconds: persisted timestamps (commit time, state time)
    api_version: int
    client_id: str
    client_host: str
    reply_to: ReplyTo
    # The advertised address of the listener the request came through (None: the node's own).
    advertised: tuple[str, int] | None = None
    # The authenticated principal (Kafka's "User:name"; User:ANONYMOUS without authentication).
    principal: str = "User:ANONYMOUS"
