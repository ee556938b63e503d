"""Paths, CPU pinning and logging shared by the benchmark runner."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
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
LOADED = re.compile(
    r"loaded \d+ topics, (\d+) (?:classic )?groups(?:, \d+ consumer groups)? and (\d+) offsets"
)
PG_BIN = Path("/usr/lib/postgresql/15/bin")
DASH = "\u2013"
TIMES = "\u00d7"

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
