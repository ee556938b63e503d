"""`coordinator topics ...` against our coordinator in standalone mode (its own topic catalog),
checked with kafka-python's admin client."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient

from tests.admin.support import cli, table_rows
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration


def _partitions(bootstrap: str, topic: str) -> int | None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return None if described["error_code"] else len(described["partitions"])


def test_topic_lifecycle(ours: ServerProcess) -> None:
    b = ours.bootstrap
    created = cli(
        b, "topics", "create", "tc_orders", "tc_audit", "--partitions", "3", "--config", "retention.ms=1000"
    )
    assert created.code == 0, created
    assert table_rows(created.out) == [["TOPIC", "STATUS"], ["tc_orders", "created"], ["tc_audit", "created"]]
    assert _partitions(b, "tc_orders") == 3

    listed = cli(b, "topics", "list")
    assert ["tc_orders", "3", "1"] in table_rows(listed.out) and ["tc_audit", "3", "1"] in table_rows(
        listed.out
    )
    doc = {t["topic"]: t for t in cli(b, "topics", "list", "--format", "json").json()}
    assert doc["tc_orders"]["partitions"] == 3 and doc["tc_orders"]["internal"] is False

    described = cli(b, "topics", "describe", "tc_orders")
    assert described.code == 0, described
    rows = table_rows(described.out)
    assert rows[0] == ["TOPIC", "PARTITION", "LEADER", "LEADER-EPOCH", "REPLICAS", "ISR", "OFFLINE"]
    assert [r[:2] for r in rows[1:]] == [["tc_orders", "0"], ["tc_orders", "1"], ["tc_orders", "2"]]
    (one,) = cli(b, "topics", "describe", "tc_orders", "--format", "json").json()
    assert [p["partition"] for p in one["partitions"]] == [0, 1, 2] and one["replication_factor"] == 1

    again = cli(b, "topics", "create", "tc_orders", "--partitions", "3")
    assert again.code == 1 and "TOPIC_ALREADY_EXISTS" in again.err, again
    tolerated = cli(b, "topics", "create", "tc_orders", "--partitions", "3", "--if-not-exists")
    assert tolerated.code == 0 and "TOPIC_ALREADY_EXISTS (ignored)" in tolerated.out, tolerated

    grown = cli(b, "topics", "alter", "tc_orders", "--partitions", "5")
    assert grown.code == 0, grown
    assert _partitions(b, "tc_orders") == 5
    shrink = cli(b, "topics", "alter", "tc_orders", "--partitions", "2")
    assert shrink.code == 1 and "INVALID_PARTITIONS" in shrink.err, shrink

    # What exists is printed, what does not is named (exit 1), as `groups describe` does.
    partial = cli(b, "topics", "describe", "tc_audit", "tc_nosuch")
    assert partial.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION: topic 'tc_nosuch' does not exist" in partial.err
    assert {r[0] for r in table_rows(partial.out)[1:]} == {"tc_audit"}

    deleted = cli(b, "topics", "delete", "tc_orders", "tc_audit")
    assert deleted.code == 0 and table_rows(deleted.out)[1:] == [
        ["tc_orders", "deleted"],
        ["tc_audit", "deleted"],
    ]
    assert _partitions(b, "tc_orders") is None
    gone = cli(b, "topics", "delete", "tc_orders")
    assert gone.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.err, gone
    assert cli(b, "topics", "delete", "tc_orders", "--if-exists").code == 0


def test_topic_usage_errors(ours: ServerProcess) -> None:
    b = ours.bootstrap
    for argv, message in [
        (["topics", "create", "tc_bad", "--partitions", "0"], "--partitions must be at least 1"),
        (["topics", "create", "tc_bad", "--config", "retention.ms"], "expected NAME=VALUE"),
        (["topics", "describe"], "give TOPIC names or --all-topics"),
        (["topics", "alter", "tc_bad"], "--partitions"),
    ]:
        result = cli(b, *argv)
        assert result.code == 2 and message in result.err, (argv, result)
