"""The servers under test (ours, the peer, the ceiling stub), started pinned on a free loopback
port and measured from /proc, and the Go load generator that drives them."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.common import BENCH, GEN_CPU, LOADGEN, PYTHON, READY, ROOT, SERVER_CPU


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    kind: str
    proc: subprocess.Popen[bytes]
    port: int
    ready_s: float  # process start to ready
    log_path: Path
    ready_cpu_s: float = 0.0
    ready_rss_kb: int = 0
    started: float = 0.0  # time.monotonic() at process start

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def cpu_pressure() -> float | None:
    """The "some avg10" figure of /proc/pressure/cpu (percent of time tasks waited for a CPU)."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return float(first.split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return None


def source_digest() -> str:
    """Short hash of the server's sources, to tell which code a run measured."""
    import hashlib

    h = hashlib.sha256()
    for folder in ("coordinator", "protocol", "storage"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            h.update(path.relative_to(ROOT).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


def proc_cpu_rss(pid: int) -> tuple[float, int]:
    """(utime + stime in seconds, VmRSS in kB) of a process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        rss = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        return cpu, rss
    except (OSError, ValueError, IndexError):
        return 0.0, 0


def wait_ready(
    kind: str, proc: subprocess.Popen[bytes], log_path: Path, started: float, port: int | None, timeout: float
) -> Server:
    deadline = started + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{kind} server exited with {proc.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}"
            )
        text = log_path.read_text(errors="replace")
        match = READY.search(text)
        if match:
            ready = time.monotonic() - started
            bound = int(match.group(1))
            if port is None or _accepts(bound):
                cpu, rss = proc_cpu_rss(proc.pid)
                return Server(kind, proc, bound, ready, log_path, cpu, rss, started)
        time.sleep(0.002)
    proc.kill()
    raise RuntimeError(
        f"{kind} server not ready after {timeout:.0f} s:\n{log_path.read_text(errors='replace')[-3000:]}"
    )


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@dataclass
class Env:
    args: argparse.Namespace
    tmp: Path
    peer_bin: Path
    postgres_url: str | None = None
    counter: int = 0
    on_ours_started: Callable[[Server, Path], None] | None = None  # e.g. attach a profiler

    def next_dir(self, name: str) -> Path:
        self.counter += 1
        path = self.tmp / f"{self.counter:03d}-{name}"
        path.mkdir(parents=True, exist_ok=True)
        return path


def start_ours(env: Env, workdir: Path, storage: str | None = None, delay_ms: int | None = 0) -> Server:
    storage = storage or f"sqlite:///{workdir / 'coordinator.db'}"
    cmd = [
        "taskset", "-c", SERVER_CPU, str(PYTHON), "-m", "coordinator", "serve",
        "--host", "127.0.0.1", "--port", "0", "--storage", storage,
    ]  # fmt: skip
    if delay_ms is not None:
        cmd += ["--group-initial-rebalance-delay-ms", str(delay_ms)]
    log_path = workdir / "ours.log"
    with log_path.open("wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = wait_ready("ours", proc, log_path, started, None, env.args.start_timeout)
    if env.on_ours_started is not None:
        env.on_ours_started(server, workdir)
    return server


def start_peer(env: Env, workdir: Path) -> Server:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    cmd = [
        "taskset", "-c", SERVER_CPU, str(env.peer_bin), "broker",
        "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
    ]  # fmt: skip
    log_path = workdir / "peer.log"
    with log_path.open("wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    return wait_ready("peer", proc, log_path, started, port, env.args.start_timeout)


def start_stub(env: Env, workdir: Path) -> Server:
    cmd = ["taskset", "-c", SERVER_CPU, str(PYTHON), str(BENCH / "stub_server.py"), "--port", "0"]
    log_path = workdir / "stub.log"
    with log_path.open("wb") as out:
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return wait_ready("stub", proc, log_path, started, None, env.args.start_timeout)


@contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


def loadgen(server: Server, workload: str, flags: Sequence[str], timeout: float) -> list[dict[str, Any]]:
    cmd = [
        "taskset", "-c", GEN_CPU, str(LOADGEN), workload,
        "-addr", server.addr, "-server-pid", str(server.pid), *flags,
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return [{"name": workload, "done": False, "note": f"generator timed out after {timeout:.0f} s"}]
    try:
        out = json.loads(done.stdout)
    except json.JSONDecodeError:
        return [{"name": workload, "done": False, "note": f"generator failed: {done.stderr.decode()[-500:]}"}]
    results: list[dict[str, Any]] = out.get("results") or []
    pressure = cpu_pressure()
    for r in results:
        # Share of the last 10 s in which some runnable task waited for a CPU (other tenants).
        r.setdefault("extra", {})["cpu_pressure_avg10"] = pressure
    if out.get("error"):
        note = f"error: {out['error']}"
        if not server.alive():
            note += f" (server exited {server.proc.returncode}; log tail: {server.log_tail(10)})"
        results.append({"name": workload, "done": False, "note": note})
    return results
