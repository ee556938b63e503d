"""How a database is served, recorded at its first start and checked at every start.

A standalone server's database holds its own topic catalog and the groups of its own clients; a
gateway's holds the groups of an upstream cluster's clients and mirrors that cluster's topics.
Starting a gateway on a standalone server's ``./coordinator.db`` (or the reverse, or a gateway
in front of another cluster) would silently serve the old groups and topics as if they belonged
there. So storage holds one ``serving_mode`` row (``standalone``, or ``gateway`` with the
upstream bootstrap servers) and the rules are:

* **No row** (a new database, or one from before the row existed): the current mode is recorded.
* **The same mode** (and, for a gateway, the same upstream): nothing to do.
* **Another mode or upstream refuses to start**, saying what the database was served as and
  how to go ahead, unless ``--allow-mode-change`` is given, which records the new mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.records import Record, ServingModeRecord, ServingModeTombstone, StoredIdentity

STANDALONE = "standalone"
GATEWAY = "gateway"


class ServingModeError(ValueError):
    """The database was served in another mode (or in front of another upstream)."""


@dataclass(slots=True)
class ServingMode:
    records: list[Record] = field(default_factory=list)  # to write before serving
    action: str = ""  # what was done, for the start-up log; empty when the mode was just checked


def describe(mode: str, upstream: str) -> str:
    return f"a gateway in front of {upstream}" if mode == GATEWAY else "a standalone coordinator"


def normalized_upstream(bootstrap_servers: str) -> str:
    """The upstream's bootstrap servers as recorded: comma-separated, blanks dropped, in order."""
    return ",".join(part.strip() for part in bootstrap_servers.split(",") if part.strip())


def settle_serving_mode(
    state: StoredIdentity, upstream_bootstrap: str, allow_change: bool, where: str, now_wall_ms: int
) -> ServingMode:
    """Check the recorded mode against this start's (gateway when ``upstream_bootstrap`` is set);
    the records that make storage hold this start's mode, or ServingModeError."""
    upstream = normalized_upstream(upstream_bootstrap)
    mode = GATEWAY if upstream else STANDALONE
    current = ServingModeRecord(mode, upstream, now_wall_ms)
    stored = state.serving_mode
    if not stored:
        return ServingMode([current], f"recorded: served as {describe(mode, upstream)}")
    if len(stored) == 1 and (stored[0].mode, stored[0].upstream) == (mode, upstream):
        return ServingMode()
    was = " and ".join(describe(s.mode, s.upstream) for s in stored)
    if not allow_change:
        raise ServingModeError(
            f"storage {where} was served as {was}, and this start is {describe(mode, upstream)}: its "
            "groups, offsets and topics would be served as if they belonged here. Use another database "
            "(--storage), or start once with --allow-mode-change to serve this one in the new mode"
        )
    records: list[Record] = [ServingModeTombstone(s.mode) for s in stored if s.mode != mode]
    records.append(current)
    return ServingMode(records, f"changed (--allow-mode-change): was {was}, now {describe(mode, upstream)}")
