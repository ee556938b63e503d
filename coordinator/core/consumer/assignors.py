"""Server-side partition assignors for KIP-848 consumer groups: ``uniform`` (default) and ``range``.

Pure functions of their input: no I/O, no clock, no randomness. The consumer-group core calls
``ASSIGNORS[name].assign(members, topics)`` on every group-epoch change, on the event loop, so
both assignors are linear or near-linear in the number of partitions.

Input conventions (shared by both assignors)
--------------------------------------------
* ``members``: member id -> ``AssignmentMember``. ``current`` is the member's current *target*
  assignment and is only a hint for stickiness: topics the member no longer subscribes to,
  topics that no longer exist, partitions at or beyond a topic's partition count and partitions
  that another member also claims are all tolerated. A partition claimed by several members is
  kept (at most) by the first claimant in member order (below).
* ``topics``: topic name -> partition count. Only topics that at least one member subscribes to
  are assigned; a subscribed topic missing from ``topics`` is treated as having no partitions
  (Kafka raises instead). Negative counts count as zero.
* Member order: members with an instance id first, by instance id, then the rest by member id
  (Kafka's range assignor order, so static members keep their relative order across restarts
  when their member id changes). Topics are visited by name. Nothing depends on the iteration
  order of the input mappings or of sets, so equal input gives equal output.
* ``rack_id`` is accepted but not used (neither assignor is rack-aware, as in Kafka 4.0).

Output: an entry for every member id (an empty dict when it gets nothing); every partition of
every subscribed topic goes to exactly one member subscribed to that topic; topics with no
partitions for a member are omitted (never an empty frozenset).

``uniform`` (Kafka's ``UniformAssignor``)
-----------------------------------------
*Homogeneous* subscriptions (every member subscribes to the same topics), after Kafka's
``UniformHomogeneousAssignmentBuilder``: with P partitions and M members every member gets
⌊P/M⌋ or ⌈P/M⌉ partitions in total. Stickiness is optimal: the P mod M "extra" slots go first
to members that currently hold more than ⌊P/M⌋ (in member order), then to the others; each
member keeps its valid current partitions up to its quota (lowest topic name / partition first
when it must drop some), and only the excess moves. So the number of partitions that change
owner is the minimum any balanced assignment needs: a member that joins takes only the other
members' excess over the new quota, a member that leaves moves only its own partitions, and
unchanged input moves nothing. Free partitions (by topic name, then partition) are dealt
round-robin to members under quota, so a fresh group of M members over topics with M
partitions each gives member i partition i of every topic.

*Classes of members with disjoint topics* (every subscriber of a topic has the same subscription
set, e.g. half the group reads ``orders`` and half ``payments``): each class is assigned as a
homogeneous group of its own, with the same balance and optimal stickiness per class.

Other *heterogeneous* subscriptions, after Kafka 4.x's ``UniformHeterogeneousAssignmentBuilder``:
1. every member keeps all its valid current partitions (topic still subscribed and existing,
   partition in range, first claimant);
2. free partitions are handed out topic by topic (topics ordered by partitions per subscriber,
   descending, then subscriber count, then name), each to the currently least-loaded
   subscriber (ties: member order);
3. balancing passes over the topics with at least two subscribers move a topic's partitions
   (highest partition number first) from its most-loaded owner to its least-loaded subscriber
   while their total loads differ by two or more; passes repeat until one full pass moves
   nothing (at most ``MAX_BALANCE_PASSES``). Every move lowers the sum of squared loads, so the
   loop terminates.

Balance guarantee for heterogeneous groups: when the passes converge (always, unless the
subscriptions overlap in long chains and the pass limit is reached), for every topic with two
or more subscribers, no owner of one of its partitions holds two or more partitions more in
total than any other subscriber of that topic (classes with disjoint topics never get here: see
above). With overlapping, non-identical subscriptions the result is only
locally balanced: e.g. members A{t1}, B{t1,t2}, C{t2} may end with 9/10/11 partitions although
10/10/10 exists (Kafka behaves the same). Re-running on its own converged output moves nothing.

``range`` (Kafka's ``RangeAssignor``, sticky)
---------------------------------------------
Per topic with N partitions and n subscribers (in member order): every subscriber gets ⌊N/n⌋
or ⌈N/n⌉ partitions of that topic. Sticky in the way Kafka 3.x's server-side range assignor
was: each subscriber keeps its lowest valid current partitions up to ⌊N/n⌋; the N mod n extra
slots go first to subscribers that hold more than that (in member order, keeping their next
lowest partition), then to the others in member order; the free partitions are then handed
out in ascending runs in member order. The number of partitions of a topic that change owner
is therefore the minimum any per-topic-balanced assignment needs; a fresh group gets plain
contiguous ranges, the first N mod n members one partition more. (Kafka 4.x's range assignor
dropped stickiness and always hands out ranges in member order; this one keeps it, as the
consumer-group core asks.)

Co-partitioning: when all members subscribe to the same topics and those topics all have the
same partition count, the assignment is computed once over partition *numbers* and applied to
every topic, so each member gets the same partition numbers in every topic. Each number's
current owner is the member holding it in the most topics (ties: member order); when the
current assignment is itself co-partitioned (as it is when this assignor produced it under the
same condition), stickiness is optimal per topic as above. Entering this mode from a
non-co-partitioned assignment (e.g. the last member with a different subscription leaves)
may move more partitions than the per-topic minimum, to re-establish co-partitioning.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from coordinator.core.shared_values import shared_set

Assignment = dict[str, frozenset[int]]
"""Topic name -> partitions."""

MAX_BALANCE_PASSES = 64
"""Limit on the heterogeneous uniform balancing passes over the topics (Kafka: 16). Only
approached with long chains of overlapping subscriptions; identical-subscription classes settle
in a pass or two plus one pass that moves nothing."""


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    # Resolved topic names that exist (explicit names plus regex matches).
    subscribed_topics: frozenset[str]
    # The member's current target assignment (for stickiness); may name topics it no longer
    # subscribes to or that no longer exist, and partitions out of range.
    current: Mapping[str, frozenset[int]]


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, AssignmentMember], topics: Mapping[str, int]
    ) -> dict[str, Assignment]: ...


def _order_key(item: tuple[str, AssignmentMember]) -> tuple[int, str, str]:
    member_id, member = item
    if member.instance_id is not None:
        return (0, member.instance_id, member_id)
    return (1, "", member_id)


def _prepare(
    members: Mapping[str, AssignmentMember], topics: Mapping[str, int]
) -> tuple[list[str], list[AssignmentMember], list[frozenset[str]], bool]:
    """Members in member order, their effective subscriptions, and whether these are all equal."""
    ordered = sorted(members.items(), key=_order_key)
    ids = [member_id for member_id, _ in ordered]
    specs = [member for _, member in ordered]
    subs: list[frozenset[str]] = []
    for member in specs:
        subscribed = member.subscribed_topics
        if not all(topic in topics for topic in subscribed):
            subscribed = frozenset(topic for topic in subscribed if topic in topics)
        subs.append(subscribed)
    homogeneous = all(s == subs[0] for s in subs) if subs else True
    return ids, specs, subs, homogeneous


def _count(topics: Mapping[str, int], topic: str) -> int:
    return max(0, topics[topic])


def _from_owners(
    n: int, owners: Mapping[str, list[int]], topic_order: Sequence[str]
) -> list[dict[str, list[int]]]:
    """Per member index: topic -> ascending partitions, from per-topic owner arrays."""
    result: list[dict[str, list[int]]] = [{} for _ in range(n)]
    for topic in topic_order:
        per_member: dict[int, list[int]] = {}
        for partition, owner in enumerate(owners[topic]):
            bucket = per_member.get(owner)
            if bucket is None:
                per_member[owner] = [partition]
            else:
                bucket.append(partition)
        for owner, partitions in per_member.items():
            result[owner][topic] = partitions
    return result


def _freeze(ids: Sequence[str], lists: Sequence[Mapping[str, list[int]]]) -> dict[str, Assignment]:
    return {
        member_id: {topic: frozenset(partitions) for topic, partitions in per_topic.items()}
        for member_id, per_topic in zip(ids, lists, strict=True)
    }


# --------------------------------------------------------------------------------------------
# uniform


class UniformAssignor:
    """Kafka's ``uniform`` assignor: balanced over all members, sticky (see the module docstring)."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, AssignmentMember], topics: Mapping[str, int]
    ) -> dict[str, Assignment]:
        ids, specs, subs, homogeneous = _prepare(members, topics)
        if not ids:
            return {}
        if homogeneous:
            return _uniform_homogeneous(ids, specs, subs[0], topics)
        classes: dict[frozenset[str], list[int]] = {}
        for index, subscribed in enumerate(subs):
            classes.setdefault(subscribed, []).append(index)
        if _pairwise_disjoint(list(classes)):
            # Members fall into classes with disjoint topics: each class is a homogeneous group
            # of its own, with the homogeneous builder's optimal stickiness.
            result: dict[str, Assignment] = {}
            for subscribed, indexes in classes.items():
                result.update(
                    _uniform_homogeneous(
                        [ids[i] for i in indexes], [specs[i] for i in indexes], subscribed, topics
                    )
                )
            return result
        return _uniform_heterogeneous(ids, specs, subs, topics)


