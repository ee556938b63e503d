"""The admin CLI on KIP-848 consumer groups (confluent-kafka, group.protocol=consumer) next to classic ones.

One server subprocess for the module; a consumer group of two confluent consumers on a 6-partition
topic and a classic group (kafka-python) stay alive for the read-only tests. Answers are checked
against the server's own ConsumerGroupDescribe and confluent-kafka's AdminClient.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import NewTopic

from coordinator.cli.admin.cli import build_parser
from coordinator.cli.admin.client import TP, AdminClient, Committed, GroupDescription
from coordinator.cli.admin.errors import KafkaError
from coordinator.cli.admin.offsets_cmd import offsets_reset
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest, DescribedGroup
from tests.admin.support import cli, committed, live_consumer, table_rows
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

TOPIC = "cg_t"
PARTITIONS = 6
GROUP = "cg-live"
CLASSIC_GROUP = "cg-classic"
CLASSIC_TOPIC = "cg_classic_t"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    extra = {"group-consumer-heartbeat-interval-ms": "500", "group-consumer-session-timeout-ms": "6000"}
    with running_server("memory://", extra) as srv:
        admin = ConfluentAdmin({"bootstrap.servers": srv.bootstrap})
        topics = [NewTopic(TOPIC, PARTITIONS, 1), NewTopic(CLASSIC_TOPIC, 2, 1), NewTopic("cg_ops_t", 4, 1)]
        for future in admin.create_topics(topics).values():
            future.result(10)
        yield srv


@contextlib.contextmanager
def consumer_group(bootstrap: str, group: str, topic: str, partitions: int) -> Iterator[list[Consumer]]:
    """Two confluent consumers (KIP-848 protocol) polled until each owns half of the topic."""
    consumers: list[Consumer] = []
    try:
        for i in range(2):
            consumer = Consumer(
                {
                    "group.protocol": "consumer",
                    "group.id": group,
                    "bootstrap.servers": bootstrap,
                    "client.id": f"{group}-c{i}",
                    "enable.auto.commit": False,
                }
            )
            consumers.append(consumer)
            consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while [len(c.assignment()) for c in consumers] != [partitions // 2] * 2:
            assert time.monotonic() < deadline, [c.assignment() for c in consumers]
            for c in consumers:
                c.poll(0.05)
        yield consumers
    finally:
        for c in consumers:
            c.close()


def raw_describe(bootstrap: str, group: str, version: int = 1) -> DescribedGroup:
    """The server's own ConsumerGroupDescribe answer (the oracle for epochs)."""
    with WireClient(bootstrap) as wire:
        response = wire.request(
            ApiKey.CONSUMER_GROUP_DESCRIBE, version, ConsumerGroupDescribeRequest(group_ids=[group])
        )
    (described,) = response.groups
    assert isinstance(described, DescribedGroup)
    return described


def describe_json(bootstrap: str, *groups: str) -> list[dict[str, Any]]:
    result = cli(bootstrap, "groups", "describe", *groups, "--members", "--state", "--format", "json")
    assert result.code == 0, result
    docs: list[dict[str, Any]] = result.json()
    return docs


def wait_until_settled(bootstrap: str, group: str) -> dict[str, Any]:
    """The group's JSON once Stable with every member at its target assignment."""
    deadline = time.monotonic() + 15
    while True:
        (doc,) = describe_json(bootstrap, group)
        members = doc.get("members", [])
        if doc["state"] == "Stable" and all(m["assignment"] == m["target_assignment"] for m in members):
            return doc
        assert time.monotonic() < deadline, doc
        time.sleep(0.1)


@dataclass
class LiveGroups:
    bootstrap: str
    consumers: list[Consumer]
    member_ids: set[str]


@pytest.fixture(scope="module")
def live(server: ServerProcess) -> Iterator[LiveGroups]:
    """GROUP: two KIP-848 consumers on TOPIC; CLASSIC_GROUP: one kafka-python (classic) consumer."""
    b = server.bootstrap
    with (
        consumer_group(b, GROUP, TOPIC, PARTITIONS) as consumers,
        live_consumer(b, CLASSIC_GROUP, [CLASSIC_TOPIC], "classic-client"),
    ):
        doc = wait_until_settled(b, GROUP)
        yield LiveGroups(b, consumers, {m["member_id"] for m in doc["members"]})


