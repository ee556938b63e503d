"""Share group membership with real librdkafka share consumers (confluent-kafka's ShareConsumer).

The standalone server holds no records (ShareFetch answers empty partitions: docs/share-groups.md,
"The data plane"): these tests check the group coordinator's side -- a ShareConsumer joins with
its own member id, receives its assignment by topic id, is described, and leaves on close.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import ShareConsumer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.share_group_describe import DescribedGroup, ShareGroupDescribeRequest
from tests.admin.support import cli
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient


def describe(server: ServerProcess, group_id: str) -> DescribedGroup:
    with WireClient(server.bootstrap) as client:
        response = client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest([group_id]))
    [group] = response.groups
    assert isinstance(group, DescribedGroup)
    return group


def poll_until(consumers: list[ShareConsumer], done: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        for consumer in consumers:
            consumer.poll(0.2)


def test_share_consumers_join_share_partitions_and_leave(server: ServerProcess) -> None:
    server.wait_loaded()
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("queue", num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    config = {"bootstrap.servers": server.bootstrap, "group.id": "workers", "log_level": 0}
    consumers = [ShareConsumer(config) for _ in range(3)]
    for consumer in consumers:
        consumer.subscribe(["queue"])

    def settled(members: int) -> bool:
        group = describe(server, "workers")
        if group.error_code != 0 or len(group.members) != members:
            return False
        # The target caught up with the last join (it waits for the assignment interval, 1 s)
        # and every member has it.
        epochs = {m.member_epoch for m in group.members}
        return group.group_epoch == group.assignment_epoch and epochs == {group.assignment_epoch}

    poll_until(consumers, lambda: settled(3))
    group = describe(server, "workers")
    assert (group.group_state, group.assignor_name) == ("Stable", "simple")
    held = [sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions) for m in group.members]
    # Three members on two partitions: each partition shared by ceil(3 / 2) = 2 members, every
    # member holding one or two (docs/share-groups.md, "Assignment").
    assert sorted(len(parts) for parts in held) == [1, 1, 2]
    assert sorted(p for parts in held for p in parts) == [0, 0, 1, 1]
    assert all(len(m.member_id) > 0 for m in group.members)  # the clients' own ids

    # The admin CLI lists and describes the share group from the same answers.
    listed = cli(server.bootstrap, "groups", "list", "--type", "share", "--format", "json")
    assert listed.code == 0, listed
    assert [(g["group"], g["type"], g["state"]) for g in listed.json()] == [("workers", "share", "Stable")]
    shown = cli(server.bootstrap, "groups", "describe", "workers", "--state", "--members", "--format", "json")
    assert shown.code == 0, shown
    [doc] = shown.json()
    assert (doc["type"], doc["state"], doc["assignor"], doc["member_count"]) == (
        "share",
        "Stable",
        "simple",
        3,
    )
    assert (doc["group_epoch"], doc["assignment_epoch"]) == (group.group_epoch, group.assignment_epoch)
    assert sorted(p for m in doc["members"] for parts in m["assignment"].values() for p in parts) == [
        0,
        0,
        1,
        1,
    ]
    table = cli(server.bootstrap, "groups", "describe", "workers")  # offsets: none for a share group
    assert table.code == 0, table

    consumers.pop().close()  # leaves with epoch -1
    poll_until(consumers, lambda: settled(2))
    for consumer in consumers:
        consumer.close()
    poll_until([], lambda: describe(server, "workers").group_state == "Empty")
    with WireClient(server.bootstrap) as client:
        listed = client.request(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(types_filter=["share"])).groups
    assert [(g.group_id, g.group_state, g.group_type) for g in listed] == [("workers", "Empty", "share")]
