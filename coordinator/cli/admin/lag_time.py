"""Lag in seconds and the Burrow-style lag status of a group, from the coordinator's HTTP API.

The Kafka protocol carries committed offsets and log ends but no times, and one ListOffsets
answer cannot tell how long ago a committed offset was the log end. The coordinator's lag
sampler keeps a table of log ends over time (gateway mode) and estimates the seconds from it;
`groups describe --http` reads that estimate instead of guessing from two samples of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coordinator.cli.admin.client import TP
from coordinator.cli.admin.http_api import HttpApiError, get_json, group_url


@dataclass(slots=True)
class PartitionTime:
    lag_seconds: float | None
    status: str | None


@dataclass(slots=True)
class GroupTime:
    """What the server's sampler knows of one group; ``unavailable`` says why it knows nothing."""

    status: str | None = None
    max_lag_seconds: float | None = None
    partitions: dict[TP, PartitionTime] = field(default_factory=dict)
    unavailable: str | None = None
    # Offsets committed in transactions whose outcome the coordinator does not know yet, as the
    # HTTP API lists them (docs/transactions.md): an operator's view of a stuck transaction.
    pending_transactional: list[dict[str, Any]] = field(default_factory=list)


def group_time(http: str, group: str, timeout: float) -> GroupTime:
    """The server's lag figures of a group (HttpApiError if its HTTP port cannot answer)."""
    try:
        view = get_json(group_url(http, group), timeout)
    except HttpApiError as exc:
        if exc.status == 404:
            return GroupTime(
                unavailable=f"the coordinator at {http} has no lag figures for this group ({exc})"
            )
        raise
    return _from_view(view)


def _from_view(view: dict[str, Any]) -> GroupTime:
    pending = [row for row in view.get("pending_transactional_offsets") or [] if isinstance(row, dict)]
    lag = view.get("lag")
    if not isinstance(lag, dict):
        reason = view.get("lag_unavailable_reason") or "the coordinator has not sampled this group's lag"
        return GroupTime(unavailable=str(reason), pending_transactional=pending)
    partitions = {
        TP(row["topic"], row["partition"]): PartitionTime(row.get("lag_seconds"), row.get("status"))
        for row in view.get("offsets", [])
        if row.get("status") is not None
    }
    return GroupTime(lag.get("status"), lag.get("max_lag_seconds"), partitions, None, pending)


def seconds_cell(value: float | None) -> str | None:
    """Lag in seconds for a table: one decimal, None (shown '-') when unknown."""
    return None if value is None else f"{value:.1f}"