def _partitions(assignment: dict[str, list[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def test_list_shows_the_group_type(live: LiveGroups) -> None:
    b = live.bootstrap
    result = cli(b, "groups", "list")
    assert result.code == 0, result
    rows = table_rows(result.out)
    assert rows[0] == ["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"]
    assert [GROUP, "Stable", "consumer", "consumer"] in rows
    assert [CLASSIC_GROUP, "Stable", "classic", "consumer"] in rows

    listed = {g["group"]: g for g in cli(b, "groups", "list", "--format", "json").json()}
    assert listed[GROUP] == {
        "group": GROUP, "state": "Stable", "type": "consumer", "protocol_type": "consumer", "broker": 0,
    }  # fmt: skip
    assert listed[CLASSIC_GROUP]["type"] == "classic"
    only_consumer = cli(b, "groups", "list", "--type", "Consumer", "--format", "json").json()
    assert GROUP in {g["group"] for g in only_consumer}
    assert CLASSIC_GROUP not in {g["group"] for g in only_consumer}

    admin = ConfluentAdmin({"bootstrap.servers": b})  # kept referenced until its futures complete
    confluent = admin.list_consumer_groups().result(10)
    types = {g.group_id: g.type.name for g in confluent.valid}
    assert (types[GROUP], types[CLASSIC_GROUP]) == ("CONSUMER", "CLASSIC")


def test_describe_json_matches_the_server_and_confluent(live: LiveGroups) -> None:
    b = live.bootstrap
    doc = wait_until_settled(b, GROUP)
    server_view = raw_describe(b, GROUP)
    assert doc["type"] == "consumer" and doc["state"] == "Stable"
    assert doc["group_epoch"] == server_view.group_epoch >= 1
    assert doc["assignment_epoch"] == server_view.assignment_epoch
    assert doc["assignor"] == server_view.assignor_name != ""
    assert doc["member_count"] == 2
    members = doc["members"]
    assert {m["member_id"] for m in members} == live.member_ids
    assert {m["client_id"] for m in members} == {f"{GROUP}-c0", f"{GROUP}-c1"}
    for m in members:
        assert set(m) == {
            "member_id", "instance_id", "rack_id", "client_id", "client_host", "member_epoch",
            "subscribed_topics", "subscribed_topic_regex", "assignment", "target_assignment",
        }  # fmt: skip
        assert isinstance(m["member_epoch"], int) and m["member_epoch"] >= 1
        assert m["instance_id"] is None and m["client_host"] == "/127.0.0.1"
        assert (m["subscribed_topics"], m["subscribed_topic_regex"]) == ([TOPIC], None)
        assert m["assignment"] == m["target_assignment"]
        assert len(m["assignment"][TOPIC]) == PARTITIONS // 2
    first, second = (_partitions(m["assignment"]) for m in members)
    assert not first & second
    assert first | second == {(TOPIC, p) for p in range(PARTITIONS)}
    raw_members = {m.member_id: m for m in server_view.members}
    for m in members:
        assert m["member_epoch"] == raw_members[m["member_id"]].member_epoch

    # confluent-kafka's AdminClient (ConsumerGroupDescribe in librdkafka) sees the same group.
    admin = ConfluentAdmin({"bootstrap.servers": b})  # kept referenced until its futures complete
    confluent = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
    assert (confluent.type.name, confluent.state.name) == ("CONSUMER", "STABLE")
    assert confluent.partition_assignor == doc["assignor"]
    seen = {
        m.member_id: (
            m.client_id,
            {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions},
            {(tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions},
        )
        for m in confluent.members
    }
    assert seen == {
        m["member_id"]: (m["client_id"], _partitions(m["assignment"]), _partitions(m["target_assignment"]))
        for m in members
    }
    # ... and so do the consumers themselves.
    owned = {frozenset((tp.topic, tp.partition) for tp in c.assignment()) for c in live.consumers}
    assert owned == {frozenset(_partitions(m["assignment"])) for m in members}


def test_describe_tables(live: LiveGroups) -> None:
    b = live.bootstrap
    doc = wait_until_settled(b, GROUP)
    state = cli(b, "groups", "describe", GROUP, "--state")
    assert state.code == 0, state
    rows = table_rows(state.out)
    assert rows[0] == [
        "GROUP", "COORDINATOR", "(ID)", "TYPE", "ASSIGNOR", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS",
    ]  # fmt: skip
    assert rows[1] == [
        GROUP, b, "(0)", "consumer", doc["assignor"], "Stable",
        str(doc["group_epoch"]), str(doc["assignment_epoch"]), "2",
    ]  # fmt: skip

    members = cli(b, "groups", "describe", GROUP, "--members")
    assert members.code == 0, members
    rows = table_rows(members.out)
    assert rows[0] == [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "SUBSCRIPTION",
        "#PARTITIONS", "ASSIGNMENT", "TARGET-ASSIGNMENT",
    ]  # fmt: skip
    by_id = {m["member_id"]: m for m in doc["members"]}
    assert {r[1] for r in rows[1:]} == set(by_id)
    for row in rows[1:]:
        m = by_id[row[1]]
        partitions = ",".join(map(str, m["assignment"][TOPIC]))
        assert row == [
            GROUP, m["member_id"], "-", "/127.0.0.1", m["client_id"], str(m["member_epoch"]), TOPIC,
            "3", f"{TOPIC}:{partitions}", f"{TOPIC}:{partitions}",
        ]  # fmt: skip

    offsets = cli(b, "groups", "describe", GROUP)  # the default view: owners from the current assignment
    rows = table_rows(offsets.out)
    assert rows[0][:3] == ["GROUP", "TOPIC", "PARTITION"]
    owners = {(r[1], int(r[2])): r[6] for r in rows[1:]}
    assert owners == {(TOPIC, p): mid for mid, m in by_id.items() for p in m["assignment"][TOPIC]}


def test_classic_and_consumer_groups_side_by_side(live: LiveGroups) -> None:
    b = live.bootstrap
    classic_doc, consumer_doc = describe_json(b, CLASSIC_GROUP, GROUP)
    assert (classic_doc["type"], classic_doc["state"], classic_doc["assignment_strategy"]) == (
        "classic", "Stable", "range",
    )  # fmt: skip
    assert "group_epoch" not in classic_doc
    (classic_member,) = classic_doc["members"]
    assert classic_member["client_id"] == "classic-client"
    assert [a["topic"] for a in classic_member["assignment"]] == [CLASSIC_TOPIC, CLASSIC_TOPIC]
    assert consumer_doc["type"] == "consumer" and len(consumer_doc["members"]) == 2

    # Tables: the classic sections keep kafka-consumer-groups' columns; consumer groups get their own.
    both = cli(b, "groups", "describe", CLASSIC_GROUP, GROUP, "--state", "--members")
    assert both.code == 0, both
    sections = [table_rows(s) for s in both.out.split("\n\n")]
    assert [s[0][:4] for s in sections] == [
        ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY"],
        ["GROUP", "COORDINATOR", "(ID)", "TYPE"],
        ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST"],
        ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST"],
    ]
    assert [[r[0] for r in s[1:]] for s in sections] == [
        [CLASSIC_GROUP],
        [GROUP],
        [CLASSIC_GROUP],
        [GROUP, GROUP],
    ]
    assert sections[2][1][-2:] == ["2", f"{CLASSIC_TOPIC}:0,1"]

    admin = ConfluentAdmin({"bootstrap.servers": b})  # kept referenced until its futures complete
    assert admin.describe_consumer_groups([CLASSIC_GROUP])[CLASSIC_GROUP].result(10).type.name == "CLASSIC"


def test_version_negotiation_and_describe_groups_fallback(live: LiveGroups) -> None:
    b = live.bootstrap
    with AdminClient(b) as client:
        conn = client._node(client.coordinator(GROUP))
        assert conn.version(ApiKey.CONSUMER_GROUP_DESCRIBE) == 1  # highest common version
        sent: list[tuple[ApiKey, int | None]] = []
        request = conn.request

        def recording(api: ApiKey, body: Any, version: int | None = None) -> Any:
            sent.append((api, version))
            return request(api, body, version)

        conn.request = recording  # type: ignore[method-assign]
        assert client.describe_group(GROUP).group_type == "consumer"
        assert sent == [(ApiKey.CONSUMER_GROUP_DESCRIBE, 1)]

        conn.versions[ApiKey.CONSUMER_GROUP_DESCRIBE] = (0, 0)  # a broker with v0 only
        sent.clear()
        v0 = client.describe_group(GROUP)
        assert sent == [(ApiKey.CONSUMER_GROUP_DESCRIBE, 0)]
        assert (v0.group_type, len(v0.members), v0.group_epoch) == (
            "consumer",
            2,
            raw_describe(b, GROUP, 0).group_epoch,
        )

        # A classic group: GROUP_ID_NOT_FOUND from ConsumerGroupDescribe, then DescribeGroups.
        client.coordinator(CLASSIC_GROUP)
        sent.clear()
        classic = client.describe_group(CLASSIC_GROUP)
        # (StreamsGroupDescribe in between: the coordinator serves streams groups too.)
        assert [api for api, _v in sent] == [
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            ApiKey.STREAMS_GROUP_DESCRIBE,
            ApiKey.DESCRIBE_GROUPS,
        ]
        assert (classic.group_type, classic.state, len(classic.members)) == ("classic", "Stable", 1)

        # A broker without ConsumerGroupDescribe: DescribeGroups only, which answers a consumer
        # group as Dead (DescribeGroups v0-5), so it is not found, as with Kafka's older admin tools.
        del conn.versions[ApiKey.CONSUMER_GROUP_DESCRIBE]
        del conn.versions[ApiKey.STREAMS_GROUP_DESCRIBE]
        sent.clear()
        with pytest.raises(KafkaError) as missing:
            client.describe_group(GROUP)
        assert missing.value.name == "GROUP_ID_NOT_FOUND"
        assert [api for api, _v in sent] == [ApiKey.DESCRIBE_GROUPS]
        assert client.describe_group(CLASSIC_GROUP).group_type == "classic"

    unknown = cli(b, "groups", "describe", "cg-no-such-group", "--format", "json")
    assert (unknown.code, unknown.out) == (1, "")
    assert unknown.err.startswith("GROUP_ID_NOT_FOUND: group 'cg-no-such-group' does not exist")


class _StaleCheckClient(AdminClient):
    """Says the group is Empty on the first look, as if its consumers joined right after the check."""

    looked = False

    def describe_group(self, group: str, must_exist: bool = True) -> GroupDescription:
        described = super().describe_group(group, must_exist)
        if not self.looked:
            self.looked = True
            return replace(described, state="Empty", members=[])
        return described


def test_offsets_and_delete_on_a_consumer_group(server: ServerProcess) -> None:
    b = server.bootstrap
    group, topic = "cg-ops", "cg_ops_t"
    with consumer_group(b, group, topic, 4) as consumers:
        for c in consumers:
            c.commit(
                offsets=[TopicPartition(tp.topic, tp.partition, 7) for tp in c.assignment()],
                asynchronous=False,
            )
        assert {tp: o for tp, (o, _m) in committed(b, group).items()} == {(topic, p): 7 for p in range(4)}
        exported = cli(b, "offsets", "export", group)
        assert (exported.code, exported.out) == (0, "".join(f"{topic},{p},7\n" for p in range(4)))

        for argv in (
            ["offsets", "reset", group, "--all-topics", "--to-earliest", "--execute"],
            ["offsets", "reset", group, "--topic", topic, "--to-offset", "1", "--dry-run"],
        ):
            refused = cli(b, *argv)
            assert (refused.code, refused.out) == (1, ""), refused
            assert refused.err.strip() == (
                f"NON_EMPTY_GROUP: cannot reset the offsets of group '{group}' while it has active members "
                "(state Stable, 2 members); stop its consumers first"
            )
        busy = cli(b, "offsets", "delete", group, "--topic", f"{topic}:0")
        assert busy.code == 1 and "GROUP_SUBSCRIBED_TO_TOPIC" in busy.err
        live_delete = cli(b, "groups", "delete", group)
        assert live_delete.code == 1 and table_rows(live_delete.out)[1] == [group, "NON_EMPTY_GROUP"]

        # The server refuses a non-member (epoch -1) commit to a live consumer group with
        # UNKNOWN_MEMBER_ID; when members joined after the check, reset says so as above.
        with AdminClient(b) as client:
            assert client.commit_offsets(group, {TP(topic, 0): Committed(1)}) == {
                TP(topic, 0): ErrorCode.UNKNOWN_MEMBER_ID
            }
        args = build_parser().parse_args(
            ["offsets", "reset", group, "--all-topics", "--to-offset", "1", "--no-clamp", "--execute"]
        )
        with _StaleCheckClient(b) as stale, pytest.raises(KafkaError) as raced:
            offsets_reset(stale, args)
        assert str(raced.value).startswith(
            f"NON_EMPTY_GROUP: cannot reset the offsets of group '{group}' while it has active members"
        )
        assert {tp: o for tp, (o, _m) in committed(b, group).items()} == {(topic, p): 7 for p in range(4)}

    # Without members (the consumers left), offsets can be reset and deleted and the group deleted.
    deadline = time.monotonic() + 10
    while (state := cli(b, "groups", "describe", group, "--state", "--format", "json").json()[0])[
        "state"
    ] != "Empty":
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert (state["type"], state["member_count"]) == ("consumer", 0)
    reset = cli(b, "offsets", "reset", group, "--all-topics", "--to-offset", "3", "--no-clamp", "--execute")
    assert reset.code == 0, reset
    assert {tp: o for tp, (o, _m) in committed(b, group).items()} == {(topic, p): 3 for p in range(4)}
    dropped = cli(b, "offsets", "delete", group, "--topic", f"{topic}:0")
    assert dropped.code == 0, dropped
    assert set(committed(b, group)) == {(topic, p) for p in range(1, 4)}
    deleted = cli(b, "groups", "delete", group, "--format", "json")
    assert (deleted.code, deleted.json()) == (0, [{"group": group, "deleted": True, "error": None}])
    assert committed(b, group) == {}
    gone = cli(b, "groups", "describe", group)
    assert gone.code == 1 and gone.err.startswith(f"GROUP_ID_NOT_FOUND: group '{group}' does not exist")
