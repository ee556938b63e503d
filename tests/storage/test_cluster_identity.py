"""Every backend stores the cluster id row and tells whether an open created the database."""

from __future__ import annotations

import pytest

from storage.base import StoreError
from storage.records import ClusterRecord, ClusterTombstone
from storage.schema import load_migrations
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio

LATEST = len(load_migrations("sqlite"))


async def test_a_new_database_then_a_reopened_one(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    identity = await first.load_identity()
    assert (identity.cluster, identity.created, identity.schema_version_at_open) == ([], True, 0)
    assert not identity.has_state
    await first.write([ClusterRecord("abc", 1), offset()])
    await first.close()
    second = await store_factory.opened()
    identity = await second.load_identity()
    assert (identity.cluster, identity.created, identity.schema_version_at_open) == (
        [ClusterRecord("abc", 1)], False, LATEST,
    )  # fmt: skip
    assert identity.has_state
    assert (await second.load()).cluster == [ClusterRecord("abc", 1)]
    await second.write([ClusterTombstone("abc"), ClusterRecord("xyz", 2)])
    assert (await second.load_identity()).cluster == [ClusterRecord("xyz", 2)]


# Only PostgreSQL is shared by several processes (SQLite is one process per file).
@pytest.mark.parametrize("store_factory", ["postgres"], indirect=True)
async def test_postgres_holds_one_cluster_id_when_two_nodes_format_at_once(
    store_factory: StoreFactory,
) -> None:
    first, second = await store_factory.opened(), await store_factory.opened()
    assert (await first.load_identity()).cluster == (await second.load_identity()).cluster == []
    await first.write([ClusterRecord("first", 1)])
    with pytest.raises(StoreError):
        await second.write([ClusterRecord("second", 2)])
    assert (await second.load_identity()).cluster == [ClusterRecord("first", 1)]
