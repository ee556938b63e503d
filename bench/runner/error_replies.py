"""Phases whose replies are mostly errors: the load generator counts an error reply as an
operation, so such a phase's rate is not its workload's (Kafka answers UNKNOWN_TOPIC_OR_PARTITION
until a new topic reaches its metadata, and those quick replies would count as commits)."""

from __future__ import annotations

from typing import Any

from runner.common import log

# A few error replies are noise; more make the figure a different workload's.
MAX_ERROR_SHARE = 0.01


def error_replies(result: dict[str, Any]) -> str | None:
    """Why ``result`` (one of the generator's) counts as failed, or None: its replies carried
    error codes on more than ``MAX_ERROR_SHARE`` of its operations. Logs any error replies."""
    codes: dict[str, int] = result.get("errors") or {}
    errors = sum(codes.values())
    if not errors:
        return None
    ops = int(result.get("ops") or 0)
    why = f"{result.get('name')}: {errors:,} of {ops:,} replies carried error codes {codes}"
    log(f"  {why}")
    return why if errors > MAX_ERROR_SHARE * max(ops, 1) else None


def without_error_phases(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``results`` with each phase that ``error_replies`` fails replaced by a failed result
    (no figures, so tables show n/a, and the reason as its note); the original is kept under
    ``discarded``."""
    kept: list[dict[str, Any]] = []
    for result in results:
        why = error_replies(result)
        if why is None:
            kept.append(result)
            continue
        kept.append(
            {
                "name": result.get("name"),
                "done": False,
                "note": f"failed, error replies over {MAX_ERROR_SHARE:.0%} of operations: {why}",
                "discarded": result,
            }
        )
    return kept
