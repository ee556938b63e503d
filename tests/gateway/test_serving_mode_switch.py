"""A gateway on Tansu started on a standalone server's SQLite file: refused, then served once
--allow-mode-change confirms the switch, and from then on started as a gateway without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.conftest import gateway_settings
from tests.support.server import running_server, start_server

pytestmark = pytest.mark.integration


def test_switching_a_database_to_gateway_mode_needs_a_confirmation(tansu_port: int, tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'coordinator.db'}"
    upstream = f"127.0.0.1:{tansu_port}"
    with running_server(storage) as standalone:
        standalone.wait_loaded()
    with pytest.raises(RuntimeError, match="was served as a standalone coordinator"):
        start_server(storage, gateway_settings(upstream))
    switched = start_server(storage, gateway_settings(upstream), flags=("--allow-mode-change",))
    try:
        switched.wait_loaded()
        assert (
            "serving mode changed (--allow-mode-change): was a standalone coordinator, "
            f"now a gateway in front of {upstream}"
        ) in switched.log_text()
    finally:
        assert switched.stop() == 0
    with running_server(storage, gateway_settings(upstream)) as gateway:  # recorded: no flag needed
        gateway.wait_loaded()
        assert "serving mode" not in gateway.log_text()
