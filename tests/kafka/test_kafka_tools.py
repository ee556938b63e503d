"""Kafka's own command-line tools against Kafka's coordinator and against ours, run in the session
JVM: ``kafka-consumer-groups`` (ConsumerGroupCommand: --list, --describe with --members, --offsets,
--state, --reset-offsets with every strategy in --dry-run and --execute, --delete-offsets,
--delete) and ``kafka-configs --entity-type groups`` (ConfigCommand). The outputs compare equal
once what legitimately differs is normalized: member ids, the coordinator's address and node id,
column widths, the order of table rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kafka.conftest import GROUP_CONFIG_DEFAULTS, Sides
from tests.support.java_driver import CONFIG_COMMAND, CONSUMER_GROUP_COMMAND, SHARE_GROUP_COMMAND, JavaDriver

pytestmark = pytest.mark.kafka

PARTITIONS = 3
PER_PARTITION = 10
_MEMBER_ID = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_COORDINATOR = re.compile(r"\d+\.\d+\.\d+\.\d+:\d+\s+\(\d+\)")
# The group configs both serve; Kafka 4.4 also has those of share and streams groups and
# dead-letter queues (docs/kafka-differences.md#group-configs).
_SERVED_CONFIG = re.compile(
    r"^\s+(consumer\.(session\.timeout|heartbeat\.interval)\.ms"
    r"|streams\.(session\.timeout\.ms|heartbeat\.interval\.ms|num\.standby\.replicas|initial\.rebalance\.delay\.ms"
    r"|assignment\.interval\.ms))="
)


def normalized(output: str, bootstrap: str, prefix: str, every_group: bool = False) -> list[str]:
    """The output's lines, each with its columns single-spaced, member ids, addresses and the
    coordinator masked, sorted (table rows come in no fixed order). A listing of every group of
    the broker (``every_group``: --list, --all-groups) keeps the rows of this test's groups and
    its distinct headers: other tests make groups on the shared broker, some on one side only
    (tests/kafka/test_codecs_against_kafka.py sends its requests to Kafka alone)."""
    lines = []
    for raw in output.splitlines():
        line = _COORDINATOR.sub("<coordinator>", _MEMBER_ID.sub("-<member>", raw))
        line = line.replace(bootstrap, "<bootstrap>")
        line = " ".join(line.split())
        if line:
            lines.append(line)
    if every_group:
        headers = {line for line in lines if line.startswith("GROUP ")}
        own = [line for line in lines if line.startswith(f"{prefix}-") or f"'{prefix}-" in line]
        lines = own + sorted(headers)
    return sorted(lines)


def _lists_every_group(command: list[str]) -> bool:
    return "--list" in command or "--all-groups" in command


def _reset(group: str, topic: str, *strategy: str) -> list[str]:
    return ["--reset-offsets", "--group", group, "--topic", topic, *strategy]


def _consumer_group_commands(prefix: str, topic: str, offsets_file: Path) -> list[list[str]]:
    idle, active, missing = f"{prefix}-idle", f"{prefix}-active", f"{prefix}-missing"
    describe_idle = ["--describe", "--group", idle, "--offsets"]
    return [
        ["--list"],
        ["--list", "--state"],
        ["--list", "--state", "Stable"],
        ["--list", "--type"],
        ["--describe", "--group", idle],
        ["--describe", "--group", idle, "--members"],
        ["--describe", "--group", idle, "--state"],
        ["--describe", "--group", active, "--members"],
        ["--describe", "--group", active, "--members", "--verbose"],
        ["--describe", "--group", active, "--state"],
        ["--describe", "--group", active, "--offsets"],
        ["--describe", "--all-groups", "--state"],
        _reset(idle, topic, "--to-earliest", "--dry-run"),
        describe_idle,
        _reset(idle, topic, "--to-latest", "--execute"),
        describe_idle,
        _reset(idle, topic, "--to-offset", "3", "--execute"),
        describe_idle,
        _reset(idle, topic, "--shift-by", "-1", "--execute"),
        describe_idle,
        _reset(idle, topic, "--shift-by", "100", "--dry-run"),
        _reset(idle, topic, "--to-datetime", "2000-01-01T00:00:00.000", "--execute"),
        describe_idle,
        _reset(idle, topic, "--by-duration", "PT1H", "--dry-run"),
        _reset(idle, topic, "--to-current", "--dry-run"),
        _reset(idle, f"{topic}:0,2", "--to-offset", "7", "--execute"),
        describe_idle,
        ["--reset-offsets", "--group", idle, "--from-file", str(offsets_file), "--execute"],
        describe_idle,
        ["--reset-offsets", "--group", idle, "--all-topics", "--to-latest", "--execute"],
        _reset(active, topic, "--to-earliest", "--execute"),
        ["--delete-offsets", "--group", active, "--topic", topic],
        ["--delete-offsets", "--group", idle, "--topic", f"{topic}:0"],
        describe_idle,
        ["--delete-offsets", "--group", missing, "--topic", topic],
        ["--delete", "--group", active],
        ["--delete", "--group", missing],
        ["--delete", "--group", idle],
        ["--list"],
    ]


def _config_commands(group: str) -> list[list[str]]:
    entity = ["--entity-type", "groups", "--entity-name", group]
    return [
        [*entity, "--describe"],
        [*entity, "--alter", "--add-config", "consumer.session.timeout.ms=50000"],
        [*entity, "--describe"],
        [*entity, "--describe", "--all"],
        [
            *entity,
            "--alter",
            "--add-config",
            "consumer.heartbeat.interval.ms=600,consumer.session.timeout.ms=40000",
        ],
        [*entity, "--describe"],
        [*entity, "--alter", "--add-config", "no.such.config=1"],
        [*entity, "--alter", "--add-config", "consumer.session.timeout.ms=0"],
        [*entity, "--alter", "--delete-config", "consumer.session.timeout.ms,consumer.heartbeat.interval.ms"],
        [*entity, "--describe"],
        # The streams groups' configs (docs/streams-groups.md#group-configs).
        [
            *entity,
            "--alter",
            "--add-config",
            "streams.num.standby.replicas=1,streams.initial.rebalance.delay.ms=0",
        ],
        [*entity, "--describe"],
        [*entity, "--describe", "--all"],
        [*entity, "--alter", "--add-config", "streams.num.standby.replicas=3"],
        [*entity, "--alter", "--add-config", "streams.heartbeat.interval.ms=100"],
        [
            *entity,
            "--alter",
            "--add-config",
            "streams.session.timeout.ms=1000,streams.heartbeat.interval.ms=1000",
        ],
        [*entity, "--alter", "--add-config", "streams.initial.rebalance.delay.ms=-1"],
        [*entity, "--alter", "--add-config", "streams.assignment.interval.ms=20000"],
        [*entity, "--alter", "--add-config", "streams.assignment.interval.ms=500"],
        [*entity, "--describe"],
        [
            *entity,
            "--alter",
            "--delete-config",
            "streams.num.standby.replicas,streams.initial.rebalance.delay.ms,streams.assignment.interval.ms",
        ],
        [*entity, "--describe"],
    ]


def _altered_to(command: list[str]) -> dict[str, str]:
    """The group configs a successful ``kafka-configs --alter`` leaves."""
    option, value = command[-2:]
    if option == "--delete-config":
        return {name: GROUP_CONFIG_DEFAULTS[name] for name in value.split(",")}
    return dict(pair.split("=", 1) for pair in value.split(","))


def _first_line_of_error(stderr: str) -> str:
    """A failing tool prints its exception (a Java stack trace) on stderr: its first line says it."""
    return stderr.splitlines()[0] if stderr.strip() else ""


def test_kafka_consumer_groups_prints_the_same(
    sides: Sides, java_driver: JavaDriver, unique: str, tmp_path: Path
) -> None:
    topic = f"{unique}-tool"
    java_driver.produce(sides.kafka, topic, PARTITIONS, PER_PARTITION)
    offsets_file = tmp_path / "offsets.csv"
    offsets_file.write_text(f"{topic},0,4\n{topic},1,5\n{topic},2,6\n")
    commands = _consumer_group_commands(unique, topic, offsets_file)
    outputs: dict[str, list[tuple[int, list[str], str]]] = {}
    for side, bootstrap in sides.items():
        java_driver.admin(
            bootstrap,
            "alter_offsets",
            group=f"{unique}-idle",
            offsets={f"{topic}-{p}": 2 * p for p in range(3)},
        )
        java_driver.consume(
            bootstrap,
            f"{unique}-active",
            topics=[topic],
            partitions=PARTITIONS,
            records=PARTITIONS * PER_PARTITION,
            protocol="classic",
            assignor="range",
            members=[{"client_id": f"{unique}-c{i}", "instance_id": f"{unique}-i{i}"} for i in range(2)],
            hold=f"{unique}-{side}",
        )
        try:
            outputs[side] = []
            for command in commands:
                run = java_driver.tool(CONSUMER_GROUP_COMMAND, "--bootstrap-server", bootstrap, *command)
                outputs[side].append(
                    (
                        run.status,
                        normalized(run.stdout, bootstrap, unique, _lists_every_group(command)),
                        _first_line_of_error(run.stderr).replace(bootstrap, "<bootstrap>"),
                    )
                )
        finally:
            java_driver.release(f"{unique}-{side}")
    for command, kafka, ours in zip(commands, outputs["kafka"], outputs["ours"], strict=True):
        assert (command, ours) == (command, kafka)


def test_kafka_configs_prints_the_same(any_sides: Sides, java_driver: JavaDriver, unique: str) -> None:
    sides = any_sides
    group = f"{unique}-configs"
    topic = f"{unique}-configs"
    java_driver.produce(sides.kafka, topic, 1, 1)
    java_driver.produce(sides.ours, topic, 1, 0)  # standalone: the topic in our catalog
    commands = _config_commands(group)
    outputs: dict[str, list[tuple[int, list[str], str]]] = {}
    for side, bootstrap in sides.items():
        # A group that exists (ListGroups names it), so the tool describes it on both sides:
        # see test_kafka_configs_on_a_group_that_does_not_exist.
        java_driver.admin(bootstrap, "alter_offsets", group=group, offsets={f"{topic}-0": 1})
        outputs[side] = []
        for command in commands:
            run = java_driver.tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *command)
            if "--alter" in command and run.status == 0:
                java_driver.wait_for_group_configs(bootstrap, group, _altered_to(command))
            lines = [
                line
                for line in normalized(run.stdout, bootstrap, unique)
                if not line.startswith(("consumer.", "share.", "streams.", "errors."))
                or _SERVED_CONFIG.match(" " + line)
            ]
            outputs[side].append(
                (run.status, lines, _first_line_of_error(run.stderr).replace(bootstrap, "<bootstrap>"))
            )
    for command, kafka, ours in zip(commands, outputs["kafka"], outputs["ours"], strict=True):
        assert (command, ours) == (command, kafka)


def test_kafka_configs_on_a_group_that_does_not_exist(
    any_sides: Sides, java_driver: JavaDriver, unique: str
) -> None:
    """kafka-configs 4.4 asks ListGroups and ListConfigResources (KIP-1142) whether the group has
    members or dynamic configs (docs/group-configs.md#listing-config-resources)."""
    entity = ["--entity-type", "groups", "--entity-name", f"{unique}-nothing", "--describe"]
    kafka, ours = (
        java_driver.tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *entity).stdout
        for _, bootstrap in any_sides.items()
    )
    assert kafka == f"The group '{unique}-nothing' doesn't exist and doesn't have dynamic config.\n"
    assert ours == kafka


