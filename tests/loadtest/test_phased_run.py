"""The per-phase bound of tests.support.phased_run: a run that stalls fails saying where."""

from __future__ import annotations

import os
import sys

import pytest

from tests.support.phased_run import Phase, run_in_phases
from tests.support.server import REPO

# Prints a line, then waits for a signal that never comes: a run stalled after its first step.
_STALLS = "import os, signal; print('step one done by', os.getpid(), flush=True); signal.pause()"


def test_a_stalled_phase_fails_naming_it_and_stops_the_command() -> None:
    phases = [
        Phase("step one", 60, lambda o: "step one done" in o.stdout),
        Phase("step two", 0.5),
    ]
    with pytest.raises(AssertionError) as failure:
        run_in_phases([sys.executable, "-c", _STALLS], phases, cwd=REPO, env=dict(os.environ))
    message = str(failure.value)
    assert "phase 2/2 (step two) took over 0 s" in message, message
    assert "phases passed: ['step one']" in message and "step one done" in message, message
    pid = int(message.split("step one done by ")[1].split()[0])
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(pid, 0)


def test_a_run_within_its_bounds_returns_its_output() -> None:
    phases = [Phase("printing", 60, lambda o: "out" in o.stdout), Phase("exiting", 60)]
    script = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    result = run_in_phases([sys.executable, "-c", script], phases, cwd=REPO, env=dict(os.environ))
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
