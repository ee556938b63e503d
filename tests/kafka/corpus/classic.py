"""Classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the offsets and admin calls
around them, with the error paths (unknown member, stale generation, rebalance in progress,
fenced static member, invalid session timeout, unknown topic, non-empty group)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.apis import ApiKey
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.kafka.corpus import PARTITIONS, VERSION, Await, Context, Names, Scenario, Step, Until
from tests.kafka.corpus.wire_values import assignment, subscription

SESSION_MS = 10_000
REBALANCE_MS = 20_000
# JoinGroup v4+ answers a new member without an id with MEMBER_ID_REQUIRED and the id to use.
MEMBER_ID_REQUIRED_FROM = 4
STATIC_FROM = 5
GROUPS_IN_OFFSET_FETCH_FROM = 8
BATCHED_LEAVE_FROM = 3


def _join(
    names: Names, who: str, ctx: Context, instance: str | None = None, session: int = SESSION_MS
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=names.group,
        session_timeout_ms=session,
        rebalance_timeout_ms=REBALANCE_MS,
        member_id=ctx.get(who, ""),
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=subscription(names.topic))],
    )


def _keep_member(who: str) -> Callable[[Any, Context], None]:
    def capture(answer: object, ctx: Context) -> None:
        member_id = getattr(answer, "member_id", "")
        if member_id:
            ctx[who] = member_id
        generation = getattr(answer, "generation_id", -1)
        if generation >= 0:
            ctx["generation"] = generation

    return capture


def join_steps(
    v: int, names: Names, who: str, wait: bool = True, instance: str | None = None
) -> list[Step | Await | Until]:
    """A new member joins at JoinGroup version v (two round trips from v4 on, unless static)."""
    steps: list[Step | Await | Until] = []
    if v >= MEMBER_ID_REQUIRED_FROM and instance is None:
        steps.append(
            Step(ApiKey.JOIN_GROUP, lambda c: _join(names, who, c), v, who, capture=_keep_member(who))
        )
    steps.append(
        Step(
            ApiKey.JOIN_GROUP,
            lambda c: _join(names, who, c, instance),
            v,
            who,
            wait=wait,
            capture=_keep_member(who),
        )
    )
    return steps


def sync(
    names: Names, who: str, ctx: Context, members: tuple[str, ...] = (), instance: str | None = None
) -> SyncGroupRequest:
    share = [list(range(PARTITIONS))[i :: len(members)] for i in range(len(members))]
    return SyncGroupRequest(
        group_id=names.group,
        generation_id=ctx["generation"],
        member_id=ctx[who],
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequestAssignment(member_id=ctx[m], assignment=assignment(names.topic, share[i]))
            for i, m in enumerate(members)
        ],
    )


def _heartbeat(
    names: Names, ctx: Context, who: str, generation_delta: int = 0, instance: str | None = None
) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=names.group,
        generation_id=ctx["generation"] + generation_delta,
        member_id=ctx.get(who, who),
        group_instance_id=instance,
    )


def _commit(
    names: Names, ctx: Context, who: str, topic: str, generation_delta: int = 0
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=names.group,
        generation_id_or_member_epoch=ctx["generation"] + generation_delta,
        member_id=ctx[who],
        topics=[
            OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=p + 1)
                    for p in range(PARTITIONS)
                ],
            )
        ],
    )


def fetch(group: str, topic: str | None, version: int) -> OffsetFetchRequest:
    """OffsetFetch in both shapes (one group before v8, a list of groups from v8)."""
    partitions = list(range(PARTITIONS))
    if version >= GROUPS_IN_OFFSET_FETCH_FROM:
        topics = (
            None if topic is None else [OffsetFetchRequestTopics(name=topic, partition_indexes=partitions)]
        )
        return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=topics)])
    return OffsetFetchRequest(
        group_id=group,
        topics=None if topic is None else [OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
    )


def _leave(names: Names, *members: str) -> Callable[[Context], LeaveGroupRequest]:
    def build(ctx: Context) -> LeaveGroupRequest:
        if ctx[VERSION] < BATCHED_LEAVE_FROM:
            return LeaveGroupRequest(group_id=names.group, member_id=ctx[members[0]])
        return LeaveGroupRequest(
            group_id=names.group, members=[MemberIdentity(member_id=ctx[m]) for m in members]
        )

    return build


def mine(answer: Any, names: Names) -> Any:
    """ListGroups answers every group on the broker: keep the scenario's."""
    groups = getattr(answer, "groups", None)
    if groups is not None:
        answer.groups = sorted(
            (g for g in groups if g.group_id in (names.group, names.other_group)), key=lambda g: g.group_id
        )
    return answer


def lifecycle(v: int, names: Names) -> list[Step | Await | Until]:
    """One member through a group's whole life, at JoinGroup version v."""
    g, t = names.group, names.topic
    return [
        *join_steps(v, names, "a"),
        Step(ApiKey.SYNC_GROUP, lambda c: sync(names, "a", c, ("a",))),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "a")),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "a", generation_delta=1)),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "nobody")),
        Step(ApiKey.OFFSET_COMMIT, lambda c: _commit(names, c, "a", t)),
        Step(ApiKey.OFFSET_COMMIT, lambda c: _commit(names, c, "a", t, generation_delta=-1)),
        Step(ApiKey.OFFSET_COMMIT, lambda c: _commit(names, c, "a", f"{t}-missing")),
        Step(ApiKey.OFFSET_FETCH, lambda c: fetch(g, t, c[VERSION])),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[g])),
        Step(ApiKey.LIST_GROUPS, lambda c: ListGroupsRequest(), only=mine),
        Step(ApiKey.DELETE_GROUPS, lambda c: DeleteGroupsRequest(groups_names=[g])),
        Step(ApiKey.OFFSET_DELETE, lambda c: _offset_delete(g, t)),
        Step(ApiKey.LEAVE_GROUP, _leave(names, "a")),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[g])),
        Step(ApiKey.OFFSET_DELETE, lambda c: _offset_delete(g, t)),
        Step(ApiKey.OFFSET_FETCH, lambda c: fetch(g, t, c[VERSION])),
        Step(ApiKey.DELETE_GROUPS, lambda c: DeleteGroupsRequest(groups_names=[g, names.other_group])),
        Step(ApiKey.DELETE_GROUPS, lambda c: DeleteGroupsRequest(groups_names=[g])),
    ]


