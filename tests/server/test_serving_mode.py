"""The serving-mode rules (coordinator/server/serving_mode.py), and a gateway refused on a
standalone server's SQLite file until --allow-mode-change confirms the switch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.server.serving_mode import ServingModeError, settle_serving_mode
from storage.records import ServingModeRecord, ServingModeTombstone, StoredIdentity
from tests.support.server import REPO, running_server


def _stored(*modes: ServingModeRecord) -> StoredIdentity:
    return StoredIdentity([], created=False, schema_version_at_open=12, serving_mode=list(modes))


def test_a_first_start_records_its_mode() -> None:
    new = StoredIdentity([], created=True, schema_version_at_open=0)
    gateway = settle_serving_mode(new, " kafka-1:9092, kafka-2:9092 ", False, "db", 7)
    assert gateway.records == [ServingModeRecord("gateway", "kafka-1:9092,kafka-2:9092", 7)]
    assert gateway.action == "recorded: served as a gateway in front of kafka-1:9092,kafka-2:9092"
    assert settle_serving_mode(new, "", False, "db", 7).records == [ServingModeRecord("standalone", "", 7)]


def test_the_same_mode_is_just_checked() -> None:
    standalone = _stored(ServingModeRecord("standalone", "", 1))
    assert settle_serving_mode(standalone, "", False, "db", 9).records == []
    gateway = _stored(ServingModeRecord("gateway", "a:9092,b:9092", 1))
    assert settle_serving_mode(gateway, "a:9092, b:9092", False, "db", 9).records == []


@pytest.mark.parametrize(
    ("stored", "upstream", "message"),
    [
        (ServingModeRecord("standalone", "", 1), "kafka:9092",
         "storage db was served as a standalone coordinator, and this start is a gateway in front of kafka:9092"),
        (ServingModeRecord("gateway", "kafka:9092", 1), "",
         "was served as a gateway in front of kafka:9092, and this start is a standalone coordinator"),
        (ServingModeRecord("gateway", "kafka:9092", 1), "other:9092",
         "a gateway in front of kafka:9092, and this start is a gateway in front of other:9092"),
    ],
)  # fmt: skip
def test_a_switch_is_refused_unless_allowed(stored: ServingModeRecord, upstream: str, message: str) -> None:
    with pytest.raises(ServingModeError, match="--allow-mode-change") as refused:
        settle_serving_mode(_stored(stored), upstream, False, "db", 9)
    assert message in str(refused.value)
    allowed = settle_serving_mode(_stored(stored), upstream, True, "db", 9)
    new = ServingModeRecord("gateway" if upstream else "standalone", upstream, 9)
    assert allowed.records == ([] if stored.mode == new.mode else [ServingModeTombstone(stored.mode)]) + [new]
    assert allowed.action.startswith("changed (--allow-mode-change): was ")


def _serve(storage: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`serve` in gateway mode in front of a port nothing listens on: refused before it connects."""
    argv = [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", "0",
            "--storage", storage, "--upstream-bootstrap-servers", "127.0.0.1:1", *flags]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)


@pytest.mark.integration
def test_a_gateway_is_refused_on_a_standalone_servers_database(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'coordinator.db'}"
    with running_server(storage) as standalone:
        standalone.wait_loaded()
        assert "serving mode recorded: served as a standalone coordinator" in standalone.log_text()
    refused = _serve(storage)
    assert refused.returncode == 1, refused.stderr
    assert "was served as a standalone coordinator, and this start is a gateway in front of 127.0.0.1:1" in (
        refused.stderr
    )
    assert "--allow-mode-change" in refused.stderr
    with running_server(storage) as again:  # standalone again: as recorded
        again.wait_loaded()
        assert "serving mode" not in again.log_text()
