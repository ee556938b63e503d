"""The console in gateway mode, in headless Chromium: no "lag needs gateway mode" hint, and the
topic page rolls up the lag sampled from upstream's log ends."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from playwright.sync_api import sync_playwright

from tests.gateway.clients import produce_kafka_python
from tests.gateway.conftest import running_gateway
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_missing, image_stats
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

SCREENSHOTS = os.environ.get("CONSOLE_SCREENSHOTS")
RECORDS = 6


def test_gateway_console_has_no_standalone_hint_and_rolls_up_topic_lag(
    tansu_port: int, tmp_path: Path
) -> None:
    assert browser_missing() is None, browser_missing()
    http_port = free_port()
    extra = {"metrics-port": str(http_port), "lag-sample-interval-ms": "200"}
    with running_gateway(f"127.0.0.1:{tansu_port}", **extra) as gateway:
        admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
        try:
            admin.create_topics([NewTopic("shipments", 1, 1)])
        finally:
            admin.close()
        for i in range(RECORDS):  # one batch each: Tansu's log-end offset moves with every batch
            produce_kafka_python(gateway.bootstrap, "shipments", [f"s-{i}".encode()])
        partition = TopicPartition("shipments", 0)
        for group, committed in (("dispatch", 2), ("billing", 5)):
            consumer = KafkaConsumer(
                bootstrap_servers=gateway.bootstrap, group_id=group, enable_auto_commit=False
            )
            try:
                end = consumer.end_offsets([partition])[partition]
                consumer.commit({partition: OffsetAndMetadata(committed, "", -1)})
            finally:
                consumer.close()
        assert end >= RECORDS
        base = f"http://127.0.0.1:{http_port}"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{base}/ui/", wait_until="domcontentloaded")
                page.locator('#groups tbody tr[data-group="dispatch"]').wait_for(timeout=10_000)
                assert page.locator("#mode").inner_text() == "gateway mode"
                assert "gateway mode" not in page.locator("#status").inner_text()

                expected = (end - 2) + (end - 5)
                for _ in range(100):  # until both groups' lag was sampled
                    page.goto(f"{base}/ui/topic.html?name=shipments", wait_until="domcontentloaded")
                    page.locator("#topic-groups tbody tr[data-group]").first.wait_for(timeout=10_000)
                    summary = page.locator("#summary").inner_text()
                    if f"Total lag\t{expected}" in summary or f"Total lag\n{expected}" in summary:
                        break
                    page.wait_for_timeout(200)
                assert str(expected) in page.locator("#summary").inner_text(), summary
                rows = {
                    r.get_attribute("data-group"): r.locator("td").all_inner_texts()
                    for r in page.locator("#topic-groups tbody tr[data-group]").all()
                }
                assert rows["dispatch"][6] == str(end - 2) and rows["billing"][6] == str(end - 5)
                assert page.locator("#lag-note").inner_text() == ""
                path = tmp_path / "console-topic-gateway.png"
                page.screenshot(path=str(path), full_page=True)
                width, height, colours = image_stats(path.read_bytes())
                assert width >= 1400 and height >= 600 and colours > 20
                if SCREENSHOTS:
                    shutil.copyfile(path, Path(SCREENSHOTS) / path.name)

                page.goto(f"{base}/ui/group.html?id=dispatch", wait_until="domcontentloaded")
                page.locator("#offsets tbody tr td.num").first.wait_for(timeout=10_000)
                assert "gateway mode" not in page.locator("#lag-note").inner_text()
            finally:
                browser.close()