# The share group configs both serve (Kafka 4.4 also has share.assignor.offload.enable).
_SHARE_CONFIG = re.compile(r"^\s*(share\.(?!assignor\.offload)|errors\.deadletterqueue\.)")


def _share_config_commands(group: str) -> list[list[str]]:
    entity = ["--entity-type", "groups", "--entity-name", group]
    return [
        [*entity, "--describe", "--all"],
        [
            *entity,
            "--alter",
            "--add-config",
            "share.delivery.count.limit=3,share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000",
        ],
        [*entity, "--describe"],
        [*entity, "--describe", "--all"],
        [*entity, "--alter", "--add-config", "share.delivery.count.limit=11"],
        [*entity, "--alter", "--add-config", "share.isolation.level=dirty"],
        [*entity, "--alter", "--add-config", "share.auto.offset.reset=by_duration:PT-1H"],
        [*entity, "--alter", "--add-config", "errors.deadletterqueue.topic.name=__dlq"],
        [*entity, "--alter", "--add-config", "errors.deadletterqueue.topic.name=nodlq"],
        [*entity, "--alter", "--add-config", "share.session.timeout.ms=1000"],
        [*entity, "--alter", "--delete-config", "share.delivery.count.limit,share.auto.offset.reset"],
        [*entity, "--describe"],
    ]


