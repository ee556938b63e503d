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
from playwright.sync_api import sync_playwright

from tests.integration.clients import KAFKA_PYTHON, TOPIC, create_topic, pool
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


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    """Live groups: two kafka-python consumers in "orders", one in a group whose id and client id
    are markup, and an idle group with committed offsets."""
    port = free_port()
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", {"metrics-port": str(port)}) as server:
        create_topic(server.bootstrap, TOPIC)
        form_group(server.bootstrap, "payments", "payments-service", topic=TOPIC)
        with (
            pool(KAFKA_PYTHON, server.bootstrap, "orders", TOPIC) as workers,
            pool(KAFKA_PYTHON, server.bootstrap, NASTY_GROUP, TOPIC) as nasty,
        ):
            members = [workers.spawn("billing-service-1"), workers.spawn("billing-service-2")]
            workers.wait_split(members)
            nasty.wait_split([nasty.spawn(NASTY_CLIENT)])
            yield server, port


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
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, up_left = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
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


def test_console_shows_groups_members_and_timeline(
    console: tuple[ServerProcess, int], tmp_path: Path
) -> None:
    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), "Debian's chromium is missing (.ci/setup)"
    _server, port = console
    base = f"http://127.0.0.1:{port}"
    dialogs: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(f"{base}/ui/", wait_until="domcontentloaded")
            row = page.locator('#groups tbody tr[data-group="orders"]')
            row.wait_for(timeout=10_000)
            assert "Stable" in row.inner_text()
            assert page.locator('#groups tbody tr[data-group="payments"]').count() == 1
            # The attacker-controlled id is shown as text, never parsed as markup.
            nasty_link = page.get_by_role("link", name=NASTY_GROUP, exact=True)
            assert nasty_link.inner_text() == NASTY_GROUP
            assert page.locator("#groups tbody script, #groups tbody img").count() == 0
            page.screenshot(path=str(tmp_path / "groups.png"), full_page=True)
            assert_not_blank((tmp_path / "groups.png").read_bytes())

            row.get_by_role("link", name="orders").click()
            page.wait_for_url("**/ui/group.html?id=orders")
            member_row = page.locator("#members tbody tr[data-member]")
            member_row.first.wait_for(timeout=10_000)
            assert member_row.count() == 2
            members_text = page.locator("#members tbody").inner_text()
            assert "billing-service-1" in members_text and "billing-service-2" in members_text
            assert f"{TOPIC}-0" in members_text and f"{TOPIC}-5" in members_text
            page.locator("#timeline svg circle.dot").first.wait_for(timeout=10_000)
            assert page.locator("#timeline svg rect.bar").count() >= 1
            assert page.locator("#timeline svg .lane-label").count() >= 2
            kinds = page.locator("#events tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
            assert "rebalance_started" in kinds and "member_joined" in kinds
            assert "gateway mode" in page.locator("#lag-note").inner_text()
            screenshot = page.screenshot(full_page=True)
            assert_not_blank(screenshot)

            page.goto(f"{base}/ui/group.html?id=" + quote(NASTY_GROUP, safe=""))
            page.locator("#members tbody tr[data-member]").first.wait_for(timeout=10_000)
            assert page.locator("#group-id").inner_text() == NASTY_GROUP
            assert NASTY_CLIENT in page.locator("#members tbody").inner_text()
            assert page.locator("main script, main img").count() == 0
        finally:
            browser.close()
    assert dialogs == [], f"markup in an id ran as script: {dialogs}"
