"""Run a command whose progress shows in its output, with a time bound per phase instead of one
for the whole run: each phase's clock starts when the previous one is reached, so a slow start
(JVMs on a loaded machine) does not eat the time of the work that follows, and a run that stalls
fails saying where it stopped.

The command runs in its own process group (it may fork a JVM), stopped by its PID on failure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class Output:
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Phase:
    """``reached`` holds once the run is past this phase; the last phase ends when the command exits."""

    name: str
    bound_s: float
    reached: Callable[[Output], bool] = lambda _output: False


def run_in_phases(
    argv: Sequence[str], phases: Sequence[Phase], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
    readers = [
        threading.Thread(target=_drain, args=(stream, chunks[name]), daemon=True)
        for name, stream in (("stdout", process.stdout), ("stderr", process.stderr))
    ]
    for reader in readers:
        reader.start()

    def output() -> Output:
        return Output("".join(chunks["stdout"]), "".join(chunks["stderr"]))

    started = phase_started = time.monotonic()
    index = 0
    try:
        while process.poll() is None:
            while index < len(phases) - 1 and phases[index].reached(output()):
                index, phase_started = index + 1, time.monotonic()
            phase = phases[index]
            if time.monotonic() - phase_started > phase.bound_s:
                _stop(process)
                for reader in readers:
                    reader.join(10)
                done = output()
                raise AssertionError(
                    f"{' '.join(argv[:3])}…: phase {index + 1}/{len(phases)} ({phase.name}) took over "
                    f"{phase.bound_s:.0f} s, {time.monotonic() - started:.0f} s into the run; "
                    f"phases passed: {[p.name for p in phases[:index]]}\n"
                    f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.2)
    finally:
        if process.poll() is None:
            _stop(process)
        for reader in readers:
            reader.join(10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    done = output()
    return subprocess.CompletedProcess(list(argv), process.returncode, done.stdout, done.stderr)


def _drain(stream: IO[str] | None, into: list[str]) -> None:
    assert stream is not None
    into.extend(iter(stream.readline, ""))


def _stop(process: subprocess.Popen[str]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait_s)
            return
