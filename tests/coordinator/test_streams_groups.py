"""Streams groups (KIP-1071) on the pure core: epochs, topology states, the task handshake,
leaving and fencing, describe, listing, offsets and deletion (docs/streams-groups.md)."""

from __future__ import annotations

from coordinator.core.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
)
from protocol.errors import ErrorCode
from protocol.messages import streams_group_heartbeat as sgh
from tests.coordinator.harness import Harness
from tests.coordinator.streams_harness import (
    StreamsClient,
    sg_describe,
    sg_heartbeat,
    sgroup,
    streams_settings,
    tasks_of,
    word_count,
)
from tests.coordinator.test_group_configs import SET, outcome


def ready(h: Harness, partitions: int = 4) -> None:
    for topic in ("words", "app-counts-repartition", "app-counts-changelog"):
        h.catalog.set_topic(topic, partitions)


def test_missing_source_topic_keeps_the_group_not_ready() -> None:
    h = Harness(streams_settings())
    reply = sg_heartbeat(h)
    wire = reply.wire
    assert wire.error_code == 0
    assert wire.member_epoch == 1
    assert [(s.status_code, s.status_detail) for s in wire.status] == [
        (MISSING_SOURCE_TOPICS, "Source topics words are missing.")
    ]
    assert tasks_of(wire.active_tasks) == {}
    assert sgroup(h).state_name == "NotReady"


def test_missing_internal_topics_are_reported_with_their_partition_counts() -> None:
    h = Harness(streams_settings())
    h.catalog.set_topic("words", 6)
    wire = sg_heartbeat(h).wire
    assert [(s.status_code, s.status_detail) for s in wire.status] == [
        (
            MISSING_INTERNAL_TOPICS,
            "Internal topics are missing: app-counts-changelog, app-counts-repartition",
        )
    ]
    group = sgroup(h)
    assert group.state_name == "NotReady"
    assert group.configured is not None
    assert {n: t.partitions for n, t in group.configured.to_create.items()} == {
        "app-counts-repartition": 6,
        "app-counts-changelog": 6,
    }


def test_once_topics_exist_the_group_assigns_every_task() -> None:
    h = Harness(streams_settings())
    h.catalog.set_topic("words", 4)
    a = StreamsClient(h, "a")
    a.join()
    assert sgroup(h).state_name == "NotReady"
    h.catalog.set_topic("app-counts-repartition", 4)
    h.catalog.set_topic("app-counts-changelog", 4)
    wire = a.beat().wire
    assert wire.status == []
    assert a.epoch == 2  # the topology became ready: a new group epoch
    assert a.active == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
    assert sgroup(h).state_name == "Stable"


def test_a_task_moves_only_after_its_old_owner_stops_reporting_it() -> None:
    h = Harness(streams_settings())
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    assert len(a.tasks()) == 8
    b.join()
    assert b.epoch == 2
    assert b.tasks() == set()  # a still owns everything
    assert sgroup(h).state_name == "Reconciling"
    a_reply = a.beat()
    assert a_reply.wire.member_epoch == 1  # revoking: a keeps its epoch
    kept = a.tasks()
    assert len(kept) == 4
    b.beat()
    assert b.tasks() == set()  # a has not confirmed the revocation yet
    a.beat()  # now a reports only what it kept
    assert a.epoch == 2
    b.beat()
    assert b.tasks() == {(s, p) for s in "01" for p in range(4)} - kept
    assert sgroup(h).state_name == "Stable"


def test_leaving_hands_the_tasks_to_the_others() -> None:
    h = Harness(streams_settings())
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    b.join()
    a.beat()
    a.beat()
    b.beat()
    reply = sg_heartbeat(h, member_id="a", epoch=-1)
    assert reply.wire.error_code == 0 and reply.wire.member_epoch == -1
    b.beat()
    assert len(b.tasks()) == 8
    assert set(sgroup(h).members) == {"b"}


