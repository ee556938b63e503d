"""A single node serves once its unsharded state and group ids are read and loads its groups shard by shard in
the background (docs/performance.md#loading-in-the-background).

The store here is a memory store whose ``load_groups`` waits for a per-shard event, so the test
decides when each shard's read completes: a group of a loaded shard is served while others still
load, a request for a shard not loaded yet gets COORDINATOR_LOAD_IN_PROGRESS and moves that shard
to the front, nothing of an unloaded shard is written meanwhile, and the state loaded shard by
shard from SQLite equals the old full load.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from coordinator.api.config_resources import GROUP
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.sharding import shard_of
from coordinator.server import app, group_loading
from coordinator.server.app import RunningServer, start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_config_resources import ConfigResource as ListedResource
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from storage.base import StoreError
from storage.memory import MemoryData, MemoryStore
from storage.records import (
    ClusterRecord,
    GroupConfigRecord,
    GroupMetadataRecord,
    LoadedState,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    TopicRecord,
)
from storage.url import open_store
from tests.api.test_dispatcher import Client
from tests.coordinator.consumer_harness import cg_heartbeat
from tests.coordinator.harness import Harness, classic_snapshots, consumer_group_of

SHARDS = 50  # offsets.topic.num.partitions' default
TOPIC = "bg-t"
TOPIC_ID = uuid.UUID(int=7).bytes
LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def group_in(shard: int, prefix: str = "bg") -> str:
    return next(f"{prefix}-{i}" for i in range(100_000) if shard_of(f"{prefix}-{i}", SHARDS) == shard)


# Three simple groups with offsets, in shards loaded in this order unless a request intervenes.
FIRST, MIDDLE, LAST = group_in(3), group_in(17), group_in(40)
LAST_TOO = group_in(40, "other")  # a second group of LAST's shard
STABLE = group_in(17, "stable")  # a Stable group in MIDDLE's shard
SESSION_MS = 600


class GatedStore(MemoryStore):
    """A memory store whose group reads wait until the test opens their shard's gate."""

    def __init__(self, data: MemoryData) -> None:
        super().__init__(data)
        self.gates = {shard: asyncio.Event() for shard in range(SHARDS)}
        self.requested: list[int] = []
        self.failing_reads = 0  # the next reads raise StoreError (the database unreachable)
        self.bug: Exception | None = None  # raised by every read

    async def load_groups(self, group_ids: Collection[str]) -> LoadedState:
        [shard] = {shard_of(group_id, SHARDS) for group_id in group_ids}
        self.requested.append(shard)
        await self.gates[shard].wait()
        if self.bug is not None:
            raise self.bug
        if self.failing_reads:
            self.failing_reads -= 1
            raise StoreError("injected read failure")
        return await super().load_groups(group_ids)


async def prefill(store: MemoryStore) -> None:
    now = 1_700_000_000_000
    records: list[Record] = [
        ClusterRecord("bg-cluster", now),
        TopicRecord(TOPIC, TOPIC_ID, 4, 1, ()),
    ]
    for offset, group in enumerate((FIRST, MIDDLE, LAST, LAST_TOO), start=10):
        records += [OffsetCommitRecord(group, TOPIC, p, offset + p, -1, "", now, None) for p in range(4)]
    # A Stable group whose one member has a short session, in the shard loaded second.
    member = MemberRecord("m-1", None, "client", "/127.0.0.1", 30_000, SESSION_MS, b"", b"")
    records.append(GroupMetadataRecord(STABLE, "consumer", 3, "range", "m-1", now, (member,)))
    await store.open()
    await store.write(records)


async def gated_server(monkeypatch: pytest.MonkeyPatch) -> tuple[RunningServer, GatedStore, Client]:
    store = GatedStore(MemoryData())
    await prefill(store)
    monkeypatch.setattr(app, "open_store", lambda url, **options: store)
    config = Config(host="127.0.0.1", port=0, storage="memory://", group_initial_rebalance_delay_ms=0)
    server = await start_server(config)
    return server, store, await Client.connect(server.port, "bg")


@pytest_asyncio.fixture
async def gated(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[RunningServer, GatedStore, Client]]:
    server, store, client = await gated_server(monkeypatch)
    try:
        yield server, store, client
    finally:
        for gate in store.gates.values():
            gate.set()
        await client.close()
        await server.shutdown()


def fetch_request(*groups: str) -> OffsetFetchRequest:
    topics = [OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1, 2, 3])]
    return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=g, topics=topics) for g in groups])


async def fetch(client: Client, *groups: str) -> dict[str, Any]:
    response = await client.request(ApiKey.OFFSET_FETCH, 8, fetch_request(*groups))
    return {
        g.group_id: g.error_code
        if g.error_code
        else {p.partition_index: p.committed_offset for t in g.topics for p in t.partitions}
        for g in response.groups
    }


