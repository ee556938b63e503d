"""A classic group rebuilt from its stored record (docs/groups.md#loading), its subscribed topics
parsed when first read (docs/performance.md#restart-decoding)."""

from __future__ import annotations

import pytest

from coordinator.core.classic.group import ClassicGroup, Member, session_key
from coordinator.core.classic.records import group_from_record
from coordinator.core.state import GroupState
from storage.records import GroupMetadataRecord, MemberRecord
from tests.coordinator.harness import subscription


def member_record(member_id: str, metadata: bytes, instance_id: str | None = None) -> MemberRecord:
    return MemberRecord(member_id, instance_id, "client", "/127.0.0.1", -1, 10_000, metadata, b"x")


def record(
    *members: MemberRecord, protocol_type: str = "consumer", leader: str | None = None
) -> GroupMetadataRecord:
    return GroupMetadataRecord("g", protocol_type, 3, "range", leader, 1_000, members)


def added(rec: GroupMetadataRecord) -> ClassicGroup:
    """The group built member by member through add_member, as before loading went straight."""
    group = ClassicGroup(
        rec.group_id,
        state=GroupState.STABLE,
        state_ms=rec.state_ms,
        generation_id=rec.generation_id,
        protocol_type=rec.protocol_type,
        protocol_name=rec.protocol_name,
        leader_id=rec.leader_id,
    )
    for m in rec.members:
        group.add_member(
            Member(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout_ms,
                m.session_timeout_ms, rec.protocol_type or "", (("range", m.subscription),),
                session_key("g", m.member_id), m.assignment,
            ),
            None,
            0,
        )  # fmt: skip
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
    return group


def test_loaded_members_are_those_add_member_would_make() -> None:
    rec = record(
        member_record("a", subscription(["t"])),
        member_record("b", subscription(["u"]), instance_id="i-b"),
        leader="gone",
    )
    loaded, expected = group_from_record(rec), added(rec)
    assert loaded.members.keys() == expected.members.keys()
    for member_id, member in loaded.members.items():
        assert repr(member) == repr(expected.members[member_id])  # eq=False: compared field by field
    assert loaded.protocol_support == expected.protocol_support == {"range": 2}
    assert loaded.static_members == expected.static_members == {"i-b": "b"}
    assert loaded.leader_id == expected.leader_id == "a"
    assert loaded.num_awaiting_join == 0 and loaded.protocol_type == "consumer"


def test_a_static_member_stored_twice_does_not_load() -> None:
    rec = record(member_record("a", subscription(["t"]), "i"), member_record("b", subscription(["t"]), "i"))
    with pytest.raises(ValueError, match="static member i"):
        group_from_record(rec)


def test_subscribed_topics_are_those_of_the_members_as_loaded() -> None:
    group = group_from_record(
        record(member_record("a", subscription(["t"])), member_record("b", subscription(["u"])))
    )
    # A member joining before the first read changes nothing: the topics are recomputed when a
    # generation completes, as for a group that never restarted.
    group.add_member(
        Member(
            "c",
            None,
            "client",
            "h",
            1,
            1,
            "consumer",
            (("range", subscription(["v"])),),
            session_key("g", "c"),
        ),
        None,
        0,
    )
    group.remove_member("b")
    assert group.subscribed_topics == frozenset({"t", "u"})
    assert group.is_subscribed_to_topic("u") and not group.is_subscribed_to_topic("v")


def test_one_loaded_member_subscribed_topics() -> None:
    group = group_from_record(record(member_record("a", subscription(["t", "w"], version=1))))
    assert group.subscribed_topics == frozenset({"t", "w"})
    assert group.subscribed_topics is group.subscribed_topics  # parsed once


@pytest.mark.parametrize(
    ("protocol_type", "metadata", "expected"),
    [
        ("consumer", [subscription(["t"]), b"\x00"], None),  # one does not parse: unknown
        ("connect", [subscription(["t"])], None),  # not a consumer group
        ("consumer", [], frozenset()),
    ],
)
def test_loaded_subscribed_topics_as_computed(
    protocol_type: str, metadata: list[bytes], expected: frozenset[str] | None
) -> None:
    rec = record(*(member_record(f"m{i}", m) for i, m in enumerate(metadata)), protocol_type=protocol_type)
    group = group_from_record(rec)
    assert group.subscribed_topics == expected == added(rec).compute_subscribed_topics()
