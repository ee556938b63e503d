"""`coordinator groups describe` and `coordinator offsets reset|delete` on share groups: their
start offsets and lag, reset with --dry-run / --execute, deleted per topic (docs/admin-cli.md)."""

from __future__ import annotations

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from protocol.apis import ApiKey
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.admin.support import cli
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient


def _start_offsets(bootstrap: str) -> list[list[str]]:
    shown = cli(bootstrap, "groups", "describe", "sg", "--offsets")
    assert shown.code == 0, shown
    return [line.split() for line in shown.out.splitlines()[1:] if line.strip()]


def test_share_group_start_offsets_are_described_reset_and_deleted(ours: ServerProcess) -> None:
    ours.wait_loaded()
    bootstrap = ours.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("sq", num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    with WireClient(bootstrap) as client:
        parts = [AlterShareGroupOffsetsRequestPartition(0, 5), AlterShareGroupOffsetsRequestPartition(1, 7)]
        request = AlterShareGroupOffsetsRequest("sg", [AlterShareGroupOffsetsRequestTopic("sq", parts)])
        assert client.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request).error_code == 0
    # Standalone keeps no records: every log ends at 0, so the lag is 0 - start (as Kafka computes it).
    assert _start_offsets(bootstrap) == [["sg", "sq", "0", "5", "-5"], ["sg", "sq", "1", "7", "-7"]]
    shown = cli(bootstrap, "groups", "describe", "sg", "--offsets", "--format", "json")
    assert shown.json()[0]["start_offsets"][0] == {
        "topic": "sq",
        "partition": 0,
        "start_offset": 5,
        "lag": -5,
    }

    # Standalone holds no records: the offsets are given (--to-earliest needs a log).
    dry = cli(bootstrap, "offsets", "reset", "sg", "--topic", "sq", "--to-offset", "0")
    assert dry.code == 0, dry
    assert [line.split()[:5] for line in dry.out.splitlines()[1:]] == [  # GROUP TOPIC PARTITION CURRENT NEW
        ["sg", "sq", "0", "5", "0"],
        ["sg", "sq", "1", "7", "0"],
    ]
    assert _start_offsets(bootstrap)[0][3] == "5"  # a dry run changes nothing
    done = cli(bootstrap, "offsets", "reset", "sg", "--topic", "sq:1", "--to-offset", "2", "--execute")
    assert done.code == 0, done
    assert _start_offsets(bootstrap) == [["sg", "sq", "0", "5", "-5"], ["sg", "sq", "1", "2", "-2"]]

    # A member makes the group non-empty: the reset is refused, readably.
    with WireClient(bootstrap) as client:
        join = ShareGroupHeartbeatRequest("sg", "m1", 0, subscribed_topic_names=["sq"])
        assert client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, join).error_code == 0
        refused = cli(bootstrap, "offsets", "reset", "sg", "--topic", "sq", "--to-offset", "0", "--execute")
        assert refused.code == 1 and "active members" in refused.err
        leave = ShareGroupHeartbeatRequest("sg", "m1", -1)
        assert client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, leave).error_code == 0

    partitions = cli(bootstrap, "offsets", "delete", "sg", "--topic", "sq:0")
    assert partitions.code == 2 and "per topic" in partitions.err
    deleted = cli(bootstrap, "offsets", "delete", "sg", "--topic", "sq")
    assert deleted.code == 0, deleted
    assert [line.split() for line in deleted.out.splitlines()[1:]] == [
        ["sq", "0", "deleted"],
        ["sq", "1", "deleted"],
    ]
    assert _start_offsets(bootstrap) == []


def test_share_group_configs_from_the_command_line(ours: ServerProcess) -> None:
    ours.wait_loaded()
    done = cli(ours.bootstrap, "groups", "configure", "sq-configs", "--set", "share.delivery.count.limit=3")
    assert done.code == 0, done
    shown = cli(ours.bootstrap, "groups", "describe", "sq-configs", "--configs", "--format", "json")
    assert shown.code == 0, shown
    configs = {c["name"]: c for c in shown.json()} if isinstance(shown.json(), list) else {}
    assert configs["share.delivery.count.limit"]["value"] == "3"
    refused = cli(
        ours.bootstrap, "groups", "configure", "sq-configs", "--set", "share.delivery.count.limit=11"
    )
    assert refused.code == 1
    assert "share.delivery.count.limit must be in the range 2 to 10 inclusive." in refused.err