def test_kafka_configs_prints_the_same_for_share_configs(
    any_sides: Sides, java_driver: JavaDriver, unique: str
) -> None:
    sides = any_sides
    group = f"{unique}-share-configs"
    topic = f"{unique}-share-configs"
    java_driver.produce(sides.kafka, topic, 1, 1)
    java_driver.produce(sides.ours, topic, 1, 0)
    commands = _share_config_commands(group)
    defaults = {"share.delivery.count.limit": "5", "share.auto.offset.reset": "latest"}
    outputs: dict[str, list[tuple[int, list[str], str]]] = {}
    for side, bootstrap in sides.items():
        java_driver.admin(bootstrap, "alter_offsets", group=group, offsets={f"{topic}-0": 1})
        outputs[side] = []
        for command in commands:
            run = java_driver.tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *command)
            if "--alter" in command and run.status == 0:
                option, value = command[-2:]
                expected = (
                    {name: defaults[name] for name in value.split(",")}
                    if option == "--delete-config"
                    else dict(pair.split("=", 1) for pair in value.split(","))
                )
                java_driver.wait_for_group_configs(bootstrap, group, expected)
            lines = [
                line
                for line in normalized(run.stdout, bootstrap, unique)
                if not line.startswith(("consumer.", "share.", "streams.", "errors."))
                or _SHARE_CONFIG.match(line)
            ]
            outputs[side].append(
                (run.status, lines, _first_line_of_error(run.stderr).replace(bootstrap, "<bootstrap>"))
            )
    for command, kafka, ours in zip(commands, outputs["kafka"], outputs["ours"], strict=True):
        if ours != kafka:
            print("COMMAND", command, ours[0], kafka[0], ours[2], "|", kafka[2])
            print("  OURS ONLY ", sorted(set(ours[1]) - set(kafka[1])))
            print("  KAFKA ONLY", sorted(set(kafka[1]) - set(ours[1])))
    for command, kafka, ours in zip(commands, outputs["kafka"], outputs["ours"], strict=True):
        assert (command, ours) == (command, kafka)


