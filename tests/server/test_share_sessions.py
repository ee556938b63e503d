"""Share sessions (coordinator/server/share_sessions.py): what an incremental ShareFetch adds and
forgets, the epochs, the bound, and a closed connection taking its sessions with it."""

from __future__ import annotations

import pytest

from coordinator.server.share_sessions import SessionError, ShareSessionCache
from protocol.errors import ErrorCode

T1, T2 = b"\x01" * 16, b"\x02" * 16
KEY = ("g", "m", None)


def test_incremental_requests_add_partitions_and_forget_topics() -> None:
    cache = ShareSessionCache(10)
    connection = object()
    session, partitions = cache.fetch_context(KEY, 0, connection, [(T1, 0), (T1, 1)], [], False)
    assert session is not None and session.epoch == 1 and partitions == [(T1, 0), (T1, 1)]
    _, partitions = cache.fetch_context(KEY, 1, connection, [(T2, 0)], [], False)
    assert partitions == [(T1, 0), (T1, 1), (T2, 0)]  # added to what the session holds
    _, partitions = cache.fetch_context(KEY, 2, connection, [], [(T1, 0), (T1, 1)], True)
    assert partitions == [(T2, 0)]  # forgotten
    _, partitions = cache.fetch_context(KEY, 3, connection, [], [], False)
    assert partitions == [(T2, 0)] and cache.sessions[KEY].epoch == 4
    assert not cache.acknowledge_context(KEY, 4)
    assert cache.sessions[KEY].epoch == 5
    with pytest.raises(SessionError) as stale:
        cache.fetch_context(KEY, 4, connection, [], [], False)
    assert stale.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    session, partitions = cache.fetch_context(KEY, 0, connection, [(T1, 3)], [], False)  # a new session
    assert session is not None and partitions == [(T1, 3)] and session.epoch == 1


def test_the_cache_is_bounded_and_a_closed_connection_takes_its_sessions() -> None:
    cache = ShareSessionCache(2)
    first, second = object(), object()
    cache.fetch_context(("g", "a", None), 0, first, [], [], False)
    cache.fetch_context(("g", "b", None), 0, second, [], [], False)
    with pytest.raises(SessionError) as full:
        cache.fetch_context(("g", "c", None), 0, second, [], [], False)
    assert full.value.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert cache.closed_by(first) == [("g", "a", None)]
    cache.fetch_context(("g", "c", None), 0, second, [], [], False)
    assert sorted(k[1] for k in cache.sessions) == ["b", "c"]
    assert cache.acknowledge_context(("g", "b", None), -1)  # closes it
    with pytest.raises(SessionError) as gone:
        cache.acknowledge_context(("g", "b", None), 1)
    assert gone.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
