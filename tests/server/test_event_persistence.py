"""group.events.persist: events handed to storage, put back at start, bounded while storage
fails; and `groups history` showing a group's events after a restart."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from coordinator.cli.admin.cli import main
from coordinator.core import events as ev
from coordinator.core.clock import ShardClock
from coordinator.server.event_store import EventPersister, to_event, to_record
from storage.base import StoreError
from storage.memory import MemoryStore
from tests.admin.support import create_topics, live_consumer
from tests.support.ports import free_port
from tests.support.server import running_server


def _events(ring_size: int = 5) -> ev.GroupEvents:
    clock = ShardClock()
    clock.set(0, 1_000_000)
    return ev.GroupEvents(clock, ring_size=ring_size)


def test_records_round_trip() -> None:
    events = _events()
    event = events.record(
        "g",
        ev.MEMBER_JOINED,
        "classic",
        "PreparingRebalance",
        2,
        "member m joined",
        "m",
        client_id="c",
        hosts=["h"],
    )
    assert to_event(to_record(event)) == event


def test_restore_then_persist_keeps_order_and_sequence() -> None:
    before = _events()
    old = [before.record("g", ev.MEMBER_JOINED, "classic", "Stable", 1, f"old {i}") for i in range(7)]
    after = _events()
    after.restore(old[-5:])
    after.persist()
    new = after.record("g", ev.MEMBER_LEFT, "classic", "Stable", 1, "new")
    assert [e.message for e in after.history("g")] == ["old 3", "old 4", "old 5", "old 6", "new"][-5:]
    assert new.seq == old[-1].seq + 1  # `since` cursors keep working across the restart
    assert after.take_unsaved() == [new] and after.take_unsaved() == []


def test_unsaved_events_are_bounded_while_storage_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "MAX_UNSAVED", 3)
    events = _events()
    events.persist()
    first = [events.record("g", ev.MEMBER_JOINED, "classic", "Stable", 1, f"e{i}") for i in range(2)]
    taken = events.take_unsaved()
    later = [events.record("g", ev.MEMBER_JOINED, "classic", "Stable", 1, f"e{i}") for i in range(2, 4)]
    events.give_back(taken)  # the write failed: back in front of the newer ones, oldest dropped
    assert [e.message for e in events.take_unsaved()] == ["e1", "e2", "e3"]
    assert events.unsaved_dropped == 1 and first[0].message == "e0" and later


class _FailingOnce(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail_next = True

    async def append_events(self, events: Any) -> None:
        if self.fail_next:
            self.fail_next = False
            raise StoreError("down")
        await super().append_events(events)


@pytest.mark.asyncio
async def test_persister_retries_after_a_failed_write(caplog: pytest.LogCaptureFixture) -> None:
    store = _FailingOnce()
    await store.open()
    events = _events()
    persister = EventPersister(events, store, retention_ms=60_000, wall_ms=lambda: 1_000_000)
    assert await persister.restore() == 0
    events.record("g", ev.MEMBER_JOINED, "classic", "Stable", 1, "one")
    await persister.flush()
    assert persister.failing and "cannot store 1 group events" in caplog.text
    events.record("g", ev.MEMBER_LEFT, "classic", "Empty", 1, "two")
    await persister.flush()
    assert [e.message for e in await store.load_events(10)] == ["one", "two"] and not persister.failing
    # A restart within the retention gets them back; one after it does not.
    again = _events()
    assert await EventPersister(again, store, 60_000, wall_ms=lambda: 1_000_000).restore() == 2
    assert [e.message for e in again.history("g")] == ["one", "two"]
    late = _events()
    assert await EventPersister(late, store, 60_000, wall_ms=lambda: 9_000_000).restore() == 0


@pytest.mark.integration
def test_groups_history_survives_a_restart(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'events.db'}"
    http_port = free_port()
    settings = {"group-events-persist": "true", "metrics-port": str(http_port)}
    with running_server(url, settings) as server:
        create_topics(server.bootstrap, kept_t=1)
        with live_consumer(server.bootstrap, "kept", ["kept_t"], "keeper"):
            pass
    with running_server(url, settings):
        # The HTTP port answers 503 until the groups are loaded: ask until it has loaded them.
        deadline = time.monotonic() + 20
        while (
            main(["groups", "history", "kept", "--http", f"127.0.0.1:{http_port}", "--format", "json"]) != 0
        ):
            assert time.monotonic() < deadline, capsys.readouterr().err
            time.sleep(0.2)
    events = json.loads(capsys.readouterr().out)["events"]
    kinds = [e["kind"] for e in events]
    assert kinds[:2] == ["member_joined", "rebalance_started"], kinds
    assert "member_left" in kinds and "group_stable" in kinds
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