def _share_group_commands(prefix: str, topic: str) -> list[list[str]]:
    group, missing = f"{prefix}-share", f"{prefix}-share-missing"
    describe = ["--describe", "--group", group, "--offsets"]
    return [
        ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run"],
        ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"],
        ["--list"],
        ["--list", "--state"],
        describe,
        ["--describe", "--group", group, "--state"],
        ["--describe", "--group", group, "--members"],
        ["--reset-offsets", "--group", group, "--topic", f"{topic}:1", "--to-offset", "3", "--execute"],
        describe,
        ["--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--execute"],
        describe,
        ["--reset-offsets", "--group", group, "--all-topics", "--to-offset", "2", "--dry-run"],
        ["--delete-offsets", "--group", group, "--topic", topic],
        describe,
        ["--delete-offsets", "--group", missing, "--topic", topic],
        ["--describe", "--group", missing, "--offsets"],
        ["--delete", "--group", group],
        ["--delete", "--group", missing],
        ["--list"],
    ]


def test_kafka_share_groups_prints_the_same(sides: Sides, java_driver: JavaDriver, unique: str) -> None:
    """kafka-share-groups (ShareGroupCommand) against Kafka's share groups and ours: start offsets
    set, described (with their lag), reset and deleted (docs/share-groups.md, "Admin")."""
    topic = f"{unique}-share-tool"
    java_driver.produce(sides.kafka, topic, 2, PER_PARTITION)
    commands = _share_group_commands(unique, topic)
    outputs: dict[str, list[tuple[int, list[str], str]]] = {}
    for side, bootstrap in sides.items():
        outputs[side] = []
        for command in commands:
            run = java_driver.tool(SHARE_GROUP_COMMAND, "--bootstrap-server", bootstrap, *command)
            outputs[side].append(
                (
                    run.status,
                    normalized(run.stdout, bootstrap, unique, _lists_every_group(command)),
                    _first_line_of_error(run.stderr).replace(bootstrap, "<bootstrap>"),
                )
            )
    for command, kafka, ours in zip(commands, outputs["kafka"], outputs["ours"], strict=True):
        if ours != kafka:
            print("COMMAND", command, ours[0], kafka[0], ours[2], "|", kafka[2])
            print("  OURS ONLY ", sorted(set(ours[1]) - set(kafka[1])))
            print("  KAFKA ONLY", sorted(set(kafka[1]) - set(ours[1])))
    for command, kafka, ours in zip(commands, outputs["kafka"], outputs["ours"], strict=True):
        assert (command, ours) == (command, kafka)
