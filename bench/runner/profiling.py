"""Where the time goes (--profile, py-spy) and the load generator's ceiling (--ceiling)."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

from runner.common import DASH, PEER_VENV, PYTHON, TIMES, log
from runner.report import fmt, one_line, spread
from runner.servers import Env, Server, loadgen, running, start_ours, start_stub
from runner.workloads import RUNNERS, Profile


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
        log(f"  {r.get('name')}: {one_line(r)}")
    for spy, path in profiles:
        try:
            spy.wait(timeout=30)  # ends when the server it records exits
        except subprocess.TimeoutExpired:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=30)
        print(summarize_profile(path))


def commit_profile(env: Env, profile: Profile) -> str:
    """OffsetCommit of 1 partition, 16 connections x 8 in flight, as members, on SQLite under
    py-spy (all threads): the profile summary the report carries for commits."""
    tool = py_spy()
    workdir = env.next_dir("commit-profile")
    out = workdir / "profile.txt"
    with running(start_ours(env, workdir)) as server:
        spy = subprocess.Popen(
            [str(tool), "record", "--pid", str(server.pid), "--rate", "250", "--format", "raw",
             "--output", str(out), "--nonblocking", "--threads"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        flags = ["-conns", "16", "-inflight", "8", "-duration", f"{profile.pipe_seconds}s",
                 "-partitions", "1", "-modes", "member", "-tag", "profile"]  # fmt: skip
        results = loadgen(server, "commit", flags, timeout=600)
    try:
        spy.wait(timeout=30)  # ends when the server it records exits
    except subprocess.TimeoutExpired:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=30)
    measured = "; ".join(f"{r.get('name')}: {one_line(r)}" for r in results)
    return f"{measured}\n\n{summarize_profile(out, top=20)}"


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