def _pairwise_disjoint(sets: Sequence[frozenset[str]]) -> bool:
    seen: set[str] = set()
    for topics in sets:
        if not seen.isdisjoint(topics):
            return False
        seen |= topics
    return True


def _uniform_homogeneous(
    ids: list[str], specs: list[AssignmentMember], subscribed: frozenset[str], topics: Mapping[str, int]
) -> dict[str, Assignment]:
    n = len(ids)
    topic_order = sorted(subscribed)
    owners: dict[str, list[int]] = {topic: [-1] * _count(topics, topic) for topic in topic_order}
    total = sum(len(owned) for owned in owners.values())
    if total == 0:
        return {member_id: {} for member_id in ids}
    quota_floor, extras = divmod(total, n)

    # 1. Claim the valid current partitions (first claimant in member order wins).
    claims: list[list[tuple[str, list[int]]]] = []
    held = [0] * n
    pristine = [False] * n  # claims == current exactly: the output can reuse `current`
    for index, member in enumerate(specs):
        current = member.current
        mine: list[tuple[str, list[int]]] = []
        count = 0
        offered = 0
        for topic in sorted(current):
            partitions = current[topic]
            offered += len(partitions)
            owned = owners.get(topic)
            if owned is None:
                continue
            size = len(owned)
            got = []
            for partition in partitions:
                if 0 <= partition < size and owned[partition] < 0:
                    owned[partition] = index
                    got.append(partition)
            if got:
                mine.append((topic, got))
                count += len(got)
        claims.append(mine)
        held[index] = count
        pristine[index] = count == offered and len(mine) == len(current)

    # 2. Quotas: extra slots go to members holding more than the floor first (optimal stickiness).
    quotas = [quota_floor] * n
    left = extras
    for index in range(n):
        if not left:
            break
        if held[index] > quota_floor:
            quotas[index] += 1
            left -= 1
    for index in range(n):
        if not left:
            break
        if held[index] <= quota_floor:
            quotas[index] += 1
            left -= 1

    # 3. Drop each member's excess over its quota: keep the lowest (topic, partition) first.
    for index in range(n):
        excess = held[index] - quotas[index]
        if excess <= 0:
            continue
        pristine[index] = False
        mine = claims[index]
        while excess:
            topic, got = mine[-1]
            got.sort()
            owned = owners[topic]
            while excess and got:
                owned[got.pop()] = -1
                excess -= 1
            if not got:
                mine.pop()
        held[index] = quotas[index]

    # 4. Deal the free partitions round-robin to the members under quota, in member order.
    free = [
        (topic, partition)
        for topic in topic_order
        for partition, owner in enumerate(owners[topic])
        if owner < 0
    ]
    needy = [(index, quotas[index] - held[index]) for index in range(n) if held[index] < quotas[index]]
    gifts: dict[int, list[tuple[str, int]]] = {}
    position = 0
    while needy:
        still: list[tuple[int, int]] = []
        for index, wanted in needy:
            gifts.setdefault(index, []).append(free[position])
            position += 1
            if wanted > 1:
                still.append((index, wanted - 1))
        needy = still
    if position != len(free):  # pragma: no cover - quotas sum to the partition count
        raise AssertionError("uniform assignor left partitions unassigned")

    result: dict[str, Assignment] = {}
    for index, member_id in enumerate(ids):
        given = gifts.get(index)
        if pristine[index] and given is None:
            result[member_id] = dict(specs[index].current)
            continue
        per_topic: dict[str, list[int]] = {topic: got for topic, got in claims[index]}
        for topic, partition in given or ():
            per_topic.setdefault(topic, []).append(partition)
        result[member_id] = {
            topic: shared_set(frozenset(partitions)) for topic, partitions in per_topic.items()
        }
    return result


