"""start_server's steps (coordinator/server/app.py): a step that fails undoes every step before it
— ports closed, storage closed, the collector running again — and a server started after it
works."""

from __future__ import annotations

import gc
import socket
from pathlib import Path

import pytest

from coordinator.server import group_loading
from coordinator.server.app import start_server
from coordinator.server.config import Config
from tests.support.ports import free_port

pytestmark = pytest.mark.asyncio


class Refused(Exception):
    pass


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


async def test_a_failed_load_undoes_the_steps_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    config = Config(
        host="127.0.0.1",
        port=port,
        storage=f"sqlite:///{tmp_path / 'coordinator.db'}",
        metrics_port=free_port(),
    )

    async def read_ids(self: group_loading.GroupLoader) -> None:
        assert not gc.isenabled()  # loading runs with the collector paused
        raise Refused("the group ids cannot be read")

    with monkeypatch.context() as patched:
        patched.setattr(group_loading.GroupLoader, "read_ids", read_ids)
        with pytest.raises(Refused):
            await start_server(config)
    assert gc.isenabled()
    assert _refuses_connections(port)  # the listener opened before the load is closed
    assert _refuses_connections(config.metrics_port)  # and the health endpoint
    # The SQLite file is one server's at a time: the failed start gave it back.
    server = await start_server(config)
    await server.shutdown()
    assert gc.isenabled()