async def until(condition: Any, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


def commit_request(group: str, offset: int) -> OffsetCommitRequest:
    partition = OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
    return OffsetCommitRequest(
        group_id=group, topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[partition])]
    )


@pytest.mark.asyncio
async def test_a_loaded_shard_is_served_while_others_load_and_a_wanted_shard_jumps_the_queue(
    gated: tuple[RunningServer, GatedStore, Client],
) -> None:
    server, store, client = gated
    loader = server.group_loader
    assert loader is not None
    await until(lambda: store.requested == [3], "the first shard is being read")
    # LAST's shard is queued behind MIDDLE's: asking for LAST answers 14 and moves it forward.
    assert await fetch(client, LAST) == {LAST: LOADING}
    store.gates[3].set()
    await until(lambda: store.requested == [3, 40], "the wanted shard is read next")
    assert await fetch(client, FIRST) == {FIRST: {0: 10, 1: 11, 2: 12, 3: 13}}
    assert await fetch(client, LAST, MIDDLE) == {LAST: LOADING, MIDDLE: LOADING}
    store.gates[40].set()
    await until(lambda: store.requested == [3, 40, 17], "the rest loads in order")
    assert await fetch(client, LAST, LAST_TOO) == {
        LAST: {0: 12, 1: 13, 2: 14, 3: 15},
        LAST_TOO: {0: 13, 1: 14, 2: 15, 3: 16},
    }
    assert await fetch(client, MIDDLE) == {MIDDLE: LOADING}
    store.gates[17].set()
    assert loader.task is not None
    await asyncio.wait_for(loader.task, 5)
    assert loader.order == [3, 40, 17]
    assert await fetch(client, MIDDLE) == {MIDDLE: {0: 11, 1: 12, 2: 13, 3: 14}}


@pytest.mark.asyncio
async def test_nothing_of_a_shard_not_loaded_is_served_or_written(
    gated: tuple[RunningServer, GatedStore, Client],
) -> None:
    _, store, client = gated
    await until(lambda: store.requested == [3], "the first shard is being read")
    rows_before = {name: dict(rows) for name, rows in store.data.tables.items()}
    # Every group request for MIDDLE's shard answers 14 (Heartbeat blindly succeeds, as Kafka's).
    assert (await client.request(ApiKey.OFFSET_COMMIT, 8, commit_request(MIDDLE, 99))).topics[0].partitions[
        0
    ].error_code == LOADING
    described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[MIDDLE]))
    assert [g.error_code for g in described.groups] == [LOADING]
    deleted = await client.request(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=[MIDDLE]))
    assert [r.error_code for r in deleted.results] == [LOADING]
    heartbeat = await client.request(ApiKey.HEARTBEAT, 4, HeartbeatRequest(MIDDLE, 1, "m"))
    assert heartbeat.error_code == ErrorCode.NONE
    # ListGroups lists every group: it waits for the last shard, as Kafka's while any loads.
    listed = await client.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
    assert (listed.error_code, listed.groups) == (LOADING, [])
    # DeleteTopics drops the topic's offsets of the groups held: it waits for every shard.
    delete_topics = client.send(
        ApiKey.DELETE_TOPICS, 4, DeleteTopicsRequest(topic_names=[TOPIC], timeout_ms=30_000)
    )
    await asyncio.sleep(0.05)
    assert {name: dict(rows) for name, rows in store.data.tables.items()} == rows_before
    for gate in store.gates.values():
        gate.set()
    received, response = await client.receive(ApiKey.DELETE_TOPICS, 4)
    assert (received, [r.error_code for r in response.responses]) == (delete_topics, [ErrorCode.NONE])
    # The offsets of every group went with the topic, those of shards loaded late too.
    assert not store.data.tables["offsets"]
    listed = await client.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
    assert listed.error_code == ErrorCode.NONE


