"""Moving a group between clusters: `offsets import --from-kafka` and `offsets export --to-kafka`.

The other cluster is a real Tansu broker with its own group coordinator; the group is consumed
there by kafka-python, imported into our server, changed here and exported back for a rollback.
"""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.request

import pytest
from kafka import KafkaConsumer, TopicPartition

from coordinator.cli.admin.client import LATEST, TP, AdminClient
from coordinator.server.app import start_server
from coordinator.server.config import load_config
from tests.admin.support import cli, commit, committed, create_topics, live_consumer, table_rows
from tests.admin.test_tansu import produce
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration


def offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """Committed offsets without their metadata (Tansu answers null metadata for every commit)."""
    return {tp: offset for tp, (offset, _metadata) in committed(bootstrap, group).items()}


def _consume_everything(bootstrap: str, group: str, topic: str, records: int) -> None:
    """A kafka-python member reads the topic to its end, commits its positions and leaves."""
    with live_consumer(bootstrap, group, [topic], f"{group}-reader") as consumer:
        deadline = time.monotonic() + 30
        while sum(consumer.position(tp) for tp in consumer.assignment()) < records:
            assert time.monotonic() < deadline, f"the consumer did not read {records} records in 30 s"
            consumer.poll(timeout_ms=300)
        consumer.commit()


def _positions_on_start(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Where a new member of the group starts reading each partition (from the committed offsets)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="none"
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        return {tp.partition: consumer.position(tp, timeout_ms=10000) for tp in tps}
    finally:
        consumer.close()


def test_a_group_moves_in_from_kafka_and_back_out(tansu: str, ours: ServerProcess) -> None:
    here = ours.bootstrap
    create_topics(tansu, mv_orders=2)
    create_topics(here, mv_orders=2)
    produce(tansu, "mv_orders", 2, 4)  # 4 records in each partition
    _consume_everything(tansu, "mv-billing", "mv_orders", 8)
    commit(tansu, "mv-billing", {("mv_orders", 0): 3})  # partition 0 stopped one record short
    assert offsets(tansu, "mv-billing") == {("mv_orders", 0): 3, ("mv_orders", 1): 4}

    plan = cli(here, "offsets", "import", "--from-kafka", tansu, "--group", "mv-billing")
    assert plan.code == 0, plan
    assert table_rows(plan.out) == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        ["mv-billing", "mv_orders", "0", "-", "3"],
        ["mv-billing", "mv_orders", "1", "-", "4"],
    ]
    assert "Dry run: nothing was changed" in plan.err
    assert offsets(here, "mv-billing") == {}

    everything = cli(here, "offsets", "import", "--from-kafka", tansu, "--all-groups", "--format", "json")
    assert everything.code == 0, everything
    doc = everything.json()
    assert (doc["source"], doc["destination"], doc["executed"]) == (tansu, here, False)
    assert "mv-billing" in [g["group"] for g in doc["groups"]]

    other_topic = cli(here, "offsets", "import", "--from-kafka", tansu, "mv-billing", "--topic", "mv_other")
    assert other_topic.code == 1
    assert (
        "no committed offsets on" in other_topic.err
        and "for topic mv_other: nothing to import" in other_topic.err
    )
    done = cli(
        here, "offsets", "import", "--from-kafka", tansu, "mv-billing", "--topic", "mv_orders", "--execute"
    )
    assert done.code == 0, done
    assert [r[-1] for r in table_rows(done.out)[1:]] == ["committed", "committed"]
    assert offsets(here, "mv-billing") == {("mv_orders", 0): 3, ("mv_orders", 1): 4}
    described = cli(here, "groups", "describe", "mv-billing", "--format", "json").json()[0]["offsets"]
    assert [(o["partition"], o["current_offset"]) for o in described] == [(0, 3), (1, 4)]
    # This server holds no records: the log end is unknown, not 0 (which would make the lag negative).
    assert [(o["log_end_offset"], o["lag"]) for o in described] == [(None, None), (None, None)]
    assert _positions_on_start(here, "mv-billing", "mv_orders", 2) == {0: 3, 1: 4}

    # Rollback: the group moved on here (partition 1 rewound to 2); write ours back to Tansu.
    commit(here, "mv-billing", {("mv_orders", 1): 2})
    back = cli(here, "offsets", "export", "--to-kafka", tansu, "--group", "mv-billing")
    assert back.code == 0, back
    assert table_rows(back.out)[1:] == [
        ["mv-billing", "mv_orders", "0", "3", "3"],
        ["mv-billing", "mv_orders", "1", "4", "2"],
    ]
    assert offsets(tansu, "mv-billing")[("mv_orders", 1)] == 4  # a dry run
    back = cli(here, "offsets", "export", "--to-kafka", tansu, "--group", "mv-billing", "--execute")
    assert back.code == 0, back
    assert offsets(tansu, "mv-billing") == {("mv_orders", 0): 3, ("mv_orders", 1): 2}
    # Against Tansu's own coordinator the group resumes where ours left it, with the log end known.
    assert _positions_on_start(tansu, "mv-billing", "mv_orders", 2) == {0: 3, 1: 2}
    lag = cli(tansu, "groups", "describe", "mv-billing", "--format", "json").json()[0]["offsets"]
    assert [(o["current_offset"], o["log_end_offset"], o["lag"]) for o in lag] == [(3, 4, 1), (2, 4, 2)]


