"""A real server and its SQLite file: the cluster id is formatted once, answered in Metadata and
DescribeCluster, and a database emptied, replaced or belonging to another cluster id refuses to
start until --init."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.metadata import MetadataRequest
from storage.schema import load_migrations, split_sqlite_script
from tests.support.server import REPO, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration


def _stored(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT cluster_id FROM cluster")]


def _answered(storage: str, extra: dict[str, str] | None = None, *flags: str) -> tuple[str, str]:
    with running_server(storage, extra, flags) as server, WireClient(server.bootstrap) as client:
        metadata = client.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
        described = client.request(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest())
    return metadata.cluster_id, described.cluster_id


def _refused(storage: str, *extra: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    done = subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", "0",
         "--storage", storage, *extra],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("coordinator: cannot start: ")
    assert "listening" not in done.stderr  # refused before any port opened
    return last


def test_formatted_once_then_answered_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    storage = f"sqlite:///{path}"
    first = _answered(storage)
    (stored,) = _stored(path)
    assert first == (stored, stored) and len(stored) == 22
    assert _answered(storage) == (stored, stored)  # a restart keeps it
    refusal = _refused(storage, "--cluster-id", "other")
    assert f"belongs to cluster {stored}, but cluster.id is other" in refusal and "--init" in refusal
    assert _answered(storage, {"cluster-id": "other"}, "--init") == ("other", "other")
    assert _stored(path) == ["other"]


def test_an_emptied_or_replaced_database_needs_init(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    storage = f"sqlite:///{path}"
    _answered(storage)
    with sqlite3.connect(path) as conn:  # a committed offset stays, the cluster row goes
        conn.execute("DELETE FROM cluster")
        conn.execute(
            "INSERT INTO offsets (group_id, topic, partition, committed_offset, leader_epoch, metadata, "
            "commit_ms, expire_ms) VALUES ('g', 't', 0, 5, -1, '', 1, NULL)"
        )
    assert "has no cluster id although it is not new" in _refused(storage)
    (stored, _) = _answered(storage, None, "--init")
    assert _stored(path) == [stored]
    path.unlink()
    path.write_bytes(b"")  # replaced by an empty file
    assert "the database existed but had no schema" in _refused(storage)


def test_a_database_from_before_cluster_ids_is_adopted(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    storage = f"sqlite:///{path}"
    # As the schema before the cluster table left it: every older migration applied, none after.
    migrations = load_migrations("sqlite")
    [cluster] = [m.version for m in migrations if m.name == "cluster"]
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
        )
        for migration in migrations:
            if migration.version < cluster:
                for statement in split_sqlite_script(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version VALUES (?, ?, 0)", (migration.version, migration.name)
                )
    (adopted, _) = _answered(storage)
    assert _stored(path) == [adopted]