@pytest.mark.asyncio
async def test_group_configs_of_a_shard_not_loaded_wait_for_it_instead_of_a_loading_error(
    gated: tuple[RunningServer, GatedStore, Client],
) -> None:
    """Kafka keeps group configs in the cluster metadata: they have no retriable loading answer
    (librdkafka's admin client hands a 14 to the application), so they wait for their shard."""
    _, store, client = gated
    group = GROUP
    await until(lambda: store.requested == [3], "the first shard is being read")
    altered = client.send(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        IncrementalAlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    group, LAST, [AlterableConfig("consumer.session.timeout.ms", 0, "50000")]
                )
            ]
        ),
    )
    await asyncio.sleep(0.05)  # the server takes the request (and wants its shard)
    store.gates[3].set()
    await until(lambda: store.requested[:2] == [3, 40], "the wanted shard is read next")
    await asyncio.sleep(0.05)
    assert not store.data.tables.get("group_configs")  # not answered, nothing written yet
    store.gates[40].set()
    received, response = await client.receive(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    assert (received, [r.error_code for r in response.responses]) == (altered, [ErrorCode.NONE])
    described = await client.request(
        ApiKey.DESCRIBE_CONFIGS,
        4,
        DescribeConfigsRequest(
            resources=[DescribeConfigsResource(group, LAST, ["consumer.session.timeout.ms"])]
        ),
    )
    [result] = described.results
    assert (result.error_code, [(c.name, c.value) for c in result.configs]) == (
        ErrorCode.NONE,
        [("consumer.session.timeout.ms", "50000")],
    )


@pytest.mark.asyncio
async def test_a_listing_of_group_config_resources_waits_for_every_shard(
    gated: tuple[RunningServer, GatedStore, Client],
) -> None:
    """ListConfigResources lists the groups with configs of every shard: while shards load it
    waits for them (docs/group-configs.md#listing-config-resources); other types do not wait."""
    server, store, client = gated
    store.gates[3].set()
    await until(lambda: store.requested[:2] == [3, 17], "the first shard is loaded")
    change = AlterConfigsResource(GROUP, FIRST, [AlterableConfig("consumer.session.timeout.ms", 0, "50000")])
    altered = await client.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest([change])
    )
    assert [r.error_code for r in altered.responses] == [ErrorCode.NONE]
    # A config stored for a group of a shard still loading (changed through an earlier run).
    await store.write([GroupConfigRecord(LAST, "consumer.session.timeout.ms", "40000")])
    listing = client.send(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([GROUP]))
    other = await Client.connect(server.port, "bg-topics")
    try:
        topics = await other.request(ApiKey.LIST_CONFIG_RESOURCES, 1, ListConfigResourcesRequest([2]))
        assert topics == ListConfigResourcesResponse(config_resources=[ListedResource(TOPIC, 2)])
    finally:
        await other.close()
    await asyncio.sleep(0.05)
    for gate in store.gates.values():
        gate.set()
    received, response = await client.receive(ApiKey.LIST_CONFIG_RESOURCES, 1)
    assert (received, response) == (
        listing,
        ListConfigResourcesResponse(
            config_resources=[ListedResource(g, GROUP) for g in sorted([FIRST, LAST])]
        ),
    )


@pytest.mark.asyncio
async def test_a_failed_read_is_retried_and_the_shard_keeps_answering_load_in_progress(
    gated: tuple[RunningServer, GatedStore, Client],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(group_loading, "RETRY_S", 0.01)
    server, store, client = gated
    store.failing_reads = 2
    store.gates[3].set()
    await until(lambda: store.requested[:3] == [3, 3, 3], "the failed read is retried")
    await until(lambda: 3 in (server.group_loader.order if server.group_loader else []), "shard 3 is loaded")
    assert await fetch(client, FIRST) == {FIRST: {0: 10, 1: 11, 2: 12, 3: 13}}
    assert [r.message for r in caplog.records if "shard 3" in r.message] == [
        "cannot load shard 3, retrying every 0 s: injected read failure",
        "could load shard 3 again",
    ]


@pytest.mark.asyncio
async def test_a_shutdown_while_shards_load_stops_the_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    server, store, client = await gated_server(monkeypatch)
    await until(lambda: store.requested == [3], "the first shard is being read")
    await client.close()
    await asyncio.wait_for(server.shutdown(), 5)
    loader = server.group_loader
    assert loader is not None and loader.task is not None and loader.task.cancelled()
    assert loader.order == [] and server.dispatcher.cluster.shard_map.loading == {3, 17, 40}


@pytest.mark.asyncio
async def test_a_loader_that_fails_otherwise_ends_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    server, store, client = await gated_server(monkeypatch)
    store.bug = RuntimeError("a bug while loading")
    store.gates[3].set()
    try:
        with pytest.raises(RuntimeError, match="a bug while loading"):
            await asyncio.wait_for(app._until_stopped(asyncio.Event(), server), 5)
    finally:
        await client.close()
        await server.shutdown()


@pytest.mark.asyncio
async def test_members_of_a_shard_loaded_late_get_their_session_from_its_load(
    gated: tuple[RunningServer, GatedStore, Client],
) -> None:
    server, store, client = gated
    store.gates[3].set()
    await until(lambda: store.requested == [3, 17], "the second shard is being read")
    await asyncio.sleep(1.5 * SESSION_MS / 1000)  # longer than the session, while not loaded
    store.gates[17].set()
    await until(
        lambda: 17 in (server.group_loader.order if server.group_loader else []), "shard 17 is loaded"
    )
    loaded_at = asyncio.get_running_loop().time()
    described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[STABLE]))
    [group] = described.groups
    assert (group.error_code, group.group_state, [m.member_id for m in group.members]) == (
        ErrorCode.NONE,
        "Stable",
        ["m-1"],
    )
    await asyncio.sleep(SESSION_MS / 1000 + 0.2)  # the member's session, counted from the load, ends
    described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[STABLE]))
    [group] = described.groups
    assert group.members == [] and group.group_state != "Stable"
    assert asyncio.get_running_loop().time() - loaded_at < 5


