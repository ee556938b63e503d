"""Migration files and the SQLite script splitter."""

from __future__ import annotations

import sqlite3

import pytest

from storage.schema import load_migrations, split_sqlite_script


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_migrations_are_numbered_from_one(dialect: str) -> None:
    migrations = load_migrations(dialect)
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert all(m.sql.strip() for m in migrations)


def test_both_dialects_have_the_same_migrations() -> None:
    assert [m.name for m in load_migrations("sqlite")] == [m.name for m in load_migrations("postgres")]


def test_split_handles_semicolons_in_strings_comments_and_triggers() -> None:
    script = """
    -- a comment; with a semicolon
    CREATE TABLE a (x TEXT DEFAULT ';');
    CREATE TABLE b (y INTEGER); CREATE TABLE c (z INTEGER);
    CREATE TRIGGER t AFTER INSERT ON b BEGIN INSERT INTO c VALUES (1); INSERT INTO c VALUES (2); END;
    -- trailing comment
    """
    statements = split_sqlite_script(script)
    assert len(statements) == 4
    conn = sqlite3.connect(":memory:")
    try:
        for s in statements:
            conn.execute(s)
        conn.execute("INSERT INTO b VALUES (1)")
        assert conn.execute("SELECT count(*) FROM c").fetchone() == (2,)
    finally:
        conn.close()


def test_split_rejects_an_unfinished_statement() -> None:
    with pytest.raises(ValueError, match="incomplete"):
        split_sqlite_script("CREATE TABLE a (x TEXT); CREATE TABLE b (y TEXT DEFAULT 'open)")
