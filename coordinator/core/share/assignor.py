"""The simple assignor of share groups: partitions shared among the members subscribed to them,
balance first, then stickiness (docs/share-groups.md, "Assignment").

Pure and deterministic: the same members, partitions and current assignment give the same answer.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ShareMemberSpec:
    member_id: str
    subscribed_topics: frozenset[str]
    current: frozenset[TopicPartition]


def assign_share_partitions(
    members: Sequence[ShareMemberSpec], partitions_per_topic: Mapping[str, int]
) -> dict[str, frozenset[TopicPartition]]:
    """The target assignment. Members with the same subscriptions share one pool: each partition
    goes to ``ceil(members / partitions)`` members (one when there are at least as many partitions
    as members), and every member gets a number of partitions within one of every other's.
    Members with different subscriptions are grouped by subscription and each pool is assigned on
    its own. A member keeps what it holds wherever balance allows."""
    result: dict[str, frozenset[TopicPartition]] = {}
    pools: dict[frozenset[str], list[ShareMemberSpec]] = {}
    for member in members:
        pools.setdefault(member.subscribed_topics, []).append(member)
    for topics, pool in sorted(pools.items(), key=lambda item: sorted(item[0])):
        partitions = [
            (topic, p) for topic in sorted(topics) for p in range(max(partitions_per_topic.get(topic, 0), 0))
        ]
        result.update(_assign_pool(pool, partitions))
    return result


def _assign_pool(
    pool: Sequence[ShareMemberSpec], partitions: Sequence[TopicPartition]
) -> dict[str, frozenset[TopicPartition]]:
    members = sorted(pool, key=lambda m: m.member_id)
    if not partitions:
        return {m.member_id: frozenset() for m in members}
    sharing = -(-len(members) // len(partitions))
    slots = sharing * len(partitions)
    base, extra = divmod(slots, len(members))
    # The members that hold most today get the extra slots, so that fewer partitions move.
    by_holding = sorted(members, key=lambda m: (-len(m.current), m.member_id))
    quota = {m.member_id: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}

    valid = set(partitions)
    holders: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    assigned: dict[str, set[TopicPartition]] = {m.member_id: set() for m in members}
    for member in by_holding:
        for tp in sorted(member.current):
            if (
                tp in valid
                and len(holders[tp]) < sharing
                and len(assigned[member.member_id]) < quota[member.member_id]
            ):
                holders[tp].append(member.member_id)
                assigned[member.member_id].add(tp)

    # Fill what is missing: each partition short of holders goes to the members with the most
    # free slots that do not hold it yet.
    free = [(-(quota[m] - len(assigned[m])), m) for m in assigned if quota[m] > len(assigned[m])]
    heapq.heapify(free)
    for tp in partitions:
        skipped: list[tuple[int, str]] = []
        while len(holders[tp]) < sharing and free:
            negative_room, member_id = heapq.heappop(free)
            if tp in assigned[member_id]:
                skipped.append((negative_room, member_id))
                continue
            holders[tp].append(member_id)
            assigned[member_id].add(tp)
            if negative_room + 1 < 0:
                heapq.heappush(free, (negative_room + 1, member_id))
        for entry in skipped:
            heapq.heappush(free, entry)
        if len(holders[tp]) < sharing and not _repair(tp, sharing, quota, holders, assigned):
            return _layout(members, partitions, sharing, quota)
    return {member_id: frozenset(tps) for member_id, tps in assigned.items()}


def _repair(
    tp: TopicPartition,
    sharing: int,
    quota: Mapping[str, int],
    holders: dict[TopicPartition, list[str]],
    assigned: dict[str, set[TopicPartition]],
) -> bool:
    """Fill ``tp`` when every member with a free slot holds it already: such a member x takes
    over a partition of a member y that lacks ``tp``, and y takes ``tp``."""
    while len(holders[tp]) < sharing:
        with_room = [x for x in sorted(assigned) if len(assigned[x]) < quota[x]]
        move = next(
            (
                (x, y, tq)
                for x in with_room
                for y in sorted(assigned)
                if tp not in assigned[y]
                for tq in sorted(assigned[y] - assigned[x])
            ),
            None,
        )
        if move is None:
            return False
        x, y, tq = move
        assigned[y].remove(tq)
        holders[tq].remove(y)
        assigned[x].add(tq)
        holders[tq].append(x)
        assigned[y].add(tp)
        holders[tp].append(y)
    return True


def _layout(
    members: Sequence[ShareMemberSpec],
    partitions: Sequence[TopicPartition],
    sharing: int,
    quota: Mapping[str, int],
) -> dict[str, frozenset[TopicPartition]]:
    """A balanced assignment built from nothing: the slots of each member in a row, laid over
    the partitions repeated ``sharing`` times; a member's slots are consecutive and at most one
    round long, so it never gets a partition twice."""
    cycle = [partitions[k % len(partitions)] for k in range(sharing * len(partitions))]
    result: dict[str, frozenset[TopicPartition]] = {}
    k = 0
    for member in members:
        result[member.member_id] = frozenset(cycle[k : k + quota[member.member_id]])
        k += quota[member.member_id]
    return result
