"""Share sessions (KIP-932): one per (share group, member) on this node, opened by a ShareFetch
with epoch 0, closed by epoch -1 or the member's connection closing, its epoch incremented by
every request in between; the partitions it fetches carried from request to request
(incremental fetches add partitions, ``ForgottenTopicsData`` removes them). Kafka's
``ShareSessionCache`` and ``SharePartitionManager.newContext`` (docs/share-groups.md, "Share
sessions"). Bounded: a node keeps at most ``group.share.max.share.sessions``; one more is
SHARE_SESSION_LIMIT_REACHED."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from protocol.errors import ErrorCode

INITIAL_EPOCH: Final = 0
FINAL_EPOCH: Final = -1

SessionKey = tuple[str, str, object]  # (group id, member id, the listener's advertised address)
TopicIdPartition = tuple[bytes, int]


class SessionError(Exception):
    """The request fails as a whole with this code."""

    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name)
        self.code = code


@dataclass(slots=True)
class ShareSession:
    key: SessionKey
    epoch: int
    owner: object  # the connection that opened it
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set


def next_epoch(epoch: int) -> int:
    return 1 if epoch == 2**31 - 1 else epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def fetch_context(
        self,
        key: SessionKey,
        epoch: int,
        owner: object,
        wanted: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
        has_acknowledgements: bool,
    ) -> tuple[ShareSession | None, list[TopicIdPartition]]:
        """ShareFetch: (the session, or None when the request closes it; the partitions to fetch)."""
        wanted = list(wanted)
        if epoch == FINAL_EPOCH:
            if wanted:
                raise SessionError(ErrorCode.INVALID_REQUEST)
            if self.sessions.pop(key, None) is None:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return None, []
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise SessionError(ErrorCode.INVALID_REQUEST)
            self.sessions.pop(key, None)
            if len(self.sessions) >= self.max_sessions:
                raise SessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            session = ShareSession(key, next_epoch(INITIAL_EPOCH), owner, dict.fromkeys(wanted))
            self.sessions[key] = session
            return session, list(session.partitions)
        session = self._current(key, epoch)
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in wanted:
            session.partitions[tp] = None
        session.owner = owner
        session.epoch = next_epoch(session.epoch)
        return session, list(session.partitions)

    def acknowledge_context(self, key: SessionKey, epoch: int) -> bool:
        """ShareAcknowledge: True when it closes the session (epoch -1)."""
        if epoch == INITIAL_EPOCH:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            if self.sessions.pop(key, None) is None:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
            return True
        session = self._current(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return False

    def _current(self, key: SessionKey, epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session

    def closed_by(self, owner: object) -> list[SessionKey]:
        """The connection ``owner`` closed: its sessions go."""
        keys = [k for k, s in self.sessions.items() if s.owner is owner]
        for key in keys:
            del self.sessions[key]
        return keys
