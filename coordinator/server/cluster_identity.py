"""The cluster id stored in the database, checked at every start (Kafka's meta.properties).

Kafka refuses to start on a log directory without ``meta.properties`` (never formatted) or with
another cluster's id. Here storage holds the id in its ``cluster`` table and the rules are:

* **A brand-new database is formatted at its first start**: the SQLite file did not exist, the
  PostgreSQL database has no schema yet, or a memory store. It gets ``cluster.id`` when that
  is set, else a fresh Kafka-style id (a random UUID in URL-safe base64, 22 characters). So
  the README's first command works on a fresh machine without a flag.
* **A database from before stored cluster ids** (its schema predates the ``cluster`` table)
  is adopted the same way, once.
* **A database never served yet is formatted too**: schema present, no cluster row, and no
  topic, group or offset (``coordinator users add`` on a new path creates the database first).
* **A database that should have an id but has none refuses to start** unless ``--init`` is
  given: it holds topics, groups or offsets but no cluster row (the row deleted, or tables
  copied without it), or the SQLite file existed without any schema (replaced by an empty file).
* **A stored id that differs from a set ``cluster.id`` refuses to start** (another cluster's
  database, or the wrong setting) unless ``--init`` is given, which re-labels the database.

What a server cannot tell: a SQLite file deleted while the server was down looks exactly like
a first start; the start-up WARNING "SQLite file ... does not exist" is then the only sign.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from storage.records import ClusterRecord, ClusterTombstone, Record, StoredIdentity
from storage.tables import CLUSTER

# The first schema version with the cluster table (storage/migrations/*/007_cluster.sql).
CLUSTER_TABLE_VERSION = 7


class ClusterIdError(ValueError):
    """The database's cluster id does not allow this start (see the module's rules)."""


@dataclass(slots=True)
class ClusterIdentity:
    cluster_id: str
    records: list[Record] = field(default_factory=list)  # to write before serving (format, re-label)
    action: str = ""  # what was done, for the start-up log; empty when the id was just checked


def new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes, URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def settle_cluster_id(
    state: StoredIdentity,
    configured: str,
    init: bool,
    where: str,
    now_wall_ms: int,
    new_id: Callable[[], str] = new_cluster_id,
) -> ClusterIdentity:
    """The cluster id to serve under, and the records that make storage hold it."""
    stored = [record.cluster_id for record in state.cluster]
    if len(stored) == 1 and (not configured or configured == stored[0]):
        return ClusterIdentity(stored[0])
    if stored and not init:
        if len(stored) > 1:
            raise ClusterIdError(
                f"storage {where} holds several cluster ids ({', '.join(sorted(stored))}); "
                "start once with --init (and cluster.id set) to keep one"
            )
        raise ClusterIdError(
            f"storage {where} belongs to cluster {stored[0]}, but cluster.id is {configured}: set "
            f"cluster.id={stored[0]} (or leave it unset), or start once with --init to re-label the database"
        )
    if not stored and not init and not _formats_itself(state):
        raise ClusterIdError(
            f"storage {where} has no cluster id although it is not new ({_why_not_new(state)}): "
            "it may have been emptied or replaced. Refusing to start on it as if nothing happened; "
            "if this is intended, start once with --init to format it"
        )
    cluster_id = configured or (stored[0] if len(stored) == 1 else new_id())
    records: list[Record] = [ClusterTombstone(old) for old in stored if old != cluster_id]
    records.append(ClusterRecord(cluster_id, now_wall_ms))
    if stored:
        action = f"re-labelled from {', '.join(sorted(stored))} (--init)"
    elif init and not _formats_itself(state):
        action = "formatted (--init)"
    elif state.created or (state.schema_version_at_open >= CLUSTER_TABLE_VERSION and not state.has_state):
        action = "formatted (new database)"
    else:
        action = "recorded (the database predates stored cluster ids)"
    return ClusterIdentity(cluster_id, records, action)


def _formats_itself(state: StoredIdentity) -> bool:
    if state.created or 0 < state.schema_version_at_open < CLUSTER_TABLE_VERSION:
        return True
    return state.schema_version_at_open > 0 and not state.has_state  # never served yet


def _why_not_new(state: StoredIdentity) -> str:
    if state.schema_version_at_open == 0:
        return "the database existed but had no schema"
    return f"it holds topics, groups or offsets but its {CLUSTER.name} table is empty"