def _offset_delete(group: str, topic: str) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(
        group_id=group,
        topics=[
            OffsetDeleteRequestTopic(name=topic, partitions=[OffsetDeleteRequestPartition(partition_index=0)])
        ],
    )


def rebalance(v: int, names: Names) -> list[Step | Await | Until]:
    """A second member joins a stable group: the first hears REBALANCE_IN_PROGRESS and rejoins."""
    return [
        *join_steps(v, names, "a"),
        Step(ApiKey.SYNC_GROUP, lambda c: sync(names, "a", c, ("a",))),
        *join_steps(v, names, "b", wait=False),
        Until(
            Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[names.group])),
            lambda answer: answer.groups[0].group_state == "PreparingRebalance",
        ),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "a")),
        Step(ApiKey.OFFSET_COMMIT, lambda c: _commit(names, c, "a", names.topic)),
        Step(ApiKey.JOIN_GROUP, lambda c: _join(names, "a", c), v, "a", capture=_keep_member("a")),
        Await("b", capture=_keep_member("b")),
        Step(ApiKey.SYNC_GROUP, lambda c: sync(names, "b", c), connection="b", wait=False),
        Step(ApiKey.SYNC_GROUP, lambda c: sync(names, "a", c, ("a", "b"))),
        Await("b"),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "b"), connection="b"),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[names.group])),
        Step(ApiKey.LEAVE_GROUP, _leave(names, "a", "b")),
    ]


def bad_session_timeouts(v: int, names: Names) -> list[Step | Await | Until]:
    return [
        Step(ApiKey.JOIN_GROUP, lambda c: _join(names, "a", c, session=10), v),
        Step(ApiKey.JOIN_GROUP, lambda c: _join(names, "a", c, session=10**9), v),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[names.group])),
    ]


def fenced_static_member(v: int, names: Names) -> list[Step | Await | Until]:
    """A static member replaced by a new instance with the same group.instance.id."""
    return [
        *join_steps(v, names, "a", instance="i-1"),
        Step(ApiKey.SYNC_GROUP, lambda c: sync(names, "a", c, ("a",), instance="i-1")),
        Step(ApiKey.JOIN_GROUP, lambda c: _join(names, "b", c, "i-1"), v, "b", capture=_keep_member("b")),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "a", instance="i-1")),
        Step(ApiKey.HEARTBEAT, lambda c: _heartbeat(names, c, "b", instance="i-1"), connection="b"),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[names.group])),
        Step(
            ApiKey.LEAVE_GROUP,
            lambda c: LeaveGroupRequest(
                group_id=names.group, members=[MemberIdentity(member_id=c["a"], group_instance_id="i-1")]
            ),
        ),
        Step(
            ApiKey.LEAVE_GROUP,
            lambda c: LeaveGroupRequest(
                group_id=names.group, members=[MemberIdentity(member_id="", group_instance_id="i-1")]
            ),
        ),
        Step(ApiKey.DESCRIBE_GROUPS, lambda c: DescribeGroupsRequest(groups=[names.group])),
    ]


def _at(api: ApiKey, v: int, steps: list[Step | Await | Until]) -> list[Step | Await | Until]:
    """The steps with every step of ``api`` sent at version v."""
    return [
        Step(s.api, s.request, v, s.connection, s.wait, s.capture, s.only)
        if isinstance(s, Step) and s.api == api
        else s
        for s in steps
    ]


def lifecycle_at(api: ApiKey) -> Callable[[int, Names], list[Step | Await | Until]]:
    """The lifecycle (at the latest JoinGroup) with ``api`` sent at the version under test."""

    def steps(v: int, names: Names) -> list[Step | Await | Until]:
        return _at(api, v, lifecycle(9, names))

    return steps


SCENARIOS = [
    Scenario("classic-lifecycle", ApiKey.JOIN_GROUP, lifecycle),
    Scenario("classic-rebalance", ApiKey.JOIN_GROUP, rebalance),
    Scenario("classic-bad-session-timeout", ApiKey.JOIN_GROUP, bad_session_timeouts),
    Scenario(
        "classic-fenced-static-member", ApiKey.JOIN_GROUP, fenced_static_member, range(STATIC_FROM, 100)
    ),
    *(
        Scenario(f"classic-lifecycle-{api.name.lower()}", api, lifecycle_at(api))
        for api in (
            ApiKey.SYNC_GROUP,
            ApiKey.HEARTBEAT,
            ApiKey.LEAVE_GROUP,
            ApiKey.OFFSET_COMMIT,
            ApiKey.OFFSET_FETCH,
            ApiKey.DESCRIBE_GROUPS,
            ApiKey.LIST_GROUPS,
            ApiKey.DELETE_GROUPS,
            ApiKey.OFFSET_DELETE,
        )
    ),
]