def test_session_timeout_fences_a_silent_member() -> None:
    h = Harness(streams_settings(group_streams_session_timeout_ms=45_000))
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    b.join()
    for _ in range(3):
        h.advance(20_000)
        b.beat()
    assert "a" not in sgroup(h).members
    assert len(b.tasks()) == 8


def test_stale_epoch_and_unknown_member_are_refused_and_other_groups_go_on() -> None:
    h = Harness(streams_settings())
    ready(h)
    a = StreamsClient(h, "a")
    a.join()
    other = StreamsClient(h, "x", group="other")
    other.join()
    assert (
        sg_heartbeat(h, member_id="a", epoch=7, active={}, standby={}, warmup={}).error
        == ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert sg_heartbeat(h, member_id="nobody", epoch=1).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert sg_heartbeat(h, group="missing", member_id="a", epoch=1).error == ErrorCode.GROUP_ID_NOT_FOUND
    assert other.beat().wire.error_code == 0
    assert len(other.tasks()) == 8


def test_invalid_topologies_get_kafkas_errors() -> None:
    h = Harness(streams_settings())
    bad = word_count()
    bad.subtopologies[1].state_changelog_topics[0].partitions = 3
    reply = sg_heartbeat(h, topology=bad)
    assert reply.error == ErrorCode.STREAMS_INVALID_TOPOLOGY
    assert reply.wire.error_message == (
        "Changelog topic app-counts-changelog must have an undefined partition count, but it is set to 3."
    )
    assert sg_heartbeat(h, topology=None).error == ErrorCode.INVALID_REQUEST
    assert sg_heartbeat(h, process_id=None).error == ErrorCode.INVALID_REQUEST


def test_copartitioned_sources_with_different_counts_are_incorrectly_partitioned() -> None:
    h = Harness(streams_settings())
    h.catalog.set_topic("left", 2)
    h.catalog.set_topic("right", 3)
    join = sgh.Topology(
        epoch=1,
        subtopologies=[
            sgh.Subtopology(
                subtopology_id="0",
                source_topics=["left", "right"],
                copartition_groups=[sgh.CopartitionGroup(source_topics=[0, 1])],
            )
        ],
    )
    wire = sg_heartbeat(h, topology=join).wire
    assert [s.status_code for s in wire.status] == [INCORRECTLY_PARTITIONED_TOPICS]
    assert sgroup(h).state_name == "NotReady"


def test_an_existing_internal_topic_with_the_wrong_count_is_reported() -> None:
    h = Harness(streams_settings())
    h.catalog.set_topic("words", 4)
    h.catalog.set_topic("app-counts-repartition", 4)
    h.catalog.set_topic("app-counts-changelog", 2)
    wire = sg_heartbeat(h).wire
    assert [(s.status_code, s.status_detail) for s in wire.status] == [
        (
            INCORRECTLY_PARTITIONED_TOPICS,
            "Existing topic app-counts-changelog has different number of partitions: expected 4, found 2",
        )
    ]


def test_standby_replicas_go_to_another_process() -> None:
    h = Harness(streams_settings(group_streams_num_standby_replicas=1))
    ready(h, 2)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    b.join()
    for _ in range(3):
        a.beat()
        b.beat()
    for member, other in ((a, b), (b, a)):
        # Only subtopology 1 is stateful; its standbys are the tasks the other process runs.
        assert member.standby.get("1", set()) == other.active.get("1", set())
    assert a.standby.get("0") is None and b.standby.get("0") is None


def test_describe_list_and_describe_groups() -> None:
    h = Harness(streams_settings())
    ready(h)
    a = StreamsClient(h, "a")
    a.join()
    described = sg_describe(h, "app", "missing").wire.groups
    assert described[0].group_state == "Stable"
    assert described[0].topology.epoch == 1
    assert [s.subtopology_id for s in described[0].topology.subtopologies] == ["0", "1"]
    member = described[0].members[0]
    assert member.process_id == "process-a"
    assert {t.subtopology_id: t.partitions for t in member.assignment.active_tasks} == {
        "0": [0, 1, 2, 3],
        "1": [0, 1, 2, 3],
    }
    assert described[0].assignor_name == "sticky"
    assert described[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    listed = h.list_groups(types=["streams"]).wire.groups
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("app", "streams", "Stable")]
    assert h.list_groups(types=["consumer"]).wire.groups == []


def test_offsets_are_validated_against_member_epochs() -> None:
    h = Harness(streams_settings())
    ready(h)
    a = StreamsClient(h, "a")
    a.join()
    ok = h.commit("app", {("words", 0): 5}, member_id="a", generation=a.epoch, version=9)
    assert ok.wire.topics[0].partitions[0].error_code == 0
    stale = h.commit("app", {("words", 0): 6}, member_id="a", generation=a.epoch - 1, version=9)
    assert stale.wire.topics[0].partitions[0].error_code == ErrorCode.STALE_MEMBER_EPOCH
    unknown = h.commit("app", {("words", 0): 6}, member_id="zz", generation=1, version=9)
    assert unknown.wire.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_delete_refuses_a_group_with_members_and_deletes_an_empty_one() -> None:
    h = Harness(streams_settings())
    ready(h)
    StreamsClient(h, "a").join()
    assert h.delete_groups("app").wire.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    sg_heartbeat(h, member_id="a", epoch=-1)
    assert sgroup(h).state_name == "Empty"
    assert h.delete_groups("app").wire.results[0].error_code == 0
    assert sg_describe(h, "app").wire.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_restart_restores_the_group_at_its_epoch_without_a_rebalance() -> None:
    h = Harness(streams_settings())
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    b.join()
    a.beat()
    a.beat()
    b.beat()
    before = sgroup(h)
    epochs = (before.group_epoch, before.assignment_epoch)
    owned = {m.member_id: m.assigned for m in before.members.values()}
    assert before.state_name == "Stable"

    h2 = h.restart()
    after = sgroup(h2)
    assert (after.group_epoch, after.assignment_epoch) == epochs
    assert {m.member_id: m.assigned for m in after.members.values()} == owned
    assert after.topology == before.topology
    a.h = b.h = h2
    for client in (a, b):
        reply = client.beat().wire
        assert reply.error_code == 0 and reply.member_epoch == epochs[0]
    assert sgroup(h2).group_epoch == epochs[0]
    assert sgroup(h2).state_name == "Stable"
    assert len(a.tasks() | b.tasks()) == 8


def test_a_steady_heartbeat_writes_nothing_and_a_failed_write_answers_an_error() -> None:
    h = Harness(streams_settings())
    ready(h)
    a = StreamsClient(h, "a")
    a.join()
    assert set(h.store.streams_members) == {("app", "a")}
    batches = len(h.store.batches)
    a.beat()
    assert len(h.store.batches) == batches
    h.fail_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    reply = StreamsClient(h, "b").join()
    assert reply.wire.error_code == ErrorCode.NOT_COORDINATOR
    h.fail_code = None
    a.beat()
    assert set(h.store.streams_members) == {("app", "a"), ("app", "b")}


def test_classic_requests_to_a_streams_group_get_kafkas_errors() -> None:
    h = Harness(streams_settings())
    ready(h)
    StreamsClient(h, "a").join()
    assert h.join("app").error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.heartbeat("app", "x", 1).error == ErrorCode.UNKNOWN_MEMBER_ID
    left = h.leave("app", "x").wire
    assert left.error_code == 0 and [m.error_code for m in left.members] == [ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.list_groups().wire.groups[0].group_type == "streams"


def test_a_join_group_to_an_empty_streams_group_makes_it_a_classic_group() -> None:
    h = Harness(streams_settings())
    ready(h)
    StreamsClient(h, "a").join()
    sg_heartbeat(h, member_id="a", epoch=-1)
    assert h.join("app").error == ErrorCode.MEMBER_ID_REQUIRED  # the classic group's first answer
    assert h.list_groups().wire.groups[0].group_type == "classic"
    assert "app" not in h.store.streams_groups


def test_members_in_a_hand_over_are_told_the_configured_interval_as_kafka_does() -> None:
    h = Harness(streams_settings(group_streams_heartbeat_interval_ms=5000))
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    assert a.join().wire.heartbeat_interval_ms == 5000  # stable at once
    assert b.join().wire.heartbeat_interval_ms == 5000  # waiting for tasks a holds
    assert a.beat().wire.heartbeat_interval_ms == 5000  # revoking
    assert a.beat().wire.heartbeat_interval_ms == 5000  # done
    assert b.beat().wire.heartbeat_interval_ms == 5000


class _HarnessClock:
    """The harness's time, as the views read it (monotonic and wall-clock ms)."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    def now_ms(self) -> int:
        return self.h.now_ms

    def wall_ms(self) -> int:
        return self.h.now_ms


def test_a_streams_member_is_late_after_two_intervals_and_expired_past_its_session() -> None:
    from coordinator.core.liveness import ALIVE, EXPIRED, LATE
    from coordinator.core.streams.manager import StreamsGroupManager

    h = Harness(streams_settings())
    ready(h)
    a = StreamsClient(h, "a")
    a.join()
    a.beat()  # Stable at the group's epoch: told the regular 5 s interval
    kind = h.coordinator.kind(StreamsGroupManager)
    heard = h.now_ms
    seen = kind.member_liveness("app", a.member_id, h.now_ms)
    assert seen is not None and (seen.state, seen.last_heartbeat_ms) == (ALIVE, heard)
    assert seen.late_after_ms == 10_000 and seen.session_deadline_ms == heard + 45_000
    late = kind.member_liveness("app", a.member_id, heard + 10_001)
    assert late is not None and late.state == LATE
    expired = kind.member_liveness("app", a.member_id, heard + 45_000)
    assert expired is not None and expired.state == EXPIRED
    assert kind.member_liveness("app", "nobody", h.now_ms) is None
    assert kind.member_liveness("other", a.member_id, h.now_ms) is None


def test_the_http_views_show_streams_groups() -> None:
    from coordinator.core.lag_status import LagTracker
    from coordinator.server.group_views import GroupViews

    h = Harness(streams_settings())
    ready(h)
    StreamsClient(h, "a").join()
    views = GroupViews(h.coordinator, LagTracker(), _HarnessClock(h))
    [row] = views.list_groups()
    assert (row["group_id"], row["type"], row["state"], row["members"]) == ("app", "streams", "Stable", 1)
    view = views.describe("app")
    assert view is not None and view["type"] == "streams"
    members = view["members"]
    assert isinstance(members, list) and len(members) == 1
    assert members[0]["process_id"] == "process-a" and len(members[0]["active_tasks"]) == 8
    assert members[0]["liveness"] == "alive"


def test_transactional_offsets_to_a_streams_group_check_the_member_when_named() -> None:
    """Kafka 4.4's StreamsGroup.validateOffsetCommit with isTransactional (exactly-once streams
    commit with TxnOffsetCommit): the epoch is checked only when a member is named."""
    from tests.coordinator.test_txn_offsets import codes, txn_commit

    h = Harness(streams_settings())
    ready(h)
    a = StreamsClient(h, "a")
    a.join()
    epoch = a.beat().wire.member_epoch
    offsets = {("words", 0): 5}
    named = txn_commit(h, "app", offsets, version=3, generation=epoch, member_id=a.member_id)
    assert codes(named) == {("words", 0): ErrorCode.NONE}
    stale = txn_commit(h, "app", offsets, version=3, generation=epoch - 1, member_id=a.member_id)
    assert codes(stale) == {("words", 0): ErrorCode.ILLEGAL_GENERATION}
    stranger = txn_commit(h, "app", offsets, version=3, generation=epoch, member_id="nobody")
    assert codes(stranger) == {("words", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # Before v3 (and at v3+ without a member) the producer names no member: taken as is.
    assert codes(txn_commit(h, "app", offsets, version=0, producer_id=2000)) == {("words", 0): ErrorCode.NONE}
    assert codes(txn_commit(h, "app", offsets, version=3, producer_id=2001)) == {("words", 0): ErrorCode.NONE}


def test_task_offsets_are_kept_until_replaced_and_steer_where_a_lost_task_goes() -> None:
    h = Harness(streams_settings())
    ready(h, partitions=1)
    a, b, c = StreamsClient(h, "a"), StreamsClient(h, "b"), StreamsClient(h, "c")
    a.join()
    b.join()
    c.join()
    for client in (a, b, c, a, b, c):
        client.beat()
    holder = next(x for x in (a, b, c) if ("1", 0) in x.tasks())
    others = [x for x in (a, b, c) if x is not holder]
    # The member sorted last by id reports the most state for the stateful task: it takes it.
    behind, ahead = sorted(others, key=lambda x: x.member_id)
    sg_heartbeat(h, member_id=ahead.member_id, epoch=ahead.epoch, active=ahead.active, standby={}, warmup={},
                 task_offsets={("1", 0): 900}, task_end_offsets={("1", 0): 1000})  # fmt: skip
    sg_heartbeat(h, member_id=behind.member_id, epoch=behind.epoch, active=behind.active, standby={},
                 warmup={}, task_offsets={("1", 0): 5})  # fmt: skip
    ahead.beat()  # reports no offsets: the last ones are kept
    member = sgroup(h).members[ahead.member_id]
    assert (member.task_offsets, member.task_end_offsets) == ({("1", 0): 900}, {("1", 0): 1000})
    sg_heartbeat(h, member_id=holder.member_id, epoch=-1)
    assert sgroup(h).target[ahead.member_id].active.get("1") == frozenset({0})


def test_a_new_group_waits_for_the_initial_rebalance_delay_before_its_first_assignment() -> None:
    # Kafka 4.4's answers (group.streams.initial.rebalance.delay.ms, default 3 s).
    h = Harness(streams_settings(group_streams_initial_rebalance_delay_ms=3000))
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    joined = a.join().wire
    delayed = [(5, "Assignment delayed due to the configured initial rebalance delay.")]
    assert (joined.member_epoch, tasks_of(joined.active_tasks)) == (1, {})
    assert [(s.status_code, s.status_detail) for s in joined.status] == delayed
    h.advance(1000)
    assert b.join().wire.member_epoch == 2
    beat = a.beat().wire
    assert (beat.member_epoch, beat.active_tasks) == (1, None)
    assert [(s.status_code, s.status_detail) for s in beat.status] == delayed
    h.advance(2000)  # the delay counts from the first member's join
    first = a.beat().wire
    assert first.member_epoch == 3 and first.status == []
    b.beat()
    a.beat()
    assert a.tasks() | b.tasks() == {(s, p) for s in "01" for p in range(4)}
    assert sgroup(h).state_name == "Stable"


def test_members_without_the_rack_aware_assignment_tags_are_told_which_are_missing() -> None:
    h = Harness(streams_settings(group_streams_rack_aware_assignment_tags=("zone", "rack")))
    ready(h)
    missing = (
        6,
        "Missing required client tags for rack-aware standby assignment: [rack]. "
        "Configure them via 'client.tag.<tagKey>' in your Streams config.",
    )
    wire = sg_heartbeat(h, member_id="a", client_tags={"zone": "eu-1"}).wire
    assert [(s.status_code, s.status_detail) for s in wire.status] == [missing]
    assert (
        sg_heartbeat(h, member_id="b", client_tags={"zone": "eu-1"}, version=0).wire.status == []
    )  # v1+ only
    tagged = sg_heartbeat(h, member_id="c", client_tags={"zone": "eu-1", "rack": "r1"}).wire
    assert tagged.status == []


def test_history_shows_members_target_assignments_with_their_task_moves_and_reconciled_epochs() -> None:
    h = Harness(streams_settings())
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    a.beat()
    b.join()
    for _ in range(3):
        a.beat()
        b.beat()
    sg_heartbeat(h, member_id="b", epoch=-1)
    events = [(e.kind, e.generation, e.member_id, e.message) for e in h.coordinator.events.history("app")]
    kinds = [kind for kind, _, _, _ in events]
    assert kinds == [
        "member_joined", "target_computed", "assignment_reconciled",
        "member_joined", "target_computed", "assignment_reconciled",
        "member_left", "target_computed",
    ]  # fmt: skip
    assert events[0][2] == "a" and events[3][2] == "b" and events[6][2] == "b"
    # a alone had the 8 tasks; b takes 4 of them at epoch 2, and gives them back at epoch 3.
    assert "epoch 2 computed: 4 active tasks moved, 0 assigned for the first time" in events[4][3]
    assert "epoch 3 computed: 4 active tasks moved" in events[7][3]
    assert events[5][1] == 2 and "reconciled by 2 members" in events[5][3]


# -- group.streams.assignment.interval.ms ---------------------------------------------------------

INTERVAL_DELAYED = (5, "Assignment delayed due to the configured assignment interval.")


def test_the_target_is_recomputed_at_most_once_per_assignment_interval() -> None:
    # Kafka 4.4: a change sooner than the interval after the last target leaves the target behind
    # (status ASSIGNMENT_DELAYED); here a timer computes it when the interval is over.
    h = Harness(streams_settings(group_streams_assignment_interval_ms=1000))
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    assert sgroup(h).assignment_epoch == 1  # the first target: nothing computed before
    h.advance(400)
    joined = b.join().wire
    assert (sgroup(h).group_epoch, sgroup(h).assignment_epoch) == (2, 1)
    assert sgroup(h).state_name == "Assigning"
    assert [(s.status_code, s.status_detail) for s in joined.status] == [INTERVAL_DELAYED]
    assert tasks_of(joined.active_tasks) == {}
    h.advance(599)
    assert sgroup(h).assignment_epoch == 1
    h.advance(1)  # the interval is over: the timer computes the target, no heartbeat needed
    assert sgroup(h).assignment_epoch == 2
    assert h.store.streams_groups["app"].assignment_epoch == 2  # written
    for _ in range(3):
        a.beat()
        b.beat()
    assert a.beat().wire.status == []
    assert a.tasks() and b.tasks() and not a.tasks() & b.tasks()
    assert sgroup(h).state_name == "Stable"


def test_a_member_leaving_within_the_interval_gives_its_tasks_back_when_it_is_over() -> None:
    h = Harness(streams_settings(group_streams_assignment_interval_ms=1000))
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    h.advance(1000)
    b.join()
    for _ in range(3):
        a.beat()
        b.beat()
    assert len(a.tasks()) == 4
    sg_heartbeat(h, member_id="b", epoch=-1)
    assert sgroup(h).group_epoch > sgroup(h).assignment_epoch
    h.advance(1000)
    a.beat()
    assert len(a.tasks()) == 8
    # The history counts the leaver's tasks as moved to a, as without the interval.
    computed = [e.message for e in h.coordinator.events.history("app") if e.kind == "target_computed"]
    assert "4 active tasks moved, 0 assigned for the first time" in computed[-1]


def test_the_groups_assignment_interval_applies_and_zero_computes_at_every_change() -> None:
    h = Harness(streams_settings(group_streams_assignment_interval_ms=1000))
    ready(h)
    assert outcome(h, ("streams.assignment.interval.ms", SET, "0"), group="app") == (0, None)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    b.join()
    assert sgroup(h).assignment_epoch == sgroup(h).group_epoch == 2


def test_a_target_left_waiting_by_a_restart_is_computed_after_the_reload() -> None:
    h = Harness(streams_settings(group_streams_assignment_interval_ms=1000))
    ready(h)
    a, b = StreamsClient(h, "a"), StreamsClient(h, "b")
    a.join()
    b.join()
    assert (sgroup(h).group_epoch, sgroup(h).assignment_epoch) == (2, 1)
    h2 = h.restart()
    assert (sgroup(h2).group_epoch, sgroup(h2).assignment_epoch) == (2, 1)
    h2.advance(0)  # the reload's timer, at once
    assert sgroup(h2).assignment_epoch == 2
    assert h2.store.streams_groups["app"].assignment_epoch == 2
