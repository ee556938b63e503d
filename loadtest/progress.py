"""Live progress on the driver: tasks send a UDP datagram per second, a thread prints a line.

On a terminal the line is rewritten in place; otherwise (CI, a pipe) plain lines are printed.
Lost datagrams only make the display lag: nothing depends on them.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from typing import Any, TextIO


class Progress:
    def __init__(
        self, host: str, interval_s: float, lag_threshold_ms: float, out: TextIO | None = None
    ) -> None:
        self.out = out or sys.stderr
        self.interval_s = interval_s
        self.lag_threshold_ms = lag_threshold_ms
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, 0))
        self._sock.settimeout(0.2)
        self.host, self.port = self._sock.getsockname()[:2]
        self._tasks: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._tty = self.out.isatty()
        self._label = ""
        self._started = time.monotonic()
        self._last_requests = 0
        self._last_time = time.monotonic()
        self._expected_tasks = 0
        self._members = 0

    def begin(self, label: str, tasks: int, members: int) -> None:
        with self._lock:
            self._tasks.clear()
            self._label = label
            self._started = time.monotonic()
            self._last_requests = 0
            self._last_time = time.monotonic()
            self._expected_tasks = tasks
            self._members = members
        if not self._threads:
            for target in (self._receive, self._print):
                thread = threading.Thread(target=target, name=f"progress-{target.__name__}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def end(self) -> None:
        self._emit(final=True)
        with self._lock:
            self._label = ""

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=2)
        self._sock.close()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                message = json.loads(data)
            except ValueError:
                continue
            with self._lock:
                if message.get("target") == self._label:
                    self._tasks[int(message["task"])] = message

    def _print(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._emit(final=False)

    def _emit(self, final: bool) -> None:
        with self._lock:
            if not self._label:
                return
            tasks = list(self._tasks.values())
            label = self._label
            elapsed = time.monotonic() - self._started
            now = time.monotonic()
            requests = sum(t["requests"] for t in tasks)
            rate = (requests - self._last_requests) / max(now - self._last_time, 1e-6)
            self._last_requests, self._last_time = requests, now
            expected_tasks = self._expected_tasks
        if not tasks:
            line = f"[{label}] {elapsed:5.0f}s waiting for tasks to start (Spark)"
        else:
            members = sum(t["members"] for t in tasks)
            stable = sum(t["stable"] for t in tasks)
            signals = sum(t["signals"] for t in tasks)
            unexpected = sum(t["unexpected"] for t in tasks)
            lag = max(t["lag_ms"] for t in tasks)
            codes: dict[str, int] = {}
            for t in tasks:
                for code, n in t.get("unexpected_by_code", {}).items():
                    codes[code] = codes.get(code, 0) + n
            line = (
                f"[{label}] {elapsed:5.0f}s tasks {len(tasks)}/{expected_tasks} · members {members:,}"
                f" ({stable:,} assigned) · {rate:,.0f} req/s · {requests:,} requests"
                f" · signals {signals:,} · unexpected {unexpected:,}"
            )
            if codes:
                line += " " + json.dumps(dict(sorted(codes.items())))
            line += f" · loop lag {lag:.0f} ms"
            if lag > self.lag_threshold_ms:
                line += " (CLIENT SATURATED)"
        if self._tty and not final:
            self.out.write("\r\x1b[2K" + line)
        else:
            self.out.write(("\r\x1b[2K" if self._tty else "") + line + "\n")
        self.out.flush()
