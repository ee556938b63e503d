"""Moving ZooKeeper-era consumers: `groups list --from-zookeeper`, `offsets import --from-zookeeper`.

A real ZooKeeper (Debian's package) on a free loopback port, filled in the pre-0.9 consumer
layout with kazoo, and our server on memory://.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from coordinator.cli.admin.client import TP, Committed
from coordinator.cli.admin.zookeeper import ZooKeeperError, instance_host, parse_offset, parse_zk_address
from coordinator.cli.admin.zookeeper_cmd import GroupPlan, Row, _commit_group
from tests.admin.support import cli, committed, create_topics, live_consumer, table_rows
from tests.support.ports import free_port
from tests.support.server import ServerProcess

kazoo_client = pytest.importorskip("kazoo.client", reason="the zookeeper extra is not installed")

pytestmark = pytest.mark.integration

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")


def _imok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ZooKeeper from Debian's package on a free loopback port; yields HOST:PORT."""
    if not ZOOKEEPER_JAR.is_file():
        pytest.fail("Debian's zookeeper package is not installed (.ci/setup installs it)")
    home = tmp_path_factory.mktemp("zookeeper")
    port = free_port()
    config = home / "zoo.cfg"
    config.write_text(
        f"tickTime=500\ndataDir={home / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n4lw.commands.whitelist=ruok\n"
    )
    log = (home / "zookeeper.log").open("w")
    process = subprocess.Popen(
        [
            "java",
            "-Xmx128m",
            "-cp",
            str(ZOOKEEPER_JAR),
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(config),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while not _imok(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper did not start:\n{(home / 'zookeeper.log').read_text()}")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


@pytest.fixture
def zk(zookeeper: str) -> Iterator[Any]:
    """A kazoo session for the test's own writes (its ephemeral nodes end with it)."""
    client = kazoo_client.KazooClient(hosts=zookeeper)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def register(
    zk: Any,
    root: str,
    group: str,
    offsets: dict[tuple[str, int], str],
    owners: dict[tuple[str, int], str] | None = None,
    instances: dict[str, bool] | None = None,
) -> None:
    """Write one group in the ZooKeeper consumer layout under root ("" or a chroot)."""
    base = f"{root}/consumers/{group}"
    zk.ensure_path(f"{base}/ids")
    for (topic, partition), value in offsets.items():
        zk.create(f"{base}/offsets/{topic}/{partition}", value.encode(), makepath=True)
    for (topic, partition), owner in (owners or {}).items():
        zk.create(f"{base}/owners/{topic}/{partition}", owner.encode(), makepath=True)
    for consumer_id, ephemeral in (instances or {}).items():
        data = b'{"version":1,"subscription":{"orders":1},"pattern":"white_list","timestamp":"1"}'
        zk.create(f"{base}/ids/{consumer_id}", data, ephemeral=ephemeral)


def test_groups_list_shows_the_registry_under_a_chroot(zookeeper: str, zk: Any, ours: ServerProcess) -> None:
    register(
        zk,
        "/kafka-old",
        "zl-billing",
        {("zl-orders", 0): "42", ("zl-orders", 1): "7"},
        owners={("zl-orders", 0): "zl-billing_web1-1700000000000-abcd1234-0"},
        instances={"zl-billing_web1-1700000000000-abcd1234": True},
    )
    register(zk, "/kafka-old", "zl-gone", {("zl-orders", 0): "3"})

    result = cli(
        ours.bootstrap, "groups", "list", "--from-zookeeper", f"{zookeeper}/kafka-old", "--format", "json"
    )
    assert result.code == 0, result.err
    groups = {g["group"]: g for g in result.json()["groups"]}
    assert set(groups) == {"zl-billing", "zl-gone"}
    billing = groups["zl-billing"]
    assert billing["instances"] == [
        {
            "id": "zl-billing_web1-1700000000000-abcd1234",
            "host": "web1",
            "subscription": {"orders": 1},
            "ephemeral": True,
        }
    ]
    assert billing["owners"] == [
        {"topic": "zl-orders", "partition": 0, "owner": "zl-billing_web1-1700000000000-abcd1234-0"}
    ]
    assert billing["offsets"] == [
        {"topic": "zl-orders", "partition": 0, "offset": 42},
        {"topic": "zl-orders", "partition": 1, "offset": 7},
    ]
    assert groups["zl-gone"]["instances"] == []
    assert "still registered (live) in ZooKeeper: zl-billing" in result.err

    table = cli(ours.bootstrap, "groups", "list", "--from-zookeeper", f"{zookeeper}/kafka-old")
    assert table.code == 0, table.err
    rows = table_rows(table.out)
    assert rows[0] == ["GROUP", "INSTANCES", "HOSTS", "OWNED-PARTITIONS", "OFFSETS", "TOPICS"]
    assert ["zl-billing", "1", "web1", "1", "2", "zl-orders"] in rows
    assert ["zl-gone", "0", "-", "0", "1", "zl-orders"] in rows


def _start_position(bootstrap: str, group: str, topic: str) -> dict[tuple[str, int], int]:
    """Where a kafka-python member of the group starts reading.

    This server holds no records, so a fetch at a committed offset beyond 0 is out of range: with
    no reset policy the consumer reports it (OffsetOutOfRangeError) and keeps its position, which
    is the committed offset it resolved on joining.
    """
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="none"
    )
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment in 30 s"
            with contextlib.suppress(OffsetOutOfRangeError):
                consumer.poll(timeout_ms=200)
        return {(tp.topic, tp.partition): consumer.position(tp) for tp in consumer.assignment()}
    finally:
        consumer.close()


def test_import_plans_then_commits_and_a_consumer_starts_there(
    zookeeper: str, zk: Any, ours: ServerProcess
) -> None:
    create_topics(ours.bootstrap, zi_orders=3)
    register(zk, "", "zi-billing", {("zi_orders", 0): "42", ("zi_orders", 1): "7\n", ("zi_orders", 2): "0"})
    argv = ["offsets", "import", "--from-zookeeper", zookeeper, "--group", "zi-billing"]

    plan = cli(ours.bootstrap, *argv, "--format", "json")
    assert plan.code == 0, plan.err
    assert plan.json()["executed"] is False
    assert [
        (p["topic"], p["partition"], p["new_offset"], p["status"])
        for p in plan.json()["groups"][0]["partitions"]
    ] == [
        ("zi_orders", 0, 42, "planned"),
        ("zi_orders", 1, 7, "planned"),
        ("zi_orders", 2, 0, "planned"),
    ]
    assert "Dry run" in plan.err
    assert committed(ours.bootstrap, "zi-billing") == {}

    done = cli(ours.bootstrap, *argv, "--execute")
    assert done.code == 0, done.err
    rows = table_rows(done.out)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "STATUS"]
    assert all(row[-1] == "committed" for row in rows[1:]) and len(rows) == 4
    assert committed(ours.bootstrap, "zi-billing") == {
        ("zi_orders", 0): (42, ""),
        ("zi_orders", 1): (7, ""),
        ("zi_orders", 2): (0, ""),
    }
    assert _start_position(ours.bootstrap, "zi-billing", "zi_orders") == {
        ("zi_orders", 0): 42,
        ("zi_orders", 1): 7,
        ("zi_orders", 2): 0,
    }


def test_all_groups_and_topic_filter(zookeeper: str, zk: Any, ours: ServerProcess) -> None:
    create_topics(ours.bootstrap, za_a=1, za_b=1)
    register(zk, "/za", "za-one", {("za_a", 0): "5", ("za_b", 0): "6"})
    register(zk, "/za", "za-two", {("za_a", 0): "8"})
    result = cli(
        ours.bootstrap, "offsets", "import", "--from-zookeeper", f"{zookeeper}/za", "--all-groups",
        "--topic", "za_a", "--execute", "--format", "json",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert committed(ours.bootstrap, "za-one") == {("za_a", 0): (5, "")}
    assert committed(ours.bootstrap, "za-two") == {("za_a", 0): (8, "")}


def test_live_registered_consumers_refuse_the_import(zookeeper: str, zk: Any, ours: ServerProcess) -> None:
    create_topics(ours.bootstrap, zv_orders=1)
    register(
        zk, "/zv", "zv-live", {("zv_orders", 0): "9"},
        instances={"web7:0c1f": True, "zv-live_old-1600000000000-deadbeef": False},
    )  # fmt: skip
    argv = ["offsets", "import", "--from-zookeeper", f"{zookeeper}/zv", "--group", "zv-live", "--execute"]
    refused = cli(ours.bootstrap, *argv)
    assert refused.code == 1
    assert "NON_EMPTY_GROUP" in refused.err and "web7:0c1f (host web7)" in refused.err
    assert "--ignore-live-consumers" in refused.err
    # The persistent leftover registration is not a live consumer.
    assert "zv-live_old" not in refused.err.split("NON_EMPTY_GROUP")[1]
    assert committed(ours.bootstrap, "zv-live") == {}

    forced = cli(ours.bootstrap, *argv, "--ignore-live-consumers")
    assert forced.code == 0, forced.err
    assert committed(ours.bootstrap, "zv-live") == {("zv_orders", 0): (9, "")}


def test_a_live_group_here_refuses_the_import(zookeeper: str, zk: Any, ours: ServerProcess) -> None:
    create_topics(ours.bootstrap, zh_orders=1)
    register(zk, "/zh", "zh-busy", {("zh_orders", 0): "4"})
    with live_consumer(ours.bootstrap, "zh-busy", ["zh_orders"], "zh-member"):
        result = cli(
            ours.bootstrap,
            "offsets",
            "import",
            "--from-zookeeper",
            f"{zookeeper}/zh",
            "--group",
            "zh-busy",
            "--execute",
        )
    assert result.code == 1
    assert result.err.startswith("NON_EMPTY_GROUP: cannot import offsets into group 'zh-busy'")


def test_missing_topics_fail_skip_or_create(zookeeper: str, zk: Any, ours: ServerProcess) -> None:
    create_topics(ours.bootstrap, zm_here=1)
    register(zk, "/zm", "zm-g", {("zm_here", 0): "1", ("zm_here", 2): "3", ("zm_new", 1): "2"})
    argv = ["offsets", "import", "--from-zookeeper", f"{zookeeper}/zm", "--group", "zm-g", "--execute"]

    failed = cli(ours.bootstrap, *argv)
    assert failed.code == 1
    assert "zm_here (has 1 partitions, needs 3)" in failed.err and "zm_new (missing)" in failed.err
    assert committed(ours.bootstrap, "zm-g") == {}

    skipped = cli(ours.bootstrap, *argv, "--missing-topics", "skip", "--format", "json")
    assert skipped.code == 0, skipped.err
    statuses = {(p["topic"], p["partition"]): p["status"] for p in skipped.json()["groups"][0]["partitions"]}
    assert statuses == {
        ("zm_here", 0): "committed",
        ("zm_here", 2): "skipped: no such partition",
        ("zm_new", 1): "skipped: no such topic",
    }
    assert committed(ours.bootstrap, "zm-g") == {("zm_here", 0): (1, "")}

    created = cli(ours.bootstrap, *argv, "--missing-topics", "create")
    assert created.code == 0, created.err
    assert committed(ours.bootstrap, "zm-g") == {
        ("zm_here", 0): (1, ""),
        ("zm_here", 2): (3, ""),
        ("zm_new", 1): (2, ""),
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("12x", "is not a non-negative integer"),
        ("-5", "is not a non-negative integer"),
        ("", "is not a non-negative integer"),
    ],
)
def test_bad_offsets_commit_nothing(
    zookeeper: str, zk: Any, ours: ServerProcess, value: str, message: str
) -> None:
    root = "/zb" + str(["12x", "-5", ""].index(value))
    register(zk, root, "zb-g", {("zb_orders", 0): "10", ("zb_orders", 1): value})
    result = cli(
        ours.bootstrap,
        "offsets",
        "import",
        "--from-zookeeper",
        zookeeper + root,
        "--group",
        "zb-g",
        "--execute",
    )
    assert result.code == 1
    assert f"{root}/consumers/zb-g/offsets/zb_orders/1" in result.err and message in result.err
    assert committed(ours.bootstrap, "zb-g") == {}


def test_unexpected_children_and_names_are_refused(zookeeper: str, zk: Any, ours: ServerProcess) -> None:
    register(zk, "/zu", "zu-g", {("zu_orders", 0): "1"})
    zk.create("/zu/consumers/zu-g/offsets/zu_orders/0/extra", b"x")
    result = cli(
        ours.bootstrap, "offsets", "import", "--from-zookeeper", f"{zookeeper}/zu", "--group", "zu-g"
    )
    assert result.code == 1
    assert (
        "/zu/consumers/zu-g/offsets/zu_orders/0: a partition znode has unexpected children ['extra']"
        in result.err
    )

    register(zk, "/zu2", "zu-g", {("zu_orders", 0): "1"})
    zk.create("/zu2/consumers/zu-g/offsets/zu_orders/first", b"3")
    named = cli(
        ours.bootstrap, "offsets", "import", "--from-zookeeper", f"{zookeeper}/zu2", "--group", "zu-g"
    )
    assert named.code == 1 and "'first' is not a partition number" in named.err


def test_unreachable_zookeeper_missing_chroot_and_unknown_group(zookeeper: str, ours: ServerProcess) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    down = cli(ours.bootstrap, "groups", "list", "--from-zookeeper", nobody, "--timeout", "2")
    assert down.code == 1
    assert f"cannot connect to ZooKeeper at {nobody} within 2 s" in down.err
    assert time.monotonic() - started < 15

    chroot = cli(ours.bootstrap, "groups", "list", "--from-zookeeper", f"{zookeeper}/no-such-chroot")
    assert chroot.code == 1 and "the chroot /no-such-chroot does not exist" in chroot.err

    unknown = cli(ours.bootstrap, "offsets", "import", "--from-zookeeper", zookeeper, "--group", "zz-nobody")
    assert unknown.code == 1 and "no ZooKeeper-era group 'zz-nobody'" in unknown.err


@pytest.mark.parametrize(
    "argv",
    [
        ["offsets", "import", "--from-zookeeper", "no-port", "--group", "g"],
        ["offsets", "import", "--from-zookeeper", "127.0.0.1:2181"],
        ["offsets", "import", "--from-zookeeper", "127.0.0.1:2181", "--group", "g", "file.csv"],
        ["offsets", "import", "g", "file.csv", "--topic", "t"],
        ["groups", "list", "--from-zookeeper", "127.0.0.1:2181", "--state", "Stable"],
    ],
)
def test_usage_errors(argv: list[str]) -> None:
    result = cli("127.0.0.1:1", *argv)
    assert result.code == 2, result.err


# -- pure parts --------------------------------------------------------------------------


def test_parse_zk_address() -> None:
    assert str(parse_zk_address("a:1,b:2/kafka/old")) == "a:1,b:2/kafka/old"
    assert parse_zk_address("a:1/").chroot == ""
    assert parse_zk_address("a:1").chroot == ""
    for bad in ("", "/x", "a", "a:x", "a:0", "a:1,b", "a:1/x//y"):
        with pytest.raises(ValueError):
            parse_zk_address(bad)


def test_instance_host() -> None:
    assert instance_host("g", "g_web-1.example-1700000000000-1a2b3c4d", {}) == "web-1.example"
    assert instance_host("g", "web1:5d0f-77", {}) == "web1"
    assert instance_host("g", "opaque", {}) is None
    assert instance_host("g", "opaque", {"host": "h9"}) == "h9"


def test_parse_offset() -> None:
    assert parse_offset("/p", b" 17\n") == 17
    with pytest.raises(ZooKeeperError, match=r"/p: the offset '1\.5'"):
        parse_offset("/p", b"1.5")


class _FlakyClient:
    """Commits fail for one partition: the group's offsets must be put back as they were."""

    def __init__(self) -> None:
        self.offsets: dict[TP, int] = {TP("t", 0): 3}

    def commit_offsets(self, group: str, offsets: dict[TP, Committed]) -> dict[TP, int]:
        result = {}
        for tp, c in offsets.items():
            if tp.partition == 2:
                result[tp] = 3  # UNKNOWN_TOPIC_OR_PARTITION
            else:
                self.offsets[tp] = c.offset
                result[tp] = 0
        return result

    def delete_offsets(self, group: str, partitions: Any) -> tuple[int, dict[TP, int]]:
        for tp in partitions:
            self.offsets.pop(tp, None)
        return 0, {}


def test_a_partly_failed_commit_is_rolled_back() -> None:
    client = _FlakyClient()
    plan = GroupPlan("g", [Row(TP("t", 0), 10, current=3), Row(TP("t", 1), 11), Row(TP("t", 2), 12)])
    _commit_group(client, plan)  # type: ignore[arg-type]
    assert plan.failed
    assert client.offsets == {TP("t", 0): 3}
    assert [r.status for r in plan.rows] == [
        "rolled back",
        "rolled back",
        "rolled back (UNKNOWN_TOPIC_OR_PARTITION)",
    ]


def test_topic_partition_helper_matches_kafka_python() -> None:
    # The CLI's TP and kafka-python's TopicPartition name the same partition.
    assert tuple(TP("x", 1)) == tuple(TopicPartition("x", 1))
