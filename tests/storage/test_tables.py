"""The table descriptions: they match the migrated schemas, and every record maps onto them."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from storage.codec import CodecError
from storage.postgres import PostgresStore
from storage.records import (
    AclRecord,
    AclTombstone,
    ConsumerGroupTombstone,
    ConsumerMemberTombstone,
    GroupTombstone,
    OffsetTombstone,
    Record,
    TopicTombstone,
    UserCredentialRecord,
    UserCredentialTombstone,
)
from storage.sql import postgres_sql, sqlite_sql
from storage.sqlite import SQLiteStore
from storage.tables import (
    BY_NAME,
    CONSUMER_MEMBERS,
    GROUP_EVENTS,
    OFFSET_COMMIT_HISTORY,
    STATE_TABLES,
    Table,
    consumer_member_row,
)
from tests.storage.helpers import consumer_group, consumer_member, group, member, offset, topic

DESCRIBED = {t.name: t for t in (*STATE_TABLES, OFFSET_COMMIT_HISTORY, GROUP_EVENTS)}
# (column, type, nullable) in table order, and the primary key columns in key order.
Shape = tuple[list[tuple[str, str, bool]], list[str]]


def described(dialect: str) -> dict[str, Shape]:
    return {
        t.name: (
            [
                (c.name, c.type.sqlite if dialect == "sqlite" else c.type.postgres, c.nullable)
                for c in t.columns
            ],
            list(t.key),
        )
        for t in DESCRIBED.values()
    }


@pytest.mark.asyncio
async def test_the_description_is_the_migrated_sqlite_schema(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.open()
    await store.close()
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        names = [
            name
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            if name not in ("schema_version", "sqlite_sequence")
        ]
        actual: dict[str, Shape] = {}
        for name in names:
            info = conn.execute(f"PRAGMA table_info({name})").fetchall()
            columns = [(col, kind, not (notnull or pk)) for _, col, kind, notnull, _, pk in info]
            key = [col for _, col, _, _, _, pk in sorted(info, key=lambda i: i[5]) if pk]
            actual[name] = (columns, key)
    finally:
        conn.close()
    assert actual == described("sqlite")


@pytest.mark.asyncio
@pytest.mark.postgres
async def test_the_description_is_the_migrated_postgres_schema(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    await store.open()
    await store.close()
    conn = await asyncpg.connect(pg_dsn)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name <> 'schema_version' "
            "ORDER BY table_name, ordinal_position"
        )
        actual: dict[str, Shape] = {}
        for r in rows:
            actual.setdefault(r["table_name"], ([], []))[0].append(
                (r["column_name"], r["data_type"], r["is_nullable"] == "YES")
            )
        for name, (_, key) in actual.items():
            key.extend(
                await conn.fetchval(
                    "SELECT array_agg(a.attname::text ORDER BY array_position(i.indkey::int2[], a.attnum)) "
                    "FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                    "WHERE i.indrelid = $1::regclass AND i.indisprimary",
                    name,
                )
            )
    finally:
        await conn.close()
    assert actual == described("postgres")


def sample_records() -> list[Record]:
    acl = AclRecord(3, "g", 3, "User:a", "*", 3, 3)
    credential = UserCredentialRecord("alice", "SCRAM-SHA-256", b"s", b"k", b"v", 4096)
    return [
        offset(),
        OffsetTombstone("g", "t", 0),
        group(members=(member(),)),
        GroupTombstone("g"),
        topic(configs=(("cleanup.policy", "compact"), ("x", None))),
        TopicTombstone("t"),
        credential,
        UserCredentialTombstone("alice", "SCRAM-SHA-256"),
        acl,
        AclTombstone(acl),
        consumer_group(),
        ConsumerGroupTombstone("cg"),
        consumer_member(instance_id="i", pending_revocation=(("u", (3,)),)),
        ConsumerMemberTombstone("cg", "cm-1"),
    ]


@pytest.mark.parametrize("record", sample_records(), ids=lambda r: type(r).__name__)
def test_every_record_names_a_described_table_and_its_key_is_the_key_columns(record: Record) -> None:
    table: Table[Any] = BY_NAME[record.table]
    key_values = table.key_values(record.key)
    assert len(key_values) == len(table.key)
    if not record.is_tombstone:
        row = table.to_row(record)
        assert len(row) == len(table.written)
        assert row[: len(table.key)] == key_values
        assert table.from_row(*row) == record


def test_a_tombstone_has_the_key_of_the_row_it_deletes() -> None:
    records = sample_records()
    for upsert, tombstone in zip(records[::2], records[1::2], strict=True):
        assert (upsert.table, upsert.key) == (tombstone.table, tombstone.key)
        rows: dict[Any, Any] = {}
        assert upsert.apply_to(rows) is None and rows == {upsert.key: upsert}
        assert tombstone.apply_to(rows) == upsert and rows == {}


def test_a_corrupt_consumer_member_row_names_the_member() -> None:
    row = list(consumer_member_row(consumer_member()))
    row[-1] = b"\x01"
    with pytest.raises(CodecError, match="'cm-1' of group 'cg'"):
        CONSUMER_MEMBERS.from_row(*row)


@pytest.mark.parametrize("table", STATE_TABLES, ids=lambda t: t.name)
def test_an_upsert_replaces_every_non_key_column_in_both_dialects(table: Table[Any]) -> None:
    non_key = [c.name for c in table.written if c.name not in table.key]
    for sql in (sqlite_sql(table).upsert, postgres_sql(table).upsert):
        assert f"ON CONFLICT ({', '.join(table.key)})" in sql
        updated = re.findall(r"(\w+) = (?:excluded|EXCLUDED)\.(\w+)", sql)
        assert updated == [(name, name) for name in non_key]
        assert ("DO NOTHING" in sql) == (not non_key)