def test_live_groups_are_not_moved(tansu: str, ours: ServerProcess) -> None:
    here = ours.bootstrap
    create_topics(tansu, mv_live=1)
    create_topics(here, mv_live=1)
    produce(tansu, "mv_live", 1, 2)
    with live_consumer(tansu, "mv-live-there", ["mv_live"], "there") as consumer:
        consumer.commit({TopicPartition("mv_live", 0): _offset(1)})
        refused = cli(
            here, "offsets", "import", "--from-kafka", tansu, "--group", "mv-live-there", "--execute"
        )
    assert refused.code == 1
    assert refused.err.startswith(
        f"NON_EMPTY_GROUP: cannot import group 'mv-live-there' while it has active members on {tansu} "
        "(state Stable, 1 member); stop its consumers first"
    )
    assert offsets(here, "mv-live-there") == {}

    commit(tansu, "mv-live-here", {("mv_live", 0): 2})
    with live_consumer(here, "mv-live-here", ["mv_live"], "here"):
        refused = cli(
            here, "offsets", "import", "--from-kafka", tansu, "--group", "mv-live-here", "--execute"
        )
        assert refused.code == 1
        assert (
            f"NON_EMPTY_GROUP: cannot import group 'mv-live-here' while it has active members on {here}"
            in (refused.err)
        )
        assert offsets(here, "mv-live-here") == {}
        # The other way round: our group is live, so it is not exported either.
        commit_here = cli(here, "offsets", "export", "--to-kafka", tansu, "--group", "mv-live-here")
        assert (
            commit_here.code == 1 and "NON_EMPTY_GROUP: cannot export group 'mv-live-here'" in commit_here.err
        )
    assert offsets(tansu, "mv-live-here") == {("mv_live", 0): 2}


