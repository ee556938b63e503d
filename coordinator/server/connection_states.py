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


# Integer enums: looked up on every request, they hash as ints (a plain Enum hashes in Python).
class ConnectionState(enum.IntEnum):
    OPEN = 0  # the socket is read; queued requests go to the server in turn
    MUTED = 1  # the socket is not read, for at least one MuteReason
    DRAINING = 2  # no further request is taken (shutdown, failed authentication); answers still leave
    CLOSED = 3


class ConnectionEvent(enum.IntEnum):
    MUTE = 0  # a first MuteReason appeared
    UNMUTE = 1  # the last MuteReason went away
    STOP_READING = 2
    CLOSE = 3  # close() or abort()
    LOST = 4  # the peer went away


class MuteReason(enum.IntEnum):
    """Why a connection is not read (several may hold at once)."""

    QUEUE_FULL = 0  # its queued requests reached queued.max.request.bytes/requests
    BUDGET_SPENT = 1  # the process-wide byte budget refused its next request
    CLIENT_NOT_READING = 2  # its unsent responses reached the per-connection bound


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


class ReplyState(enum.IntEnum):
    """One request of a connection, from the moment it is handed to the server."""

    IN_SERVER = 0  # handed to the server (or the gateway), not yet handled
    HANDLED = 1  # handled (the core validated it, or it went upstream): its pipeline may go on
    PARKED = 2  # handled; the answer waits for an event (JoinGroup, a long-poll Fetch)
    ANSWERED = 3  # the answer is ready and waits for the earlier ones
    STREAMING = 4  # its turn came while the answer still arrives: passed on as it comes
    SENT = 5  # written to the socket (or nothing to write: acks=0, a hold released)


class ReplyEvent(enum.IntEnum):
    HANDLE = 0
    PARK = 1
    ANSWER = 2
    STREAM = 3  # its turn came: pass the answer on as it arrives (cut-through)
    WRITE = 4  # its turn came and its answer was written (or the stream ended)


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
JOINABLE: Final = frozenset(
    {ReplyState.HANDLED, ReplyState.PARKED, ReplyState.ANSWERED, ReplyState.STREAMING}
)
# The request has its answer (a second one is a bug, dropped).
ANSWERED: Final = frozenset({ReplyState.ANSWERED, ReplyState.STREAMING, ReplyState.SENT})


# The tables as lists indexed by state, then event (what the lookups on every request use).
_CONNECTION_NEXT: Final = [
    [CONNECTION_TRANSITIONS.get((s, e)) for e in ConnectionEvent] for s in ConnectionState
]
REPLY_NEXT: Final[list[list[ReplyState | None]]] = [
    [REPLY_TRANSITIONS.get((s, e)) for e in ReplyEvent] for s in ReplyState
]


def next_connection_state(state: ConnectionState, event: ConnectionEvent) -> ConnectionState:
    """The next state; an event the table does not allow in ``state`` is a bug (ValueError)."""
    after = _CONNECTION_NEXT[state][event]
    if after is None:
        raise ValueError(f"connection event {event.name} in state {state.name}")
    return after


def next_reply_state(state: ReplyState, event: ReplyEvent) -> ReplyState | None:
    """The next state, None when the table has no such transition (the event is refused)."""
    return REPLY_NEXT[state][event]
