"""The rules for the stored cluster id at start (coordinator/server/cluster_identity.py)."""

from __future__ import annotations

import re

import pytest

from coordinator.server.cluster_identity import (
    CLUSTER_TABLE_VERSION,
    ClusterIdError,
    new_cluster_id,
    settle_cluster_id,
)
from storage.records import ClusterRecord, ClusterTombstone, StoredIdentity

NEW = StoredIdentity([], created=True, schema_version_at_open=0)
OLD_SCHEMA = StoredIdentity([], created=False, schema_version_at_open=CLUSTER_TABLE_VERSION - 1)
EMPTIED = StoredIdentity([], created=False, schema_version_at_open=CLUSTER_TABLE_VERSION, has_state=True)
# Created by `coordinator users add` before the first start: schema, maybe users, no state.
NEVER_SERVED = StoredIdentity([], created=False, schema_version_at_open=CLUSTER_TABLE_VERSION)
REPLACED = StoredIdentity([], created=False, schema_version_at_open=0)  # a file without a schema
KNOWN = StoredIdentity([ClusterRecord("abc", 1)], created=False, schema_version_at_open=CLUSTER_TABLE_VERSION)


def test_kafka_style_ids() -> None:
    ids = {new_cluster_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id) for cluster_id in ids)


def test_a_new_database_is_formatted_with_the_setting_or_a_fresh_id() -> None:
    identity = settle_cluster_id(NEW, "", False, "x", 42, new_id=lambda: "generated")
    assert (identity.cluster_id, identity.records) == ("generated", [ClusterRecord("generated", 42)])
    assert identity.action == "formatted (new database)"
    assert settle_cluster_id(NEW, "mine", False, "x", 42).records == [ClusterRecord("mine", 42)]


def test_a_database_never_served_is_formatted() -> None:
    identity = settle_cluster_id(NEVER_SERVED, "", False, "x", 42, new_id=lambda: "generated")
    assert (identity.records, identity.action) == (
        [ClusterRecord("generated", 42)],
        "formatted (new database)",
    )


def test_a_database_from_before_cluster_ids_is_adopted() -> None:
    identity = settle_cluster_id(OLD_SCHEMA, "", False, "x", 42, new_id=lambda: "generated")
    assert identity.records == [ClusterRecord("generated", 42)]
    assert "predates" in identity.action


def test_a_stored_id_is_served_and_checked() -> None:
    for configured in ("", "abc"):
        identity = settle_cluster_id(KNOWN, configured, False, "x", 42)
        assert (identity.cluster_id, identity.records, identity.action) == ("abc", [], "")
    with pytest.raises(ClusterIdError, match=re.escape("belongs to cluster abc, but cluster.id is other")):
        settle_cluster_id(KNOWN, "other", False, "sqlite:///c.db", 42)
    relabelled = settle_cluster_id(KNOWN, "other", True, "x", 42)
    assert relabelled.records == [ClusterTombstone("abc"), ClusterRecord("other", 42)]
    assert relabelled.action == "re-labelled from abc (--init)"


@pytest.mark.parametrize(
    ("state", "why"),
    [
        (EMPTIED, "it holds topics, groups or offsets but its cluster table is empty"),
        (REPLACED, "the database existed but had no schema"),
    ],
)
def test_an_emptied_or_replaced_database_needs_init(state: StoredIdentity, why: str) -> None:
    with pytest.raises(ClusterIdError, match=re.escape(f"has no cluster id although it is not new ({why})")):
        settle_cluster_id(state, "", False, "sqlite:///c.db", 42)
    identity = settle_cluster_id(state, "", True, "x", 42, new_id=lambda: "generated")
    assert (identity.records, identity.action) == ([ClusterRecord("generated", 42)], "formatted (--init)")
