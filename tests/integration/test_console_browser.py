"""The console in a real browser: Debian's headless chromium, driven by Playwright, against a
running server with live groups."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Dialog, Page, Route, sync_playwright

from tests.integration.clients import CONFLUENT, KAFKA_PYTHON, TOPIC, Worker, create_topic, pool
from tests.integration.observe_support import NASTY_GROUP, form_group
from tests.support.ports import free_port
from tests.support.server import ServerProcess, running_server

pytestmark = pytest.mark.integration

NASTY_CLIENT = "<img src=x onerror=alert(2)>"

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Where the screenshots go besides the test's tmp_path: set to docs/ to refresh docs/console*.png.
SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
# A member that joins and never heartbeats: "late" after a third of this, removed after all of it.
SILENT_SESSION_MS = 30_000


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    """Live groups: two kafka-python consumers in "orders", two KIP-848 consumers in
    "inventory", one in a group whose id and client id are markup, an idle group with committed
    offsets, and a member of "reports" that stopped heartbeating."""
    port = free_port()
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", {"metrics-port": str(port)}) as server:
        create_topic(server.bootstrap, TOPIC)
        form_group(server.bootstrap, "payments", "payments-service", topic=TOPIC)
        kip848: list[Worker] = []
        try:
            with (
                pool(KAFKA_PYTHON, server.bootstrap, "orders", TOPIC) as workers,
                pool(KAFKA_PYTHON, server.bootstrap, NASTY_GROUP, TOPIC) as nasty,
            ):
                members = [workers.spawn("billing-service-1"), workers.spawn("billing-service-2")]
                kip848.extend(
                    Worker(CONFLUENT, server.bootstrap, "inventory", TOPIC, name, protocol="consumer")
                    for name in ("inventory-service-1", "inventory-service-2")
                )
                workers.wait_split(members)
                nasty.wait_split([nasty.spawn(NASTY_CLIENT)])
                for worker in kip848:
                    worker.wait_event("assigned")
                form_group(
                    server.bootstrap, "reports", "report-builder", topic=TOPIC,
                    session_timeout_ms=SILENT_SESSION_MS,
                )  # fmt: skip
                yield server, port
        finally:
            for worker in kip848:
                worker.close()


def launch(playwright: object) -> Browser:
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), "Debian's chromium is missing (.ci/setup)"
    chromium = playwright.chromium  # type: ignore[attr-defined]
    browser: Browser = chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    return browser


def shoot(page: Page, tmp_path: Path, name: str) -> None:
    """A full-page screenshot that must not be blank; also kept in $CONSOLE_SCREENSHOTS."""
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    assert_not_blank(path.read_bytes())
    if SCREENSHOTS:
        shutil.copyfile(path, Path(SCREENSHOTS) / name)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of an 8-bit RGB/RGBA PNG (what Chromium writes), unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind_of_filter, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, up_left = previous[i], previous[i - channels] if i >= channels else 0
            if kind_of_filter == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind_of_filter == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind_of_filter == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind_of_filter == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def assert_not_blank(png: bytes) -> None:
    width, height, rows = png_pixels(png)
    assert width > 400 and height > 300
    channels = len(rows[0]) // width
    colors: dict[bytes, int] = {}
    for row in rows[::4]:
        for x in range(0, width, 4):
            pixel = row[x * channels : x * channels + 3]
            colors[pixel] = colors.get(pixel, 0) + 1
    total = sum(colors.values())
    background = max(colors.values())
    assert len(colors) >= 20, f"only {len(colors)} colors: a blank page"
    assert total - background > total * 0.05, "almost every pixel has the background color"


def lane_labels(page: Page) -> list[str]:
    labels: list[str] = page.locator("#timeline svg text.lane-label").evaluate_all(
        "nodes => nodes.map(n => n.childNodes[0].textContent)"
    )
    return labels


def test_console_shows_groups_members_and_timeline(
    console: tuple[ServerProcess, int], tmp_path: Path
) -> None:
    _server, port = console
    base = f"http://127.0.0.1:{port}"
    dialogs: list[str] = []
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})

            def dismiss(dialog: Dialog) -> None:
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", dismiss)
            page.goto(f"{base}/ui/", wait_until="domcontentloaded")
            row = page.locator('#groups tbody tr[data-group="orders"]')
            row.wait_for(timeout=10_000)
            assert "Stable" in row.inner_text()
            assert page.locator('#groups tbody tr[data-group="payments"]').count() == 1
            cells = row.locator("td").all_inner_texts()
            assert cells[3:5] == ["consumer", "range"]  # protocol type and assignor apart
            kip848 = page.locator('#groups tbody tr[data-group="inventory"] td').all_inner_texts()
            assert kip848[1] == "consumer" and kip848[4] == "uniform"
            assert cells[8] == "unknown"  # lag in seconds without samples is not 0.0
            # Standalone: the API says so, and the overview explains why lag is missing.
            assert "lag needs gateway mode" in page.locator("#status").inner_text()
            assert page.locator("#mode").inner_text() == "standalone mode"
            # The attacker-controlled id is shown as text, never parsed as markup.
            nasty_link = page.get_by_role("link", name=NASTY_GROUP, exact=True)
            assert nasty_link.inner_text() == NASTY_GROUP
            assert page.locator("#groups tbody script, #groups tbody img").count() == 0
            shoot(page, tmp_path, "console-groups.png")

            row.get_by_role("link", name="orders").click()
            page.wait_for_url("**/ui/group.html?id=orders")
            member_row = page.locator("#members tbody tr[data-member]")
            member_row.first.wait_for(timeout=10_000)
            assert member_row.count() == 2
            members_text = page.locator("#members tbody").inner_text()
            assert "billing-service-1" in members_text and "billing-service-2" in members_text
            assert f"{TOPIC}-0" in members_text and f"{TOPIC}-5" in members_text
            # Heartbeating members (a heartbeat may come late on a loaded machine; "late" itself
            # is checked on "reports" below).
            assert {r.get_attribute("data-liveness") for r in member_row.all()} <= {
                "alive",
                "late",
                "waiting",
            }
            assert all(r.locator("td").nth(5).inner_text().endswith("ago") for r in member_row.all())
            page.locator("#timeline svg circle.dot").first.wait_for(timeout=10_000)
            assert page.locator("#timeline svg rect.bar").count() >= 1
            assert sorted(lane_labels(page)) == ["billing-service-1", "billing-service-2"]
            # The axis spans the events: the last rebalance ends near the right edge, however long
            # ago the group formed.
            width = float(page.locator("#timeline svg").get_attribute("width") or 0)
            ends = page.locator("#timeline svg rect.bar").evaluate_all(
                "bars => bars.map(b => Number(b.getAttribute('x')) + Number(b.getAttribute('width')))"
            )
            assert max(ends) > 0.9 * width, (ends, width)
            kinds = page.locator("#events tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
            assert "rebalance_started" in kinds and "member_joined" in kinds
            assert "gateway mode" in page.locator("#lag-note").inner_text()

            # KIP-848 member ids are opaque: the lanes say the client ids, the tooltips the ids.
            page.goto(f"{base}/ui/group.html?id=inventory")
            page.locator("#timeline svg text.lane-label").first.wait_for(timeout=10_000)
            assert sorted(lane_labels(page)) == ["inventory-service-1", "inventory-service-2"]
            member_ids = page.locator("#members tbody tr[data-member]").evaluate_all(
                "rows => rows.map(r => r.dataset.member)"
            )
            tooltips = page.locator("#timeline svg text.lane-label title").all_text_contents()
            assert all(any(m in t for t in tooltips) for m in member_ids), (member_ids, tooltips)
            assert "Protocol typeconsumer" in page.locator("#summary").inner_text().replace("\n", "")
            shoot(page, tmp_path, "console-group.png")

            # A member that stopped heartbeating is "late" long before its session times out.
            page.goto(f"{base}/ui/group.html?id=reports")
            silent = page.locator("#members tbody tr[data-member]")
            silent.first.wait_for(timeout=10_000)
            page.wait_for_selector('#members tbody tr[data-liveness="late"]', timeout=SILENT_SESSION_MS)
            late_cells = silent.first.locator("td").all_inner_texts()
            assert late_cells[0] == "report-builder" and late_cells[7] == "late"
            assert late_cells[5].endswith("ago") and late_cells[6].startswith("in ")
            shoot(page, tmp_path, "console-liveness.png")

            page.goto(f"{base}/ui/topics.html")
            topic_row = page.locator(f'#topics tbody tr[data-topic="{TOPIC}"]')
            topic_row.wait_for(timeout=10_000)
            topic_row.get_by_role("link", name=TOPIC).click()
            page.wait_for_url(f"**/ui/topic.html?name={TOPIC}")
            consuming = page.locator("#topic-groups tbody tr[data-group]")
            consuming.first.wait_for(timeout=10_000)
            groups = consuming.evaluate_all("rows => rows.map(r => r.dataset.group)")
            assert {"orders", "inventory", "payments", "reports", NASTY_GROUP} <= set(groups)
            assert page.locator("#partitions tbody tr[data-partition]").count() == 6
            assert "unknown" in page.locator("#summary").inner_text()  # standalone: no log ends
            assert "lag needs gateway mode" in page.locator("#lag-note").inner_text()
            shoot(page, tmp_path, "console-topic.png")

            page.goto(f"{base}/ui/group.html?id=" + quote(NASTY_GROUP, safe=""))
            page.locator("#members tbody tr[data-member]").first.wait_for(timeout=10_000)
            assert page.locator("#group-id").inner_text() == NASTY_GROUP
            assert NASTY_CLIENT in page.locator("#members tbody").inner_text()
            assert page.locator("main script, main img").count() == 0
        finally:
            browser.close()
    assert dialogs == [], f"markup in an id ran as script: {dialogs}"


def test_group_page_shows_what_arrived_while_the_api_is_slow_and_says_when_it_fails(
    console: tuple[ServerProcess, int],
) -> None:
    _server, port = console
    base = f"http://127.0.0.1:{port}"
    held: list[Route] = []
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})

            def hold_first(route: Route) -> None:  # the first history request is answered later
                if held:
                    route.continue_()
                else:
                    held.append(route)

            page.route("**/api/groups/orders/history", hold_first)
            page.goto(f"{base}/ui/group.html?id=orders", wait_until="domcontentloaded")
            page.locator("#members tbody tr[data-member]").first.wait_for(timeout=10_000)
            assert "Waiting for the coordinator" in page.locator("#events tbody").inner_text()
            page.locator("#status", has_text="Still waiting").wait_for(timeout=10_000)
            assert "history" in page.locator("#status").inner_text()
            held[0].continue_()
            page.locator("#events tbody tr[data-kind]").first.wait_for(timeout=10_000)
            page.locator("#timeline svg").wait_for(timeout=10_000)

            page.route(
                "**/api/groups/payments",
                lambda route: route.fulfill(
                    status=503, content_type="application/json", body='{"error":"groups are still loading"}'
                ),
            )
            page.goto(f"{base}/ui/group.html?id=payments", wait_until="domcontentloaded")
            page.locator("#status.error").wait_for(timeout=10_000)
            assert "groups are still loading" in page.locator("#status").inner_text()
            assert "Could not load: groups are still loading" in page.locator("#members tbody").inner_text()
            page.locator("#events tbody tr[data-kind]").first.wait_for(timeout=10_000)  # history did load
        finally:
            browser.close()