def _uniform_heterogeneous(
    ids: list[str], specs: list[AssignmentMember], subs: list[frozenset[str]], topics: Mapping[str, int]
) -> dict[str, Assignment]:
    n = len(ids)
    subscribers: dict[str, list[int]] = {}
    for index, subscribed in enumerate(subs):
        for topic in subscribed:
            subscribers.setdefault(topic, []).append(index)  # ascending member order
    owners: dict[str, list[int]] = {topic: [-1] * _count(topics, topic) for topic in subscribers}
    load = [0] * n

    # 1. Keep every valid current partition (first claimant in member order wins).
    for index, member in enumerate(specs):
        subscribed = subs[index]
        for topic, partitions in member.current.items():
            if topic not in subscribed:
                continue
            owned = owners[topic]
            size = len(owned)
            for partition in partitions:
                if 0 <= partition < size and owned[partition] < 0:
                    owned[partition] = index
                    load[index] += 1

    topic_order = sorted(
        subscribers,
        key=lambda t: (Fraction(-len(owners[t]), len(subscribers[t])), len(subscribers[t]), t),
    )

    # 2. Hand out the free partitions, topic by topic, each to the least-loaded subscriber.
    for topic in topic_order:
        owned = owners[topic]
        heap: list[tuple[int, int]] | None = None
        for partition, owner in enumerate(owned):
            if owner >= 0:
                continue
            if heap is None:
                heap = [(load[index], index) for index in subscribers[topic]]
                heapq.heapify(heap)
            level, index = heap[0]
            owned[partition] = index
            load[index] = level + 1
            heapq.heapreplace(heap, (level + 1, index))

    # 3. Balance: move partitions from the most- to the least-loaded subscribers, per topic.
    movable = [topic for topic in topic_order if len(subscribers[topic]) >= 2]
    last_moved = -1
    done = not movable
    for _ in range(MAX_BALANCE_PASSES):
        if done:
            break
        for position, topic in enumerate(movable):
            if position == last_moved:
                done = True  # a full pass since the last move: converged
                break
            moved = _balance_topic(owners[topic], subscribers[topic], load)
            if moved or last_moved == -1:
                last_moved = position

    return _freeze(ids, _from_owners(n, owners, topic_order))


