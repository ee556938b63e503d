"""The benchmark's check that a phase's figure is not mostly error replies (bench/runner)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from runner.error_replies import error_replies, without_error_phases


def test_a_phase_with_few_error_replies_keeps_its_figures() -> None:
    result = {"name": "commit-simple-1p", "ops": 10_000, "rate": 2000.0, "errors": {"3": 100}}
    assert error_replies(result) is None
    assert without_error_phases([result]) == [result]


def test_a_phase_mostly_error_replies_fails_without_figures() -> None:
    result = {"name": "commit-simple-1p", "ops": 10_000, "rate": 2000.0, "errors": {"3": 101}}
    why = error_replies(result)
    assert why == "commit-simple-1p: 101 of 10,000 replies carried error codes {'3': 101}"
    (failed,) = without_error_phases([result])
    assert failed["done"] is False
    assert "rate" not in failed and "ops" not in failed
    assert why in failed["note"]
    assert failed["discarded"] is result


def test_a_phase_without_errors_passes() -> None:
    assert error_replies({"name": "fetch-1p", "ops": 5, "rate": 1.0}) is None
