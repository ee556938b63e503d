"""The JSON API, the console's static files and the group metrics of a running server."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import pytest

from coordinator.server.app import start_server
from coordinator.server.config import Config
from coordinator.server.group_views import LAG_UNAVAILABLE
from tests.integration.observe_support import (
    NASTY_GROUP,
    Observed,
    create_topic,
    form_group,
    get_json,
    http_get,
    observed,
    scrape,
)
from tests.support.ports import free_port

__all__ = ["observed"]  # the fixture

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

NASTY = NASTY_GROUP


async def test_groups_list_describe_and_history(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    member_id, generation = await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    status, body = await get_json(observed, "/api/groups")
    assert status == 200
    [group] = body["groups"]
    assert group["group_id"] == "orders" and group["state"] == "Stable" and group["members"] == 1
    assert group["type"] == "classic" and group["protocol_name"] == "range"
    assert group["lag"] is None and group["status"] is None  # standalone: no log-end samples
    assert group["last_event"]["kind"] == "group_stable"

    status, view = await get_json(observed, "/api/groups/orders")
    assert status == 200
    [member] = view["members"]
    assert member["member_id"] == member_id and member["client_id"] == "billing" and member["leader"]
    assert member["assignment"] == [["t", p] for p in range(4)]
    assert [(o["partition"], o["committed"], o["lag"]) for o in view["offsets"]] == [
        (p, 10 * p, None) for p in range(4)
    ]
    assert view["lag"] is None and view["lag_unavailable_reason"] == LAG_UNAVAILABLE

    status, history = await get_json(observed, "/api/groups/orders/history")
    assert status == 200
    kinds = [e["kind"] for e in history["events"]]
    assert kinds == ["member_joined", "rebalance_started", "generation_formed", "group_stable"]
    joined = history["events"][0]
    assert joined["details"]["client_id"] == "billing" and joined["details"]["client_host"] == "/127.0.0.1"
    assert history["events"][1]["details"]["reason"] == "member_joined"
    assert history["events"][-1]["generation"] == generation
    last_seq = history["events"][-1]["seq"]
    status, later = await get_json(observed, f"/api/groups/orders/history?since={last_seq}")
    assert status == 200 and later["events"] == []
    now_ms = int(time.time() * 1000) + 60_000
    status, later = await get_json(observed, f"/api/groups/orders/history?since_ms={now_ms}")
    assert later["events"] == []


async def test_lag_fields_fill_once_samples_exist(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    lag = observed.server.lag
    for minute in range(3):
        for p in range(4):
            lag.observe("orders", "t", p, minute * 60_000, 10 * p, 10 * p + 100 * minute, commit_time_ms=0)
    status, view = await get_json(observed, "/api/groups/orders")
    assert status == 200
    assert view["lag_unavailable_reason"] is None
    assert view["lag"]["status"] == "STALL" and view["lag"]["total_lag"] == 800
    assert {o["lag"] for o in view["offsets"]} == {200}
    assert {o["status"] for o in view["offsets"]} == {"STALL"}
    samples, _ = await scrape(observed)
    assert samples['coordinator_group_lag_records{group="orders"}'] == 800
    assert samples['coordinator_group_lag_status{group="orders"}'] == 2
    assert samples['coordinator_groups_by_lag_status{status="STALL"}'] == 1


async def test_errors_are_json_with_the_right_status(observed: Observed) -> None:
    assert (await get_json(observed, "/api/groups/unknown")) == (404, {"error": "group 'unknown' not found"})
    assert (await get_json(observed, "/api/groups/unknown/history"))[0] == 404
    assert (await get_json(observed, "/api/groups/x/history?since=soon")) == (
        400,
        {"error": "since and since_ms must be integers"},
    )
    assert (await get_json(observed, "/api/nope"))[0] == 404


async def test_every_response_carries_security_headers_and_ids_are_url_decoded(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    await asyncio.to_thread(form_group, observed.bootstrap, NASTY, "x")
    status, view = await get_json(observed, "/api/groups/" + quote(NASTY, safe=""))
    assert status == 200 and view["group_id"] == NASTY
    for path in ("/", "/ui/group.html", "/ui/console.js", "/ui/console.css", "/api/groups", "/api/nope"):
        status, headers, body = await asyncio.to_thread(http_get, f"http://{observed.http}{path}")
        csp = headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
    status, headers, body = await asyncio.to_thread(http_get, f"http://{observed.http}/ui/console.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"innerHTML" not in body  # ids are attacker-controlled: the DOM is built with textContent
    status, _, body = await asyncio.to_thread(http_get, f"http://{observed.http}/ui/../../etc/passwd")
    assert status == 404


async def test_rebalance_metrics_by_reason(observed: Observed) -> None:
    await asyncio.to_thread(create_topic, observed.bootstrap, "t", 4)
    await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing")
    samples, _ = await scrape(observed)
    assert samples['coordinator_group_rebalances_total{protocol="classic",reason="member_joined"}'] == 1
    assert samples["coordinator_group_preparing_rebalance_seconds_count"] == 1
    assert samples["coordinator_group_completing_rebalance_seconds_count"] == 1
    assert samples["coordinator_group_partitions_moved_count"] == 1
    assert samples['coordinator_group_rebalances_by_group{group="orders"}'] == 1
    assert samples["coordinator_event_loop_lag_seconds_count"] >= 0
    assert samples["coordinator_event_loop_lag_max_seconds"] >= 0


async def test_the_lag_sampler_feeds_lag_in_seconds_and_status() -> None:
    """With log ends (gateway mode), the sampler's samples reach the status rules: a group whose
    log ends keep growing while its offsets stand still shows lag in records and seconds."""
    ends = {"t": 100}

    async def end_offsets(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        ends["t"] += 50  # records keep arriving
        return {tp: ends["t"] for tp in partitions}

    http_port = free_port()
    config = Config(
        host="127.0.0.1",
        port=0,
        storage="memory://",
        metrics_port=http_port,
        group_initial_rebalance_delay_ms=0,
        lag_sample_interval_ms=50,
    )
    running = await start_server(config, end_offsets)
    observed = Observed(running, http_port)
    try:
        await asyncio.to_thread(create_topic, observed.bootstrap, "t", 2)
        await asyncio.to_thread(form_group, observed.bootstrap, "orders", "billing", 2)

        async def sampled() -> dict[str, object]:
            for _ in range(200):
                _status, view = await get_json(observed, "/api/groups/orders")
                if view["lag"] is not None and view["lag"]["max_lag_seconds"]:
                    return dict(view)
                await asyncio.sleep(0.05)
            raise AssertionError(f"no lag sampled: {view}")

        view = await sampled()
        lag = view["lag"]
        assert isinstance(lag, dict)
        assert lag["status"] == "STALL"  # offsets stand still while the log grows
        assert lag["total_lag"] > 0 and lag["max_lag_seconds"] > 0
        offsets = view["offsets"]
        assert isinstance(offsets, list)
        assert all(o["log_end"] is not None and o["lag"] == o["log_end"] - o["committed"] for o in offsets)
    finally:
        await running.shutdown()
        if running.health is not None:
            await running.health.close()