def _balance_topic(owned: list[int], members: list[int], load: list[int]) -> int:
    """Move partitions of one topic from its most-loaded owners to its least-loaded subscribers
    while their loads differ by two or more. Returns the number of partitions moved."""
    low = min(load[index] for index in members)
    high = max(load[index] for index in members)
    if high - low <= 1:
        return 0
    stacks: dict[int, list[int]] = {}  # owner -> its partitions of this topic, ascending
    for partition, owner in enumerate(owned):
        stack = stacks.get(owner)
        if stack is None:
            stacks[owner] = [partition]
        else:
            stack.append(partition)
    # Lazy heaps: an entry is live while its load matches the member's current load.
    donors = [(-load[index], index) for index in stacks]
    heapq.heapify(donors)
    takers = [(load[index], index) for index in members]
    heapq.heapify(takers)
    moved = 0
    while True:
        while donors and (-donors[0][0] != load[donors[0][1]] or not stacks[donors[0][1]]):
            heapq.heappop(donors)
        if not donors:
            break
        while takers[0][0] != load[takers[0][1]]:
            heapq.heappop(takers)
        donor = donors[0][1]
        taker = takers[0][1]
        if load[donor] - load[taker] <= 1:
            break
        owned[stacks[donor].pop()] = taker
        load[donor] -= 1
        load[taker] += 1
        heapq.heapreplace(donors, (-load[donor], donor))
        heapq.heapreplace(takers, (load[taker], taker))
        heapq.heappush(takers, (load[donor], donor))
        if stacks.get(taker):
            heapq.heappush(donors, (-load[taker], taker))
        moved += 1
    return moved