def test_unknown_groups_unreachable_clusters_and_bad_usage(tansu: str, ours: ServerProcess) -> None:
    here = ours.bootstrap
    unknown = cli(here, "offsets", "import", "--from-kafka", tansu, "--group", "mv-nobody")
    assert unknown.code == 1
    assert unknown.err.startswith(
        f"GROUP_ID_NOT_FOUND: group 'mv-nobody' has no committed offsets on {tansu}: nothing to import"
    )
    unknown = cli(here, "offsets", "export", "--to-kafka", tansu, "--group", "mv-nobody")
    assert unknown.code == 1 and unknown.err.startswith("GROUP_ID_NOT_FOUND: group 'mv-nobody'")

    nowhere = f"127.0.0.1:{_closed_port()}"
    for argv in (
        ("offsets", "import", "--from-kafka", nowhere, "--group", "g"),
        ("offsets", "export", "--to-kafka", nowhere, "--group", "g"),
    ):
        result = cli(here, *argv)
        assert result.code == 1, result
        assert result.err.startswith(f"NETWORK_EXCEPTION: cannot connect to {nowhere}")

    usage = {
        ("offsets", "import", "--from-kafka", tansu): "--from-kafka needs --group G or --all-groups",
        ("offsets", "import", "--from-kafka", tansu, "g", "--group", "g"): "give the group once",
        (
            "offsets",
            "import",
            "--from-kafka",
            tansu,
            "g",
            "f.csv",
        ): "--from-kafka reads the offsets from that cluster",
        (
            "offsets",
            "import",
            "--from-kafka",
            here,
            "--all-groups",
        ): f"--from-kafka {here} is the --bootstrap",
        (
            "offsets",
            "import",
            "--from-kafka",
            tansu,
            "--from-zookeeper",
            "zk:2181",
            "--all-groups",
        ): "one source",
        (
            "offsets",
            "import",
            "--from-kafka",
            tansu,
            "g",
            "--ignore-live-consumers",
        ): "go with --from-zookeeper",
        ("offsets", "import", "g", "file.csv", "--execute", "--dry-run"): "not allowed with argument",
        ("offsets", "import", "g"): "give GROUP and FILE (or --from-kafka, or --from-zookeeper)",
        ("offsets", "export", "--to-kafka", tansu, "--group", "g", "--format", "csv"): "not CSV",
        ("offsets", "export", "--to-kafka", tansu, "--group", "g", "--with-metadata"): "--with-metadata is",
        ("offsets", "export", "g", "--all-groups"): "--all-groups: only with --to-kafka",
        ("offsets", "export", "g", "--format", "table"): "--format table goes with --to-kafka",
    }
    for argv, message in usage.items():
        result = cli(here, *argv)
        assert (result.code, result.out) == (2, ""), (argv, result)
        assert message in result.err, (argv, result.err)
    both = cli(here, "offsets", "import", "--from-kafka", tansu, "--group", "g", "--all-groups")
    assert both.code == 2 and "not allowed with argument" in both.err


def _offset(value: int) -> object:
    from kafka.structs import OffsetAndMetadata

    return OffsetAndMetadata(value, "", -1)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.asyncio
async def test_lag_metric_of_an_imported_group_uses_the_source_log_ends(tansu: str) -> None:
    """M records produced, K consumed on Tansu; imported here, the lag gauge says M-K."""
    create_topics(tansu, mv_lag=2)
    produce(tansu, "mv_lag", 2, 5)  # M = 10
    commit(tansu, "mv-lagging", {("mv_lag", 0): 5, ("mv_lag", 1): 2})  # K = 7

    def ends_on_tansu(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        with AdminClient(tansu, timeout=5) as client:
            found = client.log_offsets([TP(t, p) for t, p in partitions], LATEST)
        return {(tp.topic, tp.partition): e.offset for tp, e in found.items() if e.offset is not None}

    async def end_offsets(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return await asyncio.to_thread(ends_on_tansu, partitions)

    metrics_port = _closed_port()
    config = load_config(
        {"storage": "memory://", "port": 0, "metrics_port": metrics_port, "lag_sample_interval_ms": 100},
        env={},
    )
    server = await start_server(config, end_offsets=end_offsets)
    try:
        here = f"127.0.0.1:{server.port}"
        await asyncio.to_thread(create_topics, here, mv_lag=2)
        moved = await asyncio.to_thread(
            cli, here, "offsets", "import", "--from-kafka", tansu, "--group", "mv-lagging", "--execute"
        )
        assert moved.code == 0, moved
        expected = 'coordinator_group_lag{group="mv-lagging",topic="mv_lag"} 3.0'
        deadline = time.monotonic() + 10
        while expected not in (text := await asyncio.to_thread(_scrape, metrics_port)):
            assert time.monotonic() < deadline, f"{expected!r} not in\n{text}"
            await asyncio.sleep(0.05)
        assert 'coordinator_group_partition_lag{group="mv-lagging",partition="1",topic="mv_lag"} 3.0' in text
        assert 'coordinator_group_partition_lag{group="mv-lagging",partition="0",topic="mv_lag"} 0.0' in text
    finally:
        await server.shutdown()
        if server.health is not None:
            await server.health.close()


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text
