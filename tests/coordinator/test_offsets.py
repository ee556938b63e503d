"""OffsetCommit v0-9, OffsetFetch v0-9, OffsetDelete, deleted topics
(docs/groups.md#offsets-and-retention)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.state import GroupState
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from storage.records import OffsetCommitRecord, OffsetTombstone
from tests.coordinator.harness import OFFSET_COMMIT, WALL_START_MS, Harness, classic_group_of

EMPTY, PR, CR, STABLE = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
)


def codes(reply: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in reply.wire.topics for p in t.partitions}


def fetched(reply: Any) -> dict[tuple[str, int], tuple[int, int, str | None, int]]:
    wire = reply.wire
    topics = wire.groups[0].topics if reply.version >= 8 else wire.topics
    return {
        (t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in topics
        for p in t.partitions
    }


# -- OffsetCommit ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", list(range(10)))
def test_simple_consumer_commit_to_an_unknown_group_creates_an_empty_group(h: Harness, version: int) -> None:
    reply = h.commit("g", {("t", 0): 42, ("t", 1): 43, ("u", 0): 1}, version=version)
    assert codes(reply) == {("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    group = h.group()
    assert group.state is EMPTY and group.protocol_type is None and group.generation_id == 0  # T1
    assert fetched(h.fetch("g", {"t": [0, 1]}, version=5)) == {
        ("t", 0): (42, -1, "", 0),
        ("t", 1): (43, -1, "", 0),
    }


def test_generation_minus_one_on_a_live_group_needs_a_member(h0: Harness) -> None:
    h0.stable_group("g", 1)
    reply = h0.commit("g", {("t", 0): 1}, generation=-1)
    assert codes(reply) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_generation_minus_one_on_an_empty_group_ignores_the_member_id(h0: Harness) -> None:
    (a,), _ = h0.stable_group("g", 1)
    h0.leave("g", a)
    assert h0.group().state is EMPTY
    reply = h0.commit("g", {("t", 0): 1}, generation=-1, member_id="whoever")
    assert codes(reply) == {("t", 0): 0}


def test_commit_in_completing_rebalance(h0: Harness) -> None:
    joins = [h0.join("g", version=3) for _ in range(2)]
    h0.advance(0)
    member = joins[0].wire.member_id
    reply = h0.commit("g", {("t", 0): 1}, member_id=member, generation=1)
    assert codes(reply) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}


def test_member_of_the_previous_generation_commits_during_preparing_rebalance(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("g", 2, session_timeout_ms=10_000)
    h0.join("g", a, version=5, session_timeout_ms=10_000)
    assert h0.group().state is PR
    h0.advance(9_000)
    reply = h0.commit("g", {("t", 0): 7}, member_id=b, generation=generation)
    assert codes(reply) == {("t", 0): 0}
    # The commit counted as a heartbeat for b.
    assert h0.coordinator._timers.deadline(h0.group().members[b].session_key) == h0.now_ms + 10_000


@pytest.mark.parametrize(
    ("version", "expected"),
    [(v, ErrorCode.ILLEGAL_GENERATION) for v in range(1, 9)] + [(9, ErrorCode.GROUP_ID_NOT_FOUND)],
)
def test_unknown_group_with_a_generation(h: Harness, version: int, expected: int) -> None:
    reply = h.commit("g", {("t", 0): 1}, member_id="m", generation=5, version=version)
    assert codes(reply) == {("t", 0): expected}
    assert classic_group_of(h.coordinator, "g") is None


@pytest.mark.parametrize(
    ("member", "generation", "expected"),
    [
        ("MEMBER", 99, ErrorCode.ILLEGAL_GENERATION),
        ("ghost", 1, ErrorCode.UNKNOWN_MEMBER_ID),
        ("MEMBER", 1, 0),
    ],
)
def test_member_commit_validation(h0: Harness, member: str, generation: int, expected: int) -> None:
    (a,), _ = h0.stable_group("g", 1)
    reply = h0.commit(
        "g", {("t", 0): 1}, member_id=a if member == "MEMBER" else member, generation=generation
    )
    assert codes(reply) == {("t", 0): expected}


def test_metadata_size_limit_is_per_partition(h: Harness) -> None:
    reply = h.commit("g", {("t", 0): 1}, metadata="x" * 4097)
    assert codes(reply) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    ok = h.commit("g", {("t", 1): 1}, metadata="x" * 4096)
    assert codes(ok) == {("t", 1): 0}
    assert fetched(h.fetch("g", {"t": [0, 1]}))[("t", 0)] == (-1, -1, "", 0)


def test_metadata_length_is_counted_like_java(h: Harness) -> None:
    # 2048 astral characters are 4096 UTF-16 code units: just fits; one more does not.
    assert codes(h.commit("g", {("t", 0): 1}, metadata="\U0001f600" * 2048)) == {("t", 0): 0}
    too_large = h.commit("g", {("t", 0): 1}, metadata="\U0001f600" * 2048 + "x")
    assert codes(too_large) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert codes(h.commit("g", {("t", 1): 1}, metadata="é" * 4096)) == {("t", 1): 0}


def test_partial_commit_with_one_oversized_partition(h: Harness) -> None:
    coordinator = h.coordinator
    request = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    OffsetCommitRequestPartition(0, 10, committed_metadata="x" * 5000),
                    OffsetCommitRequestPartition(1, 11, committed_metadata=None),
                ],
            )
        ],
    )
    ctx = h.ctx(OFFSET_COMMIT, 8)
    h.apply(coordinator.commit_offsets(ctx, request))
    reply: Any = ctx.reply_to
    assert codes(reply) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): 0}
    assert h.store.offsets[("g", "t", 1)].metadata == ""  # null metadata is stored as ""


def test_commit_record_fields(h: Harness) -> None:
    h.commit("g", {("t", 3): 100}, version=8, metadata="m", leader_epoch=7)
    record = h.store.offsets[("g", "t", 3)]
    assert record == OffsetCommitRecord("g", "t", 3, 100, 7, "m", h.wall_ms, None)
    reply = h.fetch("g", {"t": [3]}, version=5)
    assert fetched(reply) == {("t", 3): (100, 7, "m", 0)}
    old = h.fetch("g", {"t": [3]}, version=4)
    assert fetched(old) == {("t", 3): (100, -1, "m", 0)}  # no leader epoch before v5


def test_v1_commit_timestamp_and_v2_to_v4_retention(h: Harness) -> None:
    h.commit("g", {("t", 0): 1}, version=1, commit_timestamp=123)
    assert h.store.offsets[("g", "t", 0)].commit_ms == 123
    h.commit("g", {("t", 1): 1}, version=1)
    assert h.store.offsets[("g", "t", 1)].commit_ms == h.wall_ms
    for version in (2, 3, 4):
        h.commit("g", {("r", version): 1}, version=version, retention_time_ms=3_600_000)
        assert h.store.offsets[("g", "r", version)].expire_ms == h.wall_ms + 3_600_000
    h.commit("g", {("r", 9): 1}, version=2, retention_time_ms=-1)
    assert h.store.offsets[("g", "r", 9)].expire_ms is None
    h.commit("g", {("r", 5): 1}, version=5, retention_time_ms=3_600_000)  # field absent in v5
    assert h.store.offsets[("g", "r", 5)].expire_ms is None


def test_v0_commit_is_a_simple_commit(h0: Harness) -> None:
    reply = h0.commit("g", {("t", 0): 5}, version=0, member_id="ignored", generation=9)
    assert codes(reply) == {("t", 0): 0}
    h0.stable_group("live", 1)
    assert codes(h0.commit("live", {("t", 0): 5}, version=0)) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_commit_reply_waits_for_durability_and_offsets_are_applied_then(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    reply = h.commit("g", {("t", 0): 2})
    assert not reply.answered
    assert fetched(h.fetch("g", {"t": [0]}))[("t", 0)][0] == 1  # readers see durable offsets only
    h.flush()
    assert codes(reply) == {("t", 0): 0}
    assert fetched(h.fetch("g", {"t": [0]}))[("t", 0)][0] == 2


@pytest.mark.parametrize(
    ("write_error", "expected"),
    [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.INVALID_FETCH_SIZE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
    ],
)
def test_failed_commit_write(h: Harness, write_error: int, expected: int) -> None:
    h.commit("g", {("t", 0): 1})
    h.fail_code = write_error
    reply = h.commit("g", {("t", 0): 2, ("t", 1): 2}, metadata="x" * 5000)
    assert set(codes(reply).values()) == {ErrorCode.OFFSET_METADATA_TOO_LARGE}
    reply = h.commit("g", {("t", 0): 2, ("t", 1): 2})
    assert codes(reply) == {("t", 0): expected, ("t", 1): expected}
    h.fail_code = None
    assert fetched(h.fetch("g", {"t": [0, 1]})) == {("t", 0): (1, -1, "", 0), ("t", 1): (-1, -1, "", 0)}
    assert not h.coordinator._offsets.offsets["g"].in_flight


# -- OffsetFetch -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_v0_v1_fetch_of_an_unknown_group(h: Harness, version: int) -> None:
    reply = h.fetch("nope", {"t": [0, 1]}, version=version)
    assert fetched(reply) == {("t", 0): (-1, -1, "", 0), ("t", 1): (-1, -1, "", 0)}


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7])
def test_v2_to_v7_fetch_all_partitions(h: Harness, version: int) -> None:
    h.commit("g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    reply = h.fetch("g", None, version=version)
    assert reply.wire.error_code == 0
    assert {k: v[0] for k, v in fetched(reply).items()} == {("t", 0): 1, ("t", 1): 2, ("u", 0): 3}
    assert h.fetch("nope", None, version=version).wire.topics == []


def test_require_stable_fetch_during_an_in_flight_commit(h: Harness) -> None:
    h.commit("g", {("t", 0): 1, ("t", 1): 1})
    h.hold = True
    h.commit("g", {("t", 0): 2})
    stable = h.fetch("g", {"t": [0, 1]}, version=7, require_stable=True)
    assert fetched(stable) == {
        ("t", 0): (-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT),
        ("t", 1): (1, -1, "", 0),
    }
    assert stable.wire.error_code == 0
    everything = h.fetch("g", None, version=7, require_stable=True)
    assert fetched(everything)[("t", 0)][3] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    relaxed = h.fetch("g", {"t": [0]}, version=7)
    assert fetched(relaxed) == {("t", 0): (1, -1, "", 0)}
    older = h.fetch("g", {"t": [0]}, version=6, require_stable=True)  # no RequireStable before v7
    assert fetched(older) == {("t", 0): (1, -1, "", 0)}
    h.flush()
    assert fetched(h.fetch("g", {"t": [0]}, version=7, require_stable=True)) == {("t", 0): (2, -1, "", 0)}


@pytest.mark.parametrize("version", [8, 9])
def test_v8_fetch_of_several_groups(h: Harness, version: int) -> None:
    h.commit("a", {("t", 0): 10})
    h.commit("b", {("u", 1): 20})
    h.hold = True
    h.commit("b", {("u", 2): 30})
    reply = h.fetch_groups(
        {"a": {"t": [0, 1]}, "b": None, "unknown": {"x": [0]}}, version=version, require_stable=True
    )
    groups = {g.group_id: g for g in reply.wire.groups}
    assert list(groups) == ["a", "b", "unknown"]
    assert all(g.error_code == 0 for g in groups.values())
    a = {(t.name, p.partition_index): p.committed_offset for t in groups["a"].topics for p in t.partitions}
    assert a == {("t", 0): 10, ("t", 1): -1}
    b = {(t.name, p.partition_index): p.committed_offset for t in groups["b"].topics for p in t.partitions}
    assert b == {("u", 1): 20}  # "all partitions": durable offsets only
    unknown = [
        (p.committed_offset, p.metadata, p.error_code) for t in groups["unknown"].topics for p in t.partitions
    ]
    assert unknown == [(-1, "", 0)]


def test_offsets_are_returned_in_every_group_state(h0: Harness) -> None:
    (a, b), generation = h0.stable_group("g", 2)
    h0.commit("g", {("t", 0): 5}, member_id=a, generation=generation)
    h0.join("g", a, version=5)
    assert h0.group().state is PR
    assert fetched(h0.fetch("g", {"t": [0]}))[("t", 0)][0] == 5
    h0.join("g", b, version=5)
    assert h0.group().state is CR
    assert fetched(h0.fetch("g", {"t": [0]}))[("t", 0)][0] == 5


# -- OffsetDelete --------------------------------------------------------------------------------


def test_offset_delete_on_an_empty_group(h: Harness) -> None:
    h.commit("g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    reply = h.delete_offsets("g", {"t": [0, 5]})
    assert reply.wire.error_code == 0
    assert codes(reply) == {("t", 0): 0, ("t", 5): 0}  # NONE even without an offset
    assert h.store.batches[-1] == [OffsetTombstone("g", "t", 0)]  # tombstones only for real offsets
    assert fetched(h.fetch("g", {"t": [0, 1]})) == {("t", 0): (-1, -1, "", 0), ("t", 1): (2, -1, "", 0)}


def test_offset_delete_of_a_subscribed_topic(h0: Harness) -> None:
    (a,), generation = h0.stable_group("g", 1, topics=("t",))
    h0.commit("g", {("t", 0): 1, ("other", 0): 2}, member_id=a, generation=generation)
    reply = h0.delete_offsets("g", {"t": [0], "other": [0]})
    assert reply.wire.error_code == 0
    assert codes(reply) == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): 0}
    assert fetched(h0.fetch("g", {"t": [0], "other": [0]})) == {
        ("t", 0): (1, -1, "", 0),
        ("other", 0): (-1, -1, "", 0),
    }


def test_offset_delete_with_an_unknown_subscription_counts_as_subscribed(h0: Harness) -> None:
    h0.stable_group("g", 1, protocols=[("range", b"not a subscription")])
    assert h0.group().subscribed_topics is None
    reply = h0.delete_offsets("g", {"t": [0]})
    assert codes(reply) == {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC}


def test_offset_delete_on_a_live_non_consumer_group(h0: Harness) -> None:
    h0.stable_group("g", 1, protocol_type="connect", protocols=[("default", b"")])
    reply = h0.delete_offsets("g", {"t": [0]})
    assert (reply.wire.error_code, reply.wire.topics) == (ErrorCode.NON_EMPTY_GROUP, [])


@pytest.mark.parametrize(
    ("group", "expected"), [("", ErrorCode.INVALID_GROUP_ID), ("nope", ErrorCode.GROUP_ID_NOT_FOUND)]
)
def test_offset_delete_errors(h: Harness, group: str, expected: int) -> None:
    reply = h.delete_offsets(group, {"t": [0]})
    assert (reply.wire.error_code, reply.wire.topics) == (expected, [])


def test_a_failed_offset_delete_write_leaves_the_offsets(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.fail_code = ErrorCode.NOT_COORDINATOR
    reply = h.delete_offsets("g", {"t": [0]})
    assert (reply.wire.error_code, reply.wire.topics) == (ErrorCode.NOT_COORDINATOR, [])
    h.fail_code = None
    assert fetched(h.fetch("g", {"t": [0]})) == {("t", 0): (1, -1, "", 0)}


def test_commit_in_flight_during_an_offset_delete_is_dropped(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    commit = h.commit("g", {("t", 0): 2})
    delete = h.delete_offsets("g", {"t": [0]})
    h.flush()  # the commit lands first, then its tombstone
    assert codes(commit) == {("t", 0): 0} and delete.wire.error_code == 0
    assert fetched(h.fetch("g", {"t": [0]})) == {("t", 0): (-1, -1, "", 0)}
    assert ("g", "t", 0) not in h.store.offsets


def test_an_offset_delete_applies_once_its_tombstone_is_durable(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    delete = h.delete_offsets("g", {"t": [0]})
    assert not delete.answered
    assert fetched(h.fetch("g", {"t": [0]})) == {("t", 0): (1, -1, "", 0)}  # storage still has it
    h.flush()
    assert delete.wire.error_code == 0
    assert fetched(h.fetch("g", {"t": [0]})) == {("t", 0): (-1, -1, "", 0)}


def test_a_commit_that_lands_after_its_timeout_is_applied(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    late = h.commit("g", {("t", 0): 2})
    h.hold = False
    h.flush_late()
    assert codes(late) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}
    assert h.store.offsets[("g", "t", 0)].offset == 2
    # Storage has 2: memory serves 2 too instead of the old offset until a restart.
    assert fetched(h.fetch("g", {"t": [0]}, version=7, require_stable=True)) == {("t", 0): (2, -1, "", 0)}


def test_an_offset_delete_that_lands_after_its_timeout_is_applied(h: Harness) -> None:
    h.commit("g", {("t", 0): 1})
    h.hold = True
    delete = h.delete_offsets("g", {"t": [0]})
    h.hold = False
    h.flush_late()
    assert delete.wire.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert fetched(h.fetch("g", {"t": [0]})) == {("t", 0): (-1, -1, "", 0)}


# -- deleted topics ------------------------------------------------------------------------------


def test_deleted_topics_lose_their_offsets_in_every_group(h: Harness) -> None:
    h.commit("a", {("t", 0): 1, ("keep", 0): 1})
    h.commit("b", {("t", 1): 1, ("t", 2): 1})
    h.hold = True
    h.commit("b", {("t", 3): 1})  # in flight: tombstoned too
    h.hold = False
    h.delete_topics("t", "never-committed")
    h.flush()  # the commit's batch, then the tombstones
    assert sorted(h.store.batches[-1], key=repr) == sorted(
        [
            OffsetTombstone("a", "t", 0),
            OffsetTombstone("b", "t", 1),
            OffsetTombstone("b", "t", 2),
            OffsetTombstone("b", "t", 3),
        ],
        key=repr,
    )
    assert set(h.store.offsets) == {("a", "keep", 0)}
    assert fetched(h.fetch("b", None)) == {}


def test_offsets_of_deleted_topics_can_be_kept_until_retention_expires_them() -> None:
    retention_ms, sweep_ms = 60_000, 1_000
    config = BrokerGroupSettings(
        offsets_retain_on_topic_deletion=True,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=sweep_ms,
    )
    h = Harness(config)
    h.commit("a", {("t", 0): 1, ("keep", 0): 1})
    batches = len(h.store.batches)
    h.delete_topics("t")
    h.flush()
    assert len(h.store.batches) == batches  # nothing written: the offsets stay
    assert fetched(h.fetch("a", {"t": [0]})) == {("t", 0): (1, -1, "", 0)}
    h.advance(retention_ms + sweep_ms)  # then retention removes them like any other offset
    assert fetched(h.fetch("a", {"t": [0], "keep": [0]})) == {
        ("t", 0): (-1, -1, "", 0),
        ("keep", 0): (-1, -1, "", 0),
    }
    assert ("a", "t", 0) not in h.store.offsets


def test_a_failed_deleted_topics_write_leaves_the_offsets(h: Harness) -> None:
    h.commit("a", {("t", 0): 1})
    h.fail_code = ErrorCode.KAFKA_STORAGE_ERROR
    h.delete_topics("t")
    h.fail_code = None
    assert fetched(h.fetch("a", {"t": [0]})) == {("t", 0): (1, -1, "", 0)}


def test_wall_clock_is_used_for_commit_timestamps(h: Harness) -> None:
    h.advance(12_345)
    h.commit("g", {("t", 0): 1})
    assert h.store.offsets[("g", "t", 0)].commit_ms == WALL_START_MS + 12_345