# --------------------------------------------------------------------------------------------
# range


class RangeAssignor:
    """Kafka's ``range`` assignor, sticky, co-partitioning when possible (see the module docstring)."""

    name = "range"

    def assign(
        self, members: Mapping[str, AssignmentMember], topics: Mapping[str, int]
    ) -> dict[str, Assignment]:
        ids, specs, subs, homogeneous = _prepare(members, topics)
        if not ids:
            return {}
        n = len(ids)
        if homogeneous and subs[0]:
            topic_order = sorted(subs[0])
            counts = {_count(topics, topic) for topic in topic_order}
            if len(counts) == 1:
                return _range_copartitioned(ids, specs, topic_order, counts.pop())

        subscribers: dict[str, list[int]] = {}
        for index, subscribed in enumerate(subs):
            for topic in subscribed:
                subscribers.setdefault(topic, []).append(index)
        result: list[dict[str, frozenset[int]]] = [{} for _ in range(n)]
        for topic in sorted(subscribers):
            size = _count(topics, topic)
            if size == 0:
                continue
            members_of_topic = subscribers[topic]
            taken = bytearray(size)
            current_lists: list[list[int]] = []
            for index in members_of_topic:
                partitions = specs[index].current.get(topic)
                mine: list[int] = []
                if partitions:
                    mine = sorted(p for p in partitions if 0 <= p < size and not taken[p])
                    for partition in mine:
                        taken[partition] = 1
                current_lists.append(mine)
            for index, kept in zip(members_of_topic, _sticky_range(size, current_lists), strict=True):
                if kept:
                    result[index][topic] = frozenset(kept)
        return dict(zip(ids, result, strict=True))


def _range_copartitioned(
    ids: list[str], specs: list[AssignmentMember], topic_order: list[str], size: int
) -> dict[str, Assignment]:
    """One sticky range assignment over partition numbers, applied to every topic."""
    n = len(ids)
    if size == 0:
        return {member_id: {} for member_id in ids}
    # Current owner of each partition number: the member holding it in the most topics.
    votes: list[dict[int, int]] = [{} for _ in range(size)]
    for index, member in enumerate(specs):
        current = member.current
        for topic in topic_order:
            partitions = current.get(topic)
            if not partitions:
                continue
            for partition in partitions:
                if 0 <= partition < size:
                    tally = votes[partition]
                    tally[index] = tally.get(index, 0) + 1
    current_lists: list[list[int]] = [[] for _ in range(n)]
    for partition, tally in enumerate(votes):
        if tally:
            owner = min(tally, key=lambda index: (-tally[index], index))
            current_lists[owner].append(partition)
    result: dict[str, Assignment] = {}
    for member_id, kept in zip(ids, _sticky_range(size, current_lists), strict=True):
        if kept:
            partitions = frozenset(kept)
            result[member_id] = {topic: partitions for topic in topic_order}
        else:
            result[member_id] = {}
    return result


def _sticky_range(size: int, current: list[list[int]]) -> list[list[int]]:
    """Partitions ``0..size-1`` over ``len(current)`` members in order; ``current[i]`` is member
    i's ascending, disjoint, in-range current partitions. Each member gets size//n or one more."""
    n = len(current)
    quota, extras = divmod(size, n)
    kept: list[list[int]] = []
    taken = bytearray(size)
    needy: list[tuple[int, int]] = []
    for index, mine in enumerate(current):
        if len(mine) > quota and extras > 0:
            keep = mine[: quota + 1]
            extras -= 1
        else:
            keep = mine[:quota]
            needy.append((index, quota - len(keep)))
        for partition in keep:
            taken[partition] = 1
        kept.append(keep)
    free = [partition for partition in range(size) if not taken[partition]]
    position = 0
    for index, wanted in needy:
        if extras > 0:
            wanted += 1
            extras -= 1
        if wanted:
            kept[index] = kept[index] + free[position : position + wanted]
            position += wanted
    if position != len(free):  # pragma: no cover - quotas sum to the partition count
        raise AssertionError("range assignor left partitions unassigned")
    return kept


ASSIGNORS: dict[str, Assignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
DEFAULT_ASSIGNOR = "uniform"
