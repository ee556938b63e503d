"""The states of a client connection and of each of its requests, with every allowed transition
in one table each (docs/architecture.md#the-connection-state-machine).

Kafka names the same states in ``ChannelMuteState``/``ChannelMuteEvent``: a connection is read
from, muted, or closed, and the broker answers one request per connection at a time, in order.
Nothing here does I/O: ``Connection`` (connection.py) looks the next state up and acts on it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final


class ConnectionState(enum.Enum):
    OPEN = "open"  # the socket is read; queued requests go to the server in turn
    MUTED = "muted"  # the socket is not read, for at least one MuteReason
    DRAINING = (
        "draining"  # no further request is taken (shutdown, failed authentication); answers still leave
    )
    CLOSED = "closed"


class ConnectionEvent(enum.Enum):
    MUTE = "mute"  # a first MuteReason appeared
    UNMUTE = "unmute"  # the last MuteReason went away
    STOP_READING = "stop_reading"
    CLOSE = "close"  # close() or abort()
    LOST = "lost"  # the peer went away


class MuteReason(enum.Enum):
    """Why a connection is not read (several may hold at once)."""

    QUEUE_FULL = "queue_full"  # its queued requests reached queued.max.request.bytes/requests
    BUDGET_SPENT = "budget_spent"  # the process-wide byte budget refused its next request
    CLIENT_NOT_READING = "client_not_reading"  # its unsent responses reached the per-connection bound


_S, _E = ConnectionState, ConnectionEvent
CONNECTION_TRANSITIONS: Final[Mapping[tuple[ConnectionState, ConnectionEvent], ConnectionState]] = {
    (_S.OPEN, _E.MUTE): _S.MUTED,
    (_S.MUTED, _E.UNMUTE): _S.OPEN,
    (_S.OPEN, _E.STOP_READING): _S.DRAINING,
    (_S.MUTED, _E.STOP_READING): _S.DRAINING,
    # Draining: reading stays off whatever the bounds say.
    (_S.DRAINING, _E.MUTE): _S.DRAINING,
    (_S.DRAINING, _E.UNMUTE): _S.DRAINING,
    (_S.DRAINING, _E.STOP_READING): _S.DRAINING,
    **{(state, event): _S.CLOSED for state in _S for event in (_E.CLOSE, _E.LOST)},
    **{(_S.CLOSED, event): _S.CLOSED for event in _E},
}


class ReplyState(enum.Enum):
    """One request of a connection, from the moment it is handed to the server."""

    IN_SERVER = "in_server"  # handed to the server (or the gateway), not yet handled
    HANDLED = "handled"  # handled (the core validated it, or it went upstream): its pipeline may go on
    PARKED = "parked"  # handled; the answer waits for an event (JoinGroup, a long-poll Fetch)
    ANSWERED = "answered"  # the answer is ready and waits for the earlier ones
    STREAMING = "streaming"  # its turn came while the answer still arrives: passed on as it comes
    SENT = "sent"  # written to the socket (or nothing to write: acks=0, a hold released)


class ReplyEvent(enum.Enum):
    HANDLE = "handle"
    PARK = "park"
    ANSWER = "answer"
    STREAM = "stream"  # its turn came: pass the answer on as it arrives (cut-through)
    WRITE = "write"  # its turn came and its answer was written (or the stream ended)


_R, _V = ReplyState, ReplyEvent
REPLY_TRANSITIONS: Final[Mapping[tuple[ReplyState, ReplyEvent], ReplyState]] = {
    (_R.IN_SERVER, _V.HANDLE): _R.HANDLED,
    (_R.IN_SERVER, _V.PARK): _R.PARKED,
    (_R.HANDLED, _V.PARK): _R.PARKED,
    (_R.PARKED, _V.PARK): _R.PARKED,
    (_R.IN_SERVER, _V.ANSWER): _R.ANSWERED,
    (_R.HANDLED, _V.ANSWER): _R.ANSWERED,
    (_R.PARKED, _V.ANSWER): _R.ANSWERED,
    (_R.IN_SERVER, _V.STREAM): _R.STREAMING,
    (_R.HANDLED, _V.STREAM): _R.STREAMING,
    (_R.ANSWERED, _V.WRITE): _R.SENT,
    (_R.STREAMING, _V.WRITE): _R.SENT,
}

# A later request of the same pipeline may join a request in these states.
JOINABLE: Final = frozenset({ReplyState.HANDLED, ReplyState.PARKED, ReplyState.ANSWERED})
# The request has its answer (a second one is a bug, dropped).
ANSWERED: Final = frozenset({ReplyState.ANSWERED, ReplyState.STREAMING, ReplyState.SENT})


def next_connection_state(state: ConnectionState, event: ConnectionEvent) -> ConnectionState:
    return CONNECTION_TRANSITIONS[(state, event)]


def next_reply_state(state: ReplyState, event: ReplyEvent) -> ReplyState | None:
    """The next state, None when the table has no such transition (the event is refused)."""
    return REPLY_TRANSITIONS.get((state, event))
