"""Reduce an ordered batch of records to one list of changes per table.

Storage is a state table, so within a batch only the last record per key matters. Reducing
first makes every key appear once, which lets the SQL backends run one bulk upsert and one
bulk delete per table in any order (and keeps PostgreSQL's ``ON CONFLICT DO UPDATE`` from
seeing a key twice). Records are keyed by their own ``table`` and ``key``.

One rule crosses tables: a tombstone of a parent row (a ``ConsumerGroupTombstone``) deletes
every child row of that parent (the group's ``consumer_members``). In the batch it cancels the
child records before it, so the remaining child records all come after its last tombstone:
backends run a table's ``wipes`` (delete every row of these parents) first, then its deletes
and upserts. A group id wiped and then upserted in one batch appears both in the members'
``wipes`` and in the groups' ``upserts``. Classic and consumer groups are separate tables,
so a ``GroupTombstone`` and a ``ConsumerGroupRecord`` of one id both apply.

A table with ``identity`` columns (topics) only updates a stored row of the same identity, so
a row deleted and then written again in one batch (a topic deleted and created anew) appears
in both ``deletes`` and ``upserts``: backends run deletes before upserts.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from storage.records import OffsetCommitRecord, Record
from storage.tables import BY_NAME, CHILDREN, STATE_TABLES, Table


@dataclass(slots=True)
class TableChanges:
    """What a batch does to one table; apply ``wipes`` first, then the rest in any order
    (each key appears once)."""

    table: Table[Any]
    wipes: list[Hashable] = field(default_factory=list)  # parent keys: delete all their rows
    deletes: list[Hashable] = field(default_factory=list)  # record keys
    upserts: list[Any] = field(default_factory=list)  # records of the table


@dataclass(slots=True)
class BatchPlan:
    # The tables the batch touches, in ``STATE_TABLES`` order.
    tables: list[TableChanges] = field(default_factory=list)
    # Every offset commit of the batch in order, superseded ones included (commit history).
    commits: list[OffsetCommitRecord] = field(default_factory=list)

    def changes(self, table: Table[Any]) -> TableChanges | None:
        return next((c for c in self.tables if c.table is table), None)


def plan_batch(records: Sequence[Record]) -> BatchPlan:
    last: dict[str, dict[Hashable, Record]] = {}  # table -> key -> last record (tombstones too)
    # Child tables: table -> parent key -> key -> last record, so a wipe drops a parent's at once.
    children: dict[str, dict[Hashable, dict[Hashable, Record]]] = {}
    wipes: dict[str, dict[Hashable, None]] = {}  # table -> ordered set of parent keys
    commits: list[OffsetCommitRecord] = []
    tombstoned: set[str] = set()  # the tables with a tombstone in the batch
    dropped: dict[str, set[Hashable]] = {}  # identity tables: keys with a tombstone in the batch
    kinds = _KINDS
    for r in records:
        name, tombstone, child_table = kinds.get(type(r)) or _kind_of(r)
        key = r.key
        if child_table:
            parent_key = key[0]  # type: ignore[index]  # child keys are tuples
            children.setdefault(name, {}).setdefault(parent_key, {})[key] = r
        else:
            rows = last.get(name)
            if rows is None:
                rows = last[name] = {}
            rows[key] = r
        if tombstone:
            tombstoned.add(name)
            if BY_NAME[name].identity:
                dropped.setdefault(name, set()).add(key)
            for child in CHILDREN[name]:
                wipes.setdefault(child.name, {})[key] = None
                children.get(child.name, {}).pop(key, None)  # superseded by the wipe
        elif name == _COMMITS:
            commits.append(r)  # type: ignore[arg-type]  # the upserts of offsets are commits

    plan = BatchPlan(commits=commits)
    for table in STATE_TABLES:
        name = table.name
        if name in children:
            reduced: dict[Hashable, Record] = {
                k: r for rows in children[name].values() for k, r in rows.items()
            }
        else:
            reduced = last.get(name, {})
        wiped = wipes.get(name, {})
        if not reduced and not wiped:
            continue
        changes = TableChanges(table, wipes=list(wiped))
        if name in tombstoned:
            for row_key, record in reduced.items():
                if kinds[type(record)][1]:
                    changes.deletes.append(row_key)
                else:
                    changes.upserts.append(record)
                    if row_key in dropped.get(name, ()):
                        changes.deletes.append(row_key)  # deleted, then created anew
        else:
            changes.upserts = list(reduced.values())
        plan.tables.append(changes)
    return plan


_COMMITS: Final = OffsetCommitRecord.table
# record type -> (table, is a tombstone, the table is a child table); filled on first sight.
_KINDS: dict[type, tuple[str, bool, bool]] = {}


def _kind_of(r: object) -> tuple[str, bool, bool]:
    name = getattr(type(r), "table", None)
    if not isinstance(name, str) or name not in BY_NAME or not hasattr(r, "key"):
        raise TypeError(f"not a storage record: {r!r}")
    tombstone = bool(getattr(r, "is_tombstone", False))
    kind = (name, tombstone, BY_NAME[name].parent is not None)
    _KINDS[type(r)] = kind
    return kind
