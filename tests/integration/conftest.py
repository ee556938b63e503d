from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess, running_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A coordinator on SQLite in a temp dir, on an ephemeral loopback port."""
    with running_server(f"sqlite:///{tmp_path / 'coordinator.db'}") as proc:
        yield proc
