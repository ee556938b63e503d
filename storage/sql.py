"""The SQL both backends run, generated from the table descriptions in ``storage/tables.py``.

SQLite takes one row per parameter set (``executemany``); PostgreSQL takes whole columns as
arrays and expands them with ``unnest``, one round trip per statement whatever the batch size.
Every statement of a table comes from the same column list, so the dialects cannot drift apart.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from storage.tables import Column, Row, Table


@dataclass(frozen=True, slots=True)
class TableSql:
    select: str  # every written column, in table order
    upsert: str  # insert, or update the non-key columns of the row with the same key
    delete: str  # by key
    wipe: str  # every row whose first key column matches (the children of a parent row)
    insert: str  # plain insert, rows kept in the order given (the append-only history)


def _names(columns: Iterable[Column]) -> str:
    return ", ".join(c.name for c in columns)


def _on_conflict(table: Table[Any], excluded: str) -> str:
    keyed = ", ".join(table.key)
    updates = [c.name for c in table.written if c.name not in table.key]
    if not updates:
        return f"ON CONFLICT ({keyed}) DO NOTHING"
    assignments = ",\n    ".join(f"{name} = {excluded}.{name}" for name in updates)
    same = " AND ".join(f"{table.name}.{name} = {excluded}.{name}" for name in table.identity)
    guard = f"\nWHERE {same}" if same else ""
    return f"ON CONFLICT ({keyed}) DO UPDATE SET\n    {assignments}{guard}"


@functools.cache
def sqlite_sql(table: Table[Any]) -> TableSql:
    columns = _names(table.written)
    values = ", ".join("?" for _ in table.written)
    insert = f"INSERT INTO {table.name} ({columns})\nVALUES ({values})"
    return TableSql(
        select=f"SELECT {columns} FROM {table.name}",
        upsert=f"{insert}\n{_on_conflict(table, 'excluded')}",
        delete=f"DELETE FROM {table.name} WHERE " + " AND ".join(f"{k} = ?" for k in table.key),
        wipe=f"DELETE FROM {table.name} WHERE {table.key[0]} = ?",
        insert=insert,
    )


@functools.cache
def postgres_sql(table: Table[Any]) -> TableSql:
    columns = _names(table.written)
    arrays = ", ".join(f"${i}::{c.type.postgres_array}" for i, c in enumerate(table.written, start=1))
    key_columns = [c for c in table.columns if c.name in table.key]
    if len(key_columns) == 1:
        (k,) = key_columns
        delete = f"DELETE FROM {table.name} WHERE {k.name} = ANY($1::{k.type.postgres_array})"
    else:
        key_arrays = ", ".join(f"${i}::{c.type.postgres_array}" for i, c in enumerate(key_columns, start=1))
        matches = " AND ".join(f"t.{c.name} = d.{c.name}" for c in key_columns)
        delete = (
            f"DELETE FROM {table.name} AS t\nUSING unnest({key_arrays}) AS d ({_names(key_columns)})\n"
            f"WHERE {matches}"
        )
    first = key_columns[0]
    qualified = ", ".join(f"u.{c.name}" for c in table.written)
    return TableSql(
        select=f"SELECT {columns} FROM {table.name}",
        upsert=(
            f"INSERT INTO {table.name} ({columns})\nSELECT * FROM unnest({arrays})\n{_on_conflict(table, 'EXCLUDED')}"
        ),
        delete=delete,
        wipe=f"DELETE FROM {table.name} WHERE {first.name} = ANY($1::{first.type.postgres_array})",
        insert=(
            f"INSERT INTO {table.name} ({columns})\nSELECT {qualified}\n"
            f"FROM unnest({arrays}) WITH ORDINALITY AS u ({columns}, row_number)\nORDER BY row_number"
        ),
    )


def postgres_columns(columns: Sequence[Column], rows: Sequence[Row]) -> tuple[Sequence[Any], ...]:
    """Rows (non-empty) as one array argument per column, client text as UTF-8 bytes."""
    arrays: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for i, column in enumerate(columns):
        if column.type.postgres_utf8_bytes:
            arrays[i] = [None if v is None else v.encode() for v in arrays[i]]
    return tuple(arrays)


def postgres_key_columns(table: Table[Any], keys: Sequence[Hashable]) -> tuple[Sequence[Any], ...]:
    key_columns = [c for c in table.columns if c.name in table.key]
    return postgres_columns(key_columns, [table.key_values(k) for k in keys])


def _values(*values: Any) -> tuple[Any, ...]:
    return values


def postgres_reader(table: Table[Any], keep_rows: bool = False) -> Callable[[Sequence[Any]], Any]:
    """Turns a fetched PostgreSQL row into the table's record, or with ``keep_rows`` into a
    tuple of its values (the record's fields in order)."""
    from_row = _values if keep_rows else table.from_row
    utf8 = [i for i, c in enumerate(table.written) if c.type.postgres_utf8_bytes]
    if not utf8:
        return lambda row: from_row(*row)

    def read(row: Sequence[Any]) -> Any:
        values = list(row)
        for i in utf8:
            if values[i] is not None:
                values[i] = values[i].decode()
        return from_row(*values)

    return read
