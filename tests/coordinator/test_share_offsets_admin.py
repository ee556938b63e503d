"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on the pure core
(docs/share-groups.md, "Admin")."""

from __future__ import annotations

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.offsets_admin import delivery_complete_count, share_lag
from coordinator.core.share.partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    PersistedShareState,
    ShareLimits,
    SharePartition,
)
from coordinator.core.share.records import partition_state_record
from protocol.errors import ErrorCode
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from storage.records import SharePartitionStateRecord
from tests.coordinator.consumer_harness import cg_heartbeat
from tests.coordinator.harness import Harness, Reply

HEARTBEAT, DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 76, 90, 91, 92


@pytest.fixture
def h() -> Harness:
    harness = Harness(BrokerGroupSettings(group_initial_rebalance_delay_ms=0))
    harness.catalog.set_topic("t", 2)
    harness.catalog.set_topic("u", 1)
    return harness


def manager(h: Harness) -> ShareGroupManager:
    return h.coordinator.kind(ShareGroupManager)


def send(h: Harness, api: int, version: int, request: object) -> Reply:
    ctx = h.ctx(api, version)
    h.apply(h.coordinator.handle(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


def join(h: Harness, member: str = "a", group: str = "g") -> None:
    req = ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=["t"]
    )
    assert send(h, HEARTBEAT, 1, req).wire.error_code == 0


def leave(h: Harness, member: str = "a", group: str = "g") -> None:
    req = ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1)
    assert send(h, HEARTBEAT, 1, req).wire.error_code == 0


def describe(
    h: Harness, group: str = "g", topics: dict[str, list[int]] | None = None, version: int = 1
) -> Reply:
    wanted = (
        None if topics is None else [DescribeShareGroupOffsetsRequestTopic(t, p) for t, p in topics.items()]
    )
    return send(
        h,
        DESCRIBE_OFFSETS,
        version,
        DescribeShareGroupOffsetsRequest([DescribeShareGroupOffsetsRequestGroup(group, wanted)]),
    )


def offsets(reply: Reply) -> dict[tuple[str, int], tuple[int, int]]:
    (group,) = reply.wire.groups
    assert group.error_code == 0
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in group.topics for p in t.partitions
    }


def alter(h: Harness, group: str = "g", **topics: dict[int, int]) -> Reply:
    request = AlterShareGroupOffsetsRequest(
        group_id=group,
        topics=[
            AlterShareGroupOffsetsRequestTopic(
                name, [AlterShareGroupOffsetsRequestPartition(p, o) for p, o in parts.items()]
            )
            for name, parts in topics.items()
        ],
    )
    return send(h, ALTER_OFFSETS, 0, request)


def delete(h: Harness, *topics: str, group: str = "g") -> Reply:
    request = DeleteShareGroupOffsetsRequest(group, [DeleteShareGroupOffsetsRequestTopic(t) for t in topics])
    return send(h, DELETE_OFFSETS, 0, request)


def stored_state(h: Harness, group: str = "g", topic: str = "t", partition: int = 0) -> PersistedShareState:
    """A window with records 0-2 accepted, 3 rejected, 4-9 available again: start offset 4."""
    p = SharePartition(0, ShareLimits())
    p.acquire("a", [(0, 9)], 10, h.now_ms)
    p.acknowledge("a", [AcknowledgementBatch(0, 2, (int(AcknowledgeType.ACCEPT),))], h.now_ms)
    p.acknowledge("a", [AcknowledgementBatch(3, 3, (int(AcknowledgeType.REJECT),))], h.now_ms)
    p.acknowledge("a", [AcknowledgementBatch(5, 5, (int(AcknowledgeType.ACCEPT),))], h.now_ms)
    state = p.persisted()
    manager(h).note_partition_state((group, topic, partition), state)
    h.store.write([partition_state_record(group, topic, partition, state)])
    return state


# -- lag -------------------------------------------------------------------------------------------


def test_lag_is_the_log_end_minus_the_start_minus_records_done() -> None:
    from coordinator.core.share.partition import StateBatch

    state = PersistedShareState(
        10, 1, (StateBatch(10, 12, 0, 1), StateBatch(13, 14, 2, 1), StateBatch(15, 15, 4, 5))
    )
    assert delivery_complete_count(state) == 3
    assert share_lag(state, 20) == 20 - 10 - 3
    assert share_lag(state, None) == -1


# -- DescribeShareGroupOffsets ---------------------------------------------------------------------


def test_describe_reports_start_offset_and_lag(h: Harness) -> None:
    join(h)
    state = stored_state(h)
    assert (state.start_offset, delivery_complete_count(state)) == (4, 1)
    manager(h).attach_log_ends(lambda topic, partition: 50 if (topic, partition) == ("t", 0) else None)
    # v1 with topics null: every partition with state.
    done = delivery_complete_count(state)
    assert offsets(describe(h)) == {("t", 0): (state.start_offset, 50 - state.start_offset - done)}
    # Named partitions: one without state answers -1; an unknown topic answers -1 with no id.
    reply = describe(h, topics={"t": [0, 1], "nope": [0]})
    assert offsets(reply) == {
        ("t", 0): (state.start_offset, 50 - state.start_offset - done),
        ("t", 1): (-1, -1),
        ("nope", 0): (-1, -1),
    }
    topics = {t.topic_name: t.topic_id for t in reply.wire.groups[0].topics}
    assert topics["nope"] == bytes(16) and topics["t"] == h.catalog.topics["t"].topic_id
    # An unknown group has no state.
    assert offsets(describe(h, "other")) == {}


def test_describe_with_an_empty_group_id(h: Harness) -> None:
    (group,) = describe(h, "").wire.groups
    assert group.error_code == ErrorCode.INVALID_GROUP_ID


# -- AlterShareGroupOffsets ------------------------------------------------------------------------


def test_alter_on_an_empty_group_resets_the_start_offset_and_bumps_the_state_epoch(h: Harness) -> None:
    join(h)
    before = stored_state(h)
    seen: list[tuple[tuple[str, str, int], PersistedShareState | None]] = []
    manager(h).add_state_listener(lambda key, state: seen.append((key, state)))
    assert alter(h, t={0: 42}).wire.error_code == ErrorCode.NON_EMPTY_GROUP
    assert alter(h, t={0: 42}).wire.error_message == "The group is not empty."
    leave(h)
    h.hold = True
    reply = alter(h, t={0: 42, 5: 1}, nope={0: 1})
    assert not reply.answered  # the answer waits for the write
    h.flush()
    by_topic = {t.topic_name: t for t in reply.wire.responses}
    # A partition that does not exist is refused; the others of its topic are altered.
    assert [(p.partition_index, p.error_code) for p in by_topic["t"].partitions] == [
        (0, 0),
        (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert by_topic["nope"].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_topic["nope"].partitions[0].error_message == "This server does not host this topic-partition."
    stored = h.store.share_partitions[("g", "t", 0)]
    assert (stored.start_offset, stored.state_epoch, stored.batches) == (42, before.state_epoch + 1, ())
    assert seen == [(("g", "t", 0), PersistedShareState(42, before.state_epoch + 1, ()))]
    assert offsets(describe(h, topics={"t": [0]})) == {("t", 0): (42, -1)}


def test_alter_creates_the_share_group_when_no_group_has_the_id(h: Harness) -> None:
    reply = alter(h, "fresh", u={0: 7})
    assert reply.wire.error_code == 0
    assert "fresh" in h.store.share_groups
    assert "fresh" in manager(h).groups
    assert h.store.share_partitions[("fresh", "u", 0)] == SharePartitionStateRecord("fresh", "u", 0, 7, 0, ())


def test_alter_on_a_consumer_group_id(h: Harness) -> None:
    cg_heartbeat(h, "cg", "m1", 0, topics=["t"])
    reply = alter(h, "cg", t={0: 1})
    assert (reply.wire.error_code, reply.wire.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group cg is not a share group.",
    )


def test_an_alter_that_changes_nothing_creates_no_group(h: Harness) -> None:
    assert alter(h, "fresh", nope={0: 1}).wire.responses[0].partitions[0].error_code != 0
    assert "fresh" not in h.store.share_groups and "fresh" not in manager(h).groups


def test_alter_survives_a_restart(h: Harness) -> None:
    alter(h, t={1: 9})
    after = h.restart()
    assert after.coordinator.kind(ShareGroupManager).partition_states[("g", "t", 1)].start_offset == 9


# -- DeleteShareGroupOffsets -----------------------------------------------------------------------


def test_delete_removes_the_state_of_an_empty_group(h: Harness) -> None:
    join(h)
    stored_state(h, partition=0)
    stored_state(h, partition=1)
    assert delete(h, "t").wire.error_code == ErrorCode.NON_EMPTY_GROUP
    leave(h)
    seen: list[tuple[tuple[str, str, int], PersistedShareState | None]] = []
    manager(h).add_state_listener(lambda key, state: seen.append((key, state)))
    reply = delete(h, "t", "u", "nope")
    answers = {t.topic_name: (t.error_code, t.error_message) for t in reply.wire.responses}
    assert answers == {
        "t": (0, None),
        "u": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."),
        "nope": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."),
    }
    assert h.store.share_partitions == {}
    assert manager(h).partition_states == {}
    assert sorted(seen) == [(("g", "t", 0), None), (("g", "t", 1), None)]


def test_delete_on_an_unknown_group(h: Harness) -> None:
    reply = delete(h, "t", group="missing")
    assert (reply.wire.error_code, reply.wire.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group missing not found.",
    )


def test_alter_and_delete_drop_the_live_share_partition(h: Harness) -> None:
    """The next use of a reset or deleted share-partition restores it from the new state."""
    key = ("g", "t", 0)
    live = SharePartition(0, ShareLimits())
    live.acquire("a", [(0, 9)], 10, h.now_ms)
    manager(h).live[key] = live
    alter(h, t={0: 42})
    assert key not in manager(h).live
    restored = manager(h).partition(key)
    assert restored is not None and restored.start_offset == 42
    delete(h, "t")
    assert key not in manager(h).live and manager(h).partition(key) is None