# -- everything loaded equals the old full load --------------------------------------------------


def varied_state() -> tuple[list[Record], TopicRecord]:
    """Rows of a real core: Stable classic groups, KIP-848 groups with members, a group config,
    simple groups' offsets, spread over many shards."""
    h = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    topic = h.catalog.set_topic(TOPIC, 4)
    for i in range(30):
        members, generation = h.stable_group(f"classic-{i}", 2)
        h.commit(f"classic-{i}", {(TOPIC, i % 4): i}, member_id=members[0], generation=generation)
    for i in range(20):
        cg_heartbeat(h, f"kip848-{i}", "m1")
        cg_heartbeat(h, f"kip848-{i}", "m2")
    for i in range(100):
        h.commit(f"simple-{i}", {(TOPIC, p): i * 10 + p for p in range(4)})
    store = h.store
    rows: list[Record] = [
        *store.groups.values(),
        *store.offsets.values(),
        *store.consumer_groups.values(),
        *store.consumer_members.values(),
        GroupConfigRecord("kip848-3", "consumer.session.timeout.ms", "50000"),
        GroupConfigRecord("not-a-group-yet", "consumer.heartbeat.interval.ms", "4000"),
    ]
    return rows, topic


def snapshot(shard: GroupCoordinator) -> dict[str, Any]:
    groups = {g.group_id: g for g in classic_snapshots(shard)}
    consumer = {}
    for group_id in list(shard.kind(ConsumerGroupManager).groups):
        group = consumer_group_of(shard, group_id)
        assert group is not None
        consumer[group_id] = (
            group.group_epoch,
            group.assignment_epoch,
            {m.member_id: (m.member_epoch, m.assigned) for m in group.members.values()},
        )
    offsets = {
        g: sorted(shard.committed_offsets(g), key=lambda r: (r.topic, r.partition))
        for g in shard.held_group_ids()
    }
    configs = {g: shard.group_configs.overrides.get(g) for g in shard.held_group_ids()}
    return {"classic": groups, "consumer": consumer, "offsets": offsets, "configs": configs}


@pytest.mark.asyncio
async def test_loading_shard_by_shard_from_sqlite_equals_the_full_load(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bg.db'}"
    rows, topic = varied_state()
    store = open_store(url)
    await store.open()
    await store.write([ClusterRecord("bg-cluster", 1_700_000_000_000), topic, *rows])
    full = await store.load()
    await store.close()
    assert len({shard_of(r.group_id, SHARDS) for r in full.offsets}) > 20

    config = Config(host="127.0.0.1", port=0, storage=url, group_initial_rebalance_delay_ms=0)
    server = await start_server(config)
    try:
        loader = server.group_loader
        assert loader is not None and loader.task is not None
        await asyncio.wait_for(loader.task, 10)
        assert not server.dispatcher.cluster.shard_map.loading
        loaded = server.runtime.coordinator
        # The old way: one read of everything, one GroupCoordinator.load, at the same clock.
        reference = GroupCoordinator(config.group_settings())
        node = NodeIdentity(0, "127.0.0.1", 0, "bg-cluster")
        cluster = Cluster(node, auto_create_topics=False, num_partitions=1)
        cluster.load(full.topics)
        reference.attach_catalog(cluster)
        clock = server.runtime.clock
        reference.load(full.group_rows(), full.offsets, clock.now_ms(), clock.wall_ms(), full.group_configs)
        got, want = snapshot(loaded), snapshot(reference)
        assert got["classic"] == want["classic"]
        assert got["consumer"] == want["consumer"]
        assert got["offsets"] == want["offsets"]
        assert got["configs"] == want["configs"]
        assert len(got["classic"]) == 30 + 100 and len(got["consumer"]) == 20  # simple groups are classic
        assert "not-a-group-yet" in got["configs"]
        assert loaded.member_count() == reference.member_count() == 100
    finally:
        await server.shutdown()
