"""In-memory backend for tests and simulation, with latency and failure injection.

Semantics match the SQL backends: records apply themselves to one mapping per table of
``storage/tables.py``, and each row is checked against that table's column description (int
widths, text, bytes, nullability, partition >= 0, 16-byte topic ids), so a batch one backend
rejects the others reject too. The data lives in a ``MemoryData`` object that outlives the store: pass it to a new
``MemoryStore`` to "reopen" the same database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from storage.base import StoreError
from storage.codec import CodecError
from storage.records import (
    GroupEventRecord,
    GroupMetadataRecord,
    LoadedState,
    OffsetCommitRecord,
    OffsetKey,
    Record,
    StoredIdentity,
    TopicRecord,
    UserCredentialRecord,
)
from storage.schema import load_migrations
from storage.tables import (
    BLOB,
    BY_NAME,
    CHILDREN,
    CLIENT_TEXT,
    CLUSTER,
    GROUP_TABLES,
    INT32,
    INT64,
    SERVED_STATE_TABLES,
    SERVING_MODE,
    STATE_TABLES,
    TEXT,
    UNSHARDED_TABLES,
    USER_CREDENTIALS,
    Column,
    Table,
    loaded_state,
)

# The memory store has no migrations; an opened one counts as fully migrated.
SCHEMA_VERSION: Final = len(load_migrations("sqlite"))

_RANGES: Final = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}


def _empty_tables() -> dict[str, dict[Any, Any]]:
    return {table.name: {} for table in STATE_TABLES}


@dataclass(slots=True)
class MemoryData:
    # table name -> record key -> record, for every table of storage/tables.py
    tables: dict[str, dict[Any, Any]] = field(default_factory=_empty_tables)
    history: list[OffsetCommitRecord] = field(default_factory=list)
    opened: bool = False  # a store opened it before: it is no longer a brand-new database
    events: list[GroupEventRecord] = field(default_factory=list)

    @property
    def offsets(self) -> dict[OffsetKey, OffsetCommitRecord]:
        return self.tables[OffsetCommitRecord.table]

    @property
    def groups(self) -> dict[str, GroupMetadataRecord]:
        return self.tables[GroupMetadataRecord.table]

    @property
    def topics(self) -> dict[str, TopicRecord]:
        return self.tables[TopicRecord.table]


class MemoryStore:
    def __init__(
        self,
        data: MemoryData | None = None,
        *,
        latency_ms: float = 0.0,
        history: bool = False,
    ) -> None:
        """``latency_ms``: artificial delay of every ``write`` (before it lands).
        ``history``: also append every offset commit to ``data.history``."""
        self.data = data if data is not None else MemoryData()
        self.latency_ms = latency_ms
        self.history = history
        # Failure injection: while ``broken`` every call raises StoreError; otherwise the
        # next ``fail_next_writes(n)`` writes raise it.
        self.broken = False
        self._fail_writes = 0
        # Observability for tests.
        self.write_calls = 0
        self.batch_sizes: list[int] = []
        self._opened = False
        self._created = True
        self._closed = False

    def fail_next_writes(self, n: int = 1) -> None:
        self._fail_writes += n

    async def open(self) -> None:
        if self._closed:
            raise StoreError("MemoryStore is closed")
        if self.broken:
            raise StoreError("MemoryStore is broken (injected)")
        self._opened = True
        self._created = not self.data.opened
        self.data.opened = True

    async def load(self) -> LoadedState:
        self._check_usable()
        return loaded_state({name: list(rows.values()) for name, rows in self.data.tables.items()})

    async def load_unsharded(self) -> LoadedState:
        """Topics, credentials, ACLs and the cluster id (the group lists are empty)."""
        self._check_usable()
        return self._rows(UNSHARDED_TABLES, lambda _record: True)

    async def group_ids(self) -> list[str]:
        """Every group id with a row in any group table."""
        self._check_usable()
        return list({r.group_id for table in GROUP_TABLES for r in self.data.tables[table.name].values()})

    async def load_groups(self, group_ids: Collection[str]) -> LoadedState:
        """The rows of exactly these groups in every group table (the other lists are empty)."""
        self._check_usable()
        wanted = frozenset(group_ids)
        return self._rows(GROUP_TABLES, lambda record: record.group_id in wanted)

    def _rows(self, tables: tuple[Table[Any], ...], keep: Callable[[Any], bool]) -> LoadedState:
        rows: dict[str, list[Any]] = {table.name: [] for table in STATE_TABLES}
        for table in tables:
            rows[table.name] = [r for r in self.data.tables[table.name].values() if keep(r)]
        return loaded_state(rows)

    async def load_identity(self) -> StoredIdentity:
        self._check_usable()
        cluster = list(self.data.tables[CLUSTER.name].values())
        has_state = any(self.data.tables[table.name] for table in SERVED_STATE_TABLES)
        serving_mode = list(self.data.tables[SERVING_MODE.name].values())
        version = 0 if self._created else SCHEMA_VERSION
        return StoredIdentity(cluster, self._created, version, has_state, serving_mode)

    async def load_credentials(self, user: str | None = None) -> list[UserCredentialRecord]:
        self._check_usable()
        credentials: list[UserCredentialRecord] = list(self.data.tables[USER_CREDENTIALS.name].values())
        return [c for c in credentials if user is None or c.user == user]

    async def write(self, records: Sequence[Record]) -> None:
        self._check_usable()
        self.write_calls += 1
        self.batch_sizes.append(len(records))
        # Decided when the write starts, like a real backend that fails mid-transaction.
        fail = self._fail_writes > 0
        if fail:
            self._fail_writes -= 1
        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000)
        if fail or self.broken:
            raise StoreError("injected write failure")
        for record in records:
            _validate(record)
        self._apply(records)

    async def append_events(self, events: Sequence[GroupEventRecord]) -> None:
        self._check_usable()
        if self.broken:
            raise StoreError("injected write failure")
        self.data.events.extend(events)

    async def load_events(self, per_group: int, since_ms: int = 0) -> list[GroupEventRecord]:
        self._check_usable()
        kept: list[GroupEventRecord] = []
        count: dict[str, int] = {}
        for event in reversed(self.data.events):  # newest first, as the SQL backends rank them
            if event.time_ms >= since_ms and count.get(event.group_id, 0) < per_group:
                count[event.group_id] = count.get(event.group_id, 0) + 1
                kept.append(event)
        return kept[::-1]

    async def prune_events(self, before_ms: int, keep_rows: int) -> None:
        self._check_usable()
        recent = [e for e in self.data.events if e.time_ms >= before_ms]
        self.data.events = recent[len(recent) - keep_rows :] if keep_rows < len(recent) else recent

    async def close(self) -> None:
        self._closed = True

    def _check_usable(self) -> None:
        if self._closed:
            raise StoreError("MemoryStore is closed")
        if not self._opened:
            raise StoreError("MemoryStore is not open")
        if self.broken:
            raise StoreError("MemoryStore is broken (injected)")

    def _apply(self, records: Sequence[Record]) -> None:
        tables = self.data.tables
        for r in records:
            rows = tables[r.table]
            if not r.is_tombstone and not _same_identity(r, rows.get(r.key)):
                continue  # the stored row stays (Table.identity: create if absent)
            r.apply_to(rows)
            if r.is_tombstone:
                # Scans the child rows: a parent's tombstone (a consumer group deleted) is rare.
                for child in CHILDREN[r.table]:
                    rows = tables[child.name]
                    for key in [k for k in rows if k[0] == r.key]:
                        del rows[key]
            elif self.history and type(r) is OffsetCommitRecord:
                self.data.history.append(r)


def _same_identity(r: Record, stored: object) -> bool:
    """Whether an upsert may replace ``stored``: no row yet, or the same identity columns."""
    if stored is None:
        return True
    return all(getattr(r, name) == getattr(stored, name) for name in BY_NAME[r.table].identity)


def _validate(r: Record) -> None:
    """Reject what the SQL schemas reject, before anything of the batch is applied."""
    checks = _CHECKS.get(getattr(r, "table", ""))
    if checks is None:
        raise TypeError(f"not a storage record: {r!r}")
    if r.is_tombstone:
        return
    table, ints, texts, others = checks
    try:
        row = table.to_row(r)
    except CodecError as exc:
        raise StoreError(f"cannot store {r!r}: {exc}") from exc
    problem: tuple[int, str] | None = None
    for i, low, high, nullable in ints:  # the common case, kept tight
        value = row[i]
        if value is None:
            if not nullable:
                problem = i, "must not be null"
                break
        elif not isinstance(value, int) or not low <= value <= high:
            problem = i, f"must be an int in {low}..{high}"
            break
    else:
        for i, nullable in texts:
            value = row[i]
            if not isinstance(value, str) and (value is not None or not nullable):
                problem = i, "must be a str"
                break
        else:
            for i, column in others:
                message = _column_problem(column, row[i])
                if message is not None:
                    problem = i, message
                    break
    if problem is not None:
        i, message = problem
        raise StoreError(f"cannot store {r!r}: {table.written[i].name} {message}")


def _column_problem(column: Column, value: object) -> str | None:
    if value is None:
        return None if column.nullable else "must not be null"
    if column.type is BLOB:
        if not isinstance(value, bytes):
            return "must be bytes"
        if column.length is not None and len(value) != column.length:
            return f"must be {column.length} bytes"
    elif not isinstance(value, str):
        return "must be a str"
    return None


def _checks(table: Table[Any]) -> _Checks:
    """The table's integer columns as (index, lowest, highest, nullable), its text columns as
    (index, nullable), its other columns."""
    ints: list[tuple[int, int, int, bool]] = []
    texts: list[tuple[int, bool]] = []
    others: list[tuple[int, Column]] = []
    for i, column in enumerate(table.written):
        bounds = _RANGES.get(column.type)
        if column.type in (TEXT, CLIENT_TEXT):
            texts.append((i, column.nullable))
        elif bounds is None:
            others.append((i, column))
        else:
            low = bounds[0] if column.minimum is None else max(bounds[0], column.minimum)
            ints.append((i, low, bounds[1], column.nullable))
    return table, ints, texts, others


_Checks = tuple[
    Table[Any], list[tuple[int, int, int, bool]], list[tuple[int, bool]], list[tuple[int, Column]]
]
_CHECKS: Final = {table.name: _checks(table) for table in STATE_TABLES}
