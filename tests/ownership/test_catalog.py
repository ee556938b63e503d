"""What nodes share besides shards (docs/multinode.md#what-other-nodes-learn): a topic created
through one node is never created again by another that has not polled yet (the stored topic
wins); ACL changes reach every node within a poll; a topic deleted through one node takes the
offsets of every group with it; group configs move with the group's shard (every node answers
them: tests/ownership/test_group_configs_elsewhere.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.describe_acls import DescribeAclsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from tests.durability.support import Servers, commit, create_topics, fetch, servers, wait_for, wait_for_log
from tests.ownership.test_nodes import GROUPS, owners
from tests.support.server import START_TIMEOUT_S, ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.timeout(120)]

# Long polls: a node learns other nodes' topics by its poll only after many seconds, so what
# the test sees comes from the look-up, not from a poll that happened to run.
SLOW_POLL = {
    "group-coordinator-lease-ms": "60000",
    "group-coordinator-ownership-poll-ms": "20000",
    "auto-create-topics-enable": "true",
}


@pytest.fixture
def nodes() -> Iterator[Servers]:
    with servers() as started:
        yield started


# How long a multi-process state (nodes, PostgreSQL) may take to settle on a loaded machine: the
# conditions are polled, so a passing run never waits this out.
SETTLE_S = 30.0
QUICK_POLL = {
    "group-coordinator-lease-ms": "1500",
    "group-coordinator-ownership-poll-ms": "100",
    "authorizer-enabled": "true",
    "super-users": "User:ANONYMOUS",  # the tests' plaintext connections may do anything
}
NONE = int(ErrorCode.NONE)


def start_node(nodes: Servers, dsn: str, node_id: int, settings: dict[str, str] = SLOW_POLL) -> ServerProcess:
    node = nodes.start(dsn, {**settings, "node-id": str(node_id)}, wait_loaded=False)
    wait_for_log(node, f"node {node_id} ready", timeout=START_TIMEOUT_S)
    return node


async def _stored_topics(dsn: str) -> dict[str, tuple[bytes, int]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT name, topic_id, num_partitions FROM topics")
    finally:
        await conn.close()
    return {r["name"]: (bytes(r["topic_id"]), r["num_partitions"]) for r in rows}


def stored_topics(dsn: str) -> dict[str, tuple[bytes, int]]:
    return asyncio.run(_stored_topics(dsn))


def test_a_topic_created_through_one_node_is_adopted_by_another(nodes: Servers, pg_dsn: str) -> None:
    one, two = start_node(nodes, pg_dsn, 1), start_node(nodes, pg_dsn, 2)
    create_topics(one.bootstrap, {"fresh": 3})
    stored = stored_topics(pg_dsn)["fresh"]
    with WireClient(two.bootstrap) as client:
        request = MetadataRequest(topics=[MetadataRequestTopic(name="fresh")], allow_auto_topic_creation=True)
        (topic,) = client.request(ApiKey.METADATA, 12, request).topics
        assert (topic.error_code, topic.topic_id, len(topic.partitions)) == (ErrorCode.NONE, *stored)
        create = CreateTopicsRequest(
            topics=[CreatableTopic(name="fresh", num_partitions=5, replication_factor=1)]
        )
        (created,) = client.request(ApiKey.CREATE_TOPICS, 5, create).topics
        assert created.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        # A topic nobody created is still auto-created, once.
        (new,) = client.request(ApiKey.METADATA, 12, MetadataRequest(
            topics=[MetadataRequestTopic(name="brand-new")], allow_auto_topic_creation=True
        )).topics  # fmt: skip
        assert new.error_code == ErrorCode.NONE
    assert stored_topics(pg_dsn)["fresh"] == stored
    assert stored_topics(pg_dsn)["brand-new"] == (new.topic_id, 1)


def acl_principals(node: ServerProcess) -> list[str]:
    with WireClient(node.bootstrap) as client:
        response = client.request(ApiKey.DESCRIBE_ACLS, 2, DescribeAclsRequest(1, None, 1, None, None, 1, 1))
    assert response.error_code == NONE
    return sorted(a.principal for r in response.resources for a in r.acls)


def test_acl_changes_reach_every_node_within_a_poll(nodes: Servers, pg_dsn: str) -> None:
    one, two = start_node(nodes, pg_dsn, 1, QUICK_POLL), start_node(nodes, pg_dsn, 2, QUICK_POLL)
    with WireClient(one.bootstrap) as client:
        creation = AclCreation(3, "g", 3, "User:alice", "*", 3, 3)  # GROUP g, READ, ALLOW
        (created,) = client.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest([creation])).results
        assert created.error_code == NONE
    wait_for(lambda: acl_principals(two) == ["User:alice"], SETTLE_S, "node 2 to see the new ACL")
    with WireClient(two.bootstrap) as client:
        gone = DeleteAclsFilter(3, "g", 3, "User:alice", None, 1, 1)
        (deleted,) = client.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest([gone])).filter_results
        assert deleted.error_code == NONE and len(deleted.matching_acls) == 1
    wait_for(lambda: acl_principals(one) == [], SETTLE_S, "node 1 to see the ACL deleted")


async def _stored_offset_topics(dsn: str) -> list[tuple[str, str]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT group_id, topic FROM offsets ORDER BY group_id, topic")
    finally:
        await conn.close()
    return [(r["group_id"], r["topic"]) for r in rows]


def test_a_topic_deleted_through_one_node_takes_every_groups_offsets(nodes: Servers, pg_dsn: str) -> None:
    one = start_node(nodes, pg_dsn, 1, QUICK_POLL)
    create_topics(one.bootstrap, {"gone": 1, "kept": 1})
    two = start_node(nodes, pg_dsn, 2, QUICK_POLL)
    wait_for(
        lambda: set(seen := owners(one, GROUPS)).issuperset(GROUPS) and set(seen.values()) == {1, 2}
        and owners(two, GROUPS) == seen,
        SETTLE_S,
        "both nodes to own shards",
    )  # fmt: skip
    seen = owners(one, GROUPS)
    mine, theirs = (next(g for g in GROUPS if seen[g] == owner) for owner in (1, 2))
    node = {mine: one, theirs: two}
    offsets = {("gone", 0): 5, ("kept", 0): 6}
    for group in (mine, theirs):
        with WireClient(node[group].bootstrap) as client:
            wait_for(
                lambda c=client, g=group: set(commit(c, g, offsets).values()) == {NONE},
                SETTLE_S,
                f"commit {group}",
            )
    with WireClient(one.bootstrap) as client:
        (deleted,) = client.request(
            ApiKey.DELETE_TOPICS, 4, DeleteTopicsRequest(topic_names=["gone"])
        ).responses
        assert deleted.error_code == NONE
    # Node 1 holds only its own groups, yet every group's offsets of the topic are gone.
    assert asyncio.run(_stored_offset_topics(pg_dsn)) == sorted([(mine, "kept"), (theirs, "kept")])
    with WireClient(two.bootstrap) as client:
        wait_for(
            lambda: fetch(client, theirs, [("gone", 0), ("kept", 0)]).offsets == {("kept", 0): 6},
            SETTLE_S,
            "node 2 to forget the deleted topic's offsets",
        )
    wait_for_log(two, "topics deleted through another node: gone", timeout=SETTLE_S)
    assert asyncio.run(_stored_offset_topics(pg_dsn)) == sorted([(mine, "kept"), (theirs, "kept")])


def describe_group_config(node: ServerProcess, group: str) -> tuple[int, str | None]:
    """(error code, consumer.session.timeout.ms) of a GROUP resource, asked of ``node``."""
    request = DescribeConfigsRequest([DescribeConfigsResource(32, group, ["consumer.session.timeout.ms"])])
    with WireClient(node.bootstrap) as client:
        (result,) = client.request(ApiKey.DESCRIBE_CONFIGS, 4, request).results
    return result.error_code, (result.configs[0].value if result.configs else None)


def test_group_configs_move_with_the_shard(nodes: Servers, pg_dsn: str) -> None:
    one, two = start_node(nodes, pg_dsn, 1, QUICK_POLL), start_node(nodes, pg_dsn, 2, QUICK_POLL)
    wait_for(lambda: 2 in owners(one, GROUPS).values(), SETTLE_S, "node 2 to own shards")
    group = next(g for g, owner in owners(one, GROUPS).items() if owner == 2)
    # A shard is leased before it is loaded: node 2 answers COORDINATOR_LOAD_IN_PROGRESS till then.
    wait_for(lambda: describe_group_config(two, group)[0] == NONE, SETTLE_S, "node 2 to load the shard")
    alter = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(32, group, [AlterableConfig("consumer.session.timeout.ms", 0, "50000")])]
    )
    with WireClient(two.bootstrap) as client:
        (altered,) = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter).responses
        assert altered.error_code == NONE
    assert describe_group_config(two, group) == (NONE, "50000")
    assert describe_group_config(one, group) == (NONE, "50000")  # read from the database
    two.stop()  # hands its shards, the group's configs with them, over to node 1
    wait_for(
        lambda: describe_group_config(one, group) == (NONE, "50000"), SETTLE_S, "node 1 to serve the configs"
    )
