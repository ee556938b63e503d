"""What the console reads: the server's mode and hint, protocol type and assignor apart, member
liveness (last heartbeat, session deadline, late), and the per-topic lag roll-up."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.observe_support import Observed, create_topic, form_group, get_json, observed

__all__ = ["observed"]  # the fixture

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


async def test_overview_tells_the_mode_and_splits_protocol_type_and_assignor(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    status, body = await get_json(observed, "/api/groups")
    assert status == 200
    assert body["mode"] == "standalone" and "gateway mode" in body["lag_hint"]
    [group] = body["groups"]
    assert (group["protocol_type"], group["assignor"]) == ("consumer", "range")
    _status, view = await get_json(observed, "/api/groups/orders")
    assert view["mode"] == "standalone"
    assert (view["protocol_type"], view["assignor"]) == ("consumer", "range")


async def test_a_member_that_stops_heartbeating_shows_late_before_its_deadline(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    # One member with a 10 s session that never heartbeats after its SyncGroup.
    await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    _status, view = await get_json(observed, "/api/groups/orders")
    [member] = view["members"]
    assert member["liveness"] == "alive"
    heard, deadline = member["last_heartbeat_ms"], member["session_deadline_ms"]
    assert deadline - heard == 10_000
    assert heard <= view["now_ms"] < deadline
    assert member["late_after_ms"] == 10_000 // 3
    for _ in range(200):  # late after a third of the session, long before the deadline
        _status, view = await get_json(observed, "/api/groups/orders")
        [member] = view["members"]
        if member["liveness"] == "late":
            break
        await asyncio.sleep(0.05)
    assert member["liveness"] == "late", member
    # Wall times are derived from monotonic ones at each request: equal to a millisecond.
    assert abs(member["last_heartbeat_ms"] - heard) <= 2 and view["now_ms"] < deadline


async def test_topics_roll_up_lag_per_group_and_in_total(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    await asyncio.to_thread(create_topic, observed.bootstrap, "idle", 2)
    await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    await asyncio.to_thread(form_group, observed.bootstrap, "audit", "auditor", 2)
    lag = observed.server.lag
    for p in range(4):  # committed 10 * p (form_group); orders has 100 records to read per partition
        lag.observe("orders", "t", p, 1_000, 10 * p, 10 * p + 100, commit_time_ms=0)
    status, body = await get_json(observed, "/api/topics")
    assert status == 200
    rows = {row["topic"]: row for row in body["topics"]}
    assert rows["t"] == {"topic": "t", "partitions": 4, "groups": 2, "lag": 400, "lag_seconds": None}
    assert rows["idle"]["groups"] == 0 and rows["idle"]["lag"] is None

    status, topic = await get_json(observed, "/api/topics/t")
    assert status == 200
    assert topic["partitions"] == 4 and topic["lag"] == 400 and topic["lag_note"] is None
    groups = {g["group_id"]: g for g in topic["groups"]}
    assert groups["orders"]["lag"] == 400 and groups["orders"]["committed_partitions"] == 4
    assert groups["orders"]["assigned_partitions"] == 4 and groups["orders"]["members"] == 1
    assert groups["audit"]["lag"] is None and groups["audit"]["committed_partitions"] == 2  # not sampled
    first = topic["partition_rows"][1]
    assert first["log_end"] == 110
    assert first["groups"]["orders"]["committed"] == 10 and first["groups"]["orders"]["lag"] == 100
    assert first["groups"]["audit"]["lag"] is None
    _status, idle = await get_json(observed, "/api/topics/idle")
    assert idle["lag"] is None and "gateway mode" in idle["lag_note"]
    assert (await get_json(observed, "/api/topics/nope")) == (404, {"error": "topic 'nope' not found"})
