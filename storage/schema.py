"""Versioned schema migrations shipped as ``storage/migrations/<dialect>/NNN_name.sql``.

Each backend records applied versions in a ``schema_version`` table and, on open, applies the
missing ones in order, each in its own transaction together with its ``schema_version`` row.
Migrations are append-only: never edit a released file, add the next number.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from typing import Final, Literal

Dialect = Literal["sqlite", "postgres"]

_FILE_NAME: Final = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


@functools.cache
def load_migrations(dialect: Dialect) -> tuple[Migration, ...]:
    """The dialect's migrations ordered by version; versions must run 1, 2, 3, ... ."""
    folder = resources.files("storage").joinpath("migrations", dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match is None:
            continue
        found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise RuntimeError(
                f"{dialect} migrations must be numbered 001, 002, ... without gaps; "
                f"found {migration.version:03d}_{migration.name}.sql where {expected:03d} was expected"
            )
    if not found:
        raise RuntimeError(f"no {dialect} migrations found in {folder}")
    return tuple(found)


def split_sqlite_script(script: str) -> list[str]:
    """Split a script into single statements (``sqlite3`` executes one at a time).

    ``sqlite3.complete_statement`` knows about string literals, comments and trigger bodies,
    so a ``;`` inside any of them does not end a statement.
    """
    statements: list[str] = []
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if _has_code(pending):
                statements.append(pending.strip())
            pending = ""
    if _has_code(pending.rstrip(";")):
        raise ValueError(f"incomplete SQL statement at the end of the script: {pending.strip()!r}")
    return statements


def _has_code(sql: str) -> bool:
    for line in sql.splitlines():
        code = line.split("--", 1)[0].strip().strip(";").strip()
        if code:
            return True
    return False
