"""Run the coordinator as a subprocess on an ephemeral loopback port; stop it by PID."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")

# Small timeouts so real-client tests run in seconds, not minutes.
# How long a server process may take to start listening, or to load its groups: a Python process
# importing the coordinator takes about a second alone, many times that on a loaded 2-core machine.
START_TIMEOUT_S = 60.0
FAST_SETTINGS = {
    "group-initial-rebalance-delay-ms": "0",
    "group-streams-initial-rebalance-delay-ms": "0",
    "group-min-session-timeout-ms": "1000",
    "offsets-retention-check-interval-ms": "1000",
}


@dataclass
class ServerProcess:
    process: subprocess.Popen[str]
    port: int
    storage: str
    log_lines: list[str] = field(default_factory=list)
    pump: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return "".join(self.log_lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.pump is not None:
            self.pump.join(timeout)
        if self.process.stderr is not None:
            self.process.stderr.close()
        return self.process.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def wait_loaded(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until the server logged that every group is loaded (a single node loads its groups in
        the background after it starts serving: docs/performance.md#loading-in-the-background)."""
        deadline = time.monotonic() + timeout
        while " offsets from " not in self.log_text():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"coordinator did not load its groups:\n{self.log_text()}")
            time.sleep(0.01)


def start_server(
    storage: str,
    extra: dict[str, str] | None = None,
    port: int = 0,
    timeout: float = START_TIMEOUT_S,
    environment: dict[str, str] | None = None,
    flags: tuple[str, ...] = (),
) -> ServerProcess:
    """``environment``: variables added to the server's environment (COORDINATOR_* are cleared first);
    ``flags``: options without a value (``--init``)."""
    settings = {**FAST_SETTINGS, **(extra or {})}
    argv = [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--storage", storage]  # fmt: skip
    for name, value in settings.items():
        argv += [f"--{name}", value]
    argv += flags
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")} | (environment or {})
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    server = ServerProcess(process, 0, storage)
    found = threading.Event()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            server.log_lines.append(line)
            match = _LISTENING.search(line)
            if match and not found.is_set():
                server.port = int(match.group(1))
                found.set()
        found.set()

    server.pump = threading.Thread(target=pump, daemon=True)
    server.pump.start()
    deadline = time.monotonic() + timeout
    while not found.wait(0.05):
        if time.monotonic() > deadline:
            break
    if not server.port:
        server.stop()
        raise RuntimeError(f"coordinator did not start:\n{server.log_text()}")
    return server


@contextmanager
def running_server(
    storage: str, extra: dict[str, str] | None = None, flags: tuple[str, ...] = ()
) -> Iterator[ServerProcess]:
    server = start_server(storage, extra, flags=flags)
    try:
        yield server
    finally:
        server.stop()
