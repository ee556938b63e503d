"""KIP-848 members (`--group-protocol consumer`) and the per-group ownership tracker.

A `ConsumerMember` speaks ConsumerGroupHeartbeat (api 68) on its own connection, as the Java
consumer does (behaviour.md §10): it generates its member id once (v1), looks up its topic's id
with Metadata, joins with epoch 0 (rebalance timeout, subscribed topic, no owned partitions),
then heartbeats every `heartbeat_interval_ms` of the last response with its member epoch. A
response with an assignment makes the member own exactly that set: partitions no longer in it
are dropped at once (revocation), new ones are taken, and the member heartbeats again at once
with what it owns now to acknowledge; only requests after a change of the owned set carry
TopicPartitions. FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID make it drop everything and rejoin with
epoch 0; after a lost connection it keeps its epoch and partitions and sends a full heartbeat.
It commits with OffsetCommit v9 (generation = member epoch, STALE_MEMBER_EPOCH: again after the
next heartbeat), fetches the committed offsets of partitions it gains with OffsetFetch v9, and
leaves with epoch -1 (static members, with a group.instance.id: -2).

Groups are task-local in this mode, so a `GroupTracker` sees every member of its group. It
checks, at each change of a member's owned set (one event loop: changes are ordered and
timestamped with `time.perf_counter`), that no partition has two owners, and measures the
reconciliation of every group epoch (see `loadtest.scenario.RECONCILIATION_OP`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Final, Protocol

from loadtest.client import Prepared
from loadtest.member import Broken, Fatal, Member
from loadtest.runtime import MemberRuntime
from loadtest.scenario import (
    DOUBLE_OWNERSHIP,
    DOUBLE_OWNERSHIP_OP,
    GROUP_END_OP,
    HANDOVER_OP,
    INSTANT,
    NOT_CONVERGED,
    RECONCILIATION_OP,
    SUPERSEDED,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)

JOIN_OP: Final = "consumer_group_join"
HEARTBEAT_OP: Final = "consumer_group_heartbeat"
LEAVE_OP: Final = "consumer_group_leave"
LEAVE_EPOCH: Final = -1
LEAVE_STATIC_EPOCH: Final = -2
ZERO_UUID: Final = bytes(16)

_REJOIN: Final = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_COORDINATOR_MOVED: Final = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_MEMBER_GONE: Final = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.FENCED_INSTANCE_ID}
)


class ConsumerRuntime(MemberRuntime, Protocol):
    """A task running KIP-848 members: it keeps one tracker per group."""

    def tracker(self, group: str) -> GroupTracker: ...


class ConsumerMember(Member):
    """One KIP-848 consumer; `generation` holds its member epoch (0: not a member)."""

    def __init__(self, rt: ConsumerRuntime, number: int, slot: int) -> None:
        super().__init__(rt, number, slot)
        self.version = rt.versions[ApiKey.CONSUMER_GROUP_HEARTBEAT]
        # v1 (KIP-1082): the client names itself, once per process life; v0: the server does.
        self.member_id = str(uuid.uuid4()) if self.version >= 1 else ""
        self.generation = 0
        self.topic_id: bytes | None = None
        self.owned: frozenset[int] = frozenset()
        self.in_group = False  # the server may know the member (for stop: leave or not)
        self.report_owned = False  # the owned set changed since the server last heard it
        self.full_next = False  # resend every field (after a lost connection)
        self.commit_after_heartbeat = False
        self.fetch_pending: set[int] = set()
        self.tracker = rt.tracker(self.group)
        self._steady: tuple[int, Prepared] | None = None

    # lifecycle hooks of Member

    def _stopped(self) -> None:
        # A stopped or killed process consumes nothing any more.
        self._set_owned(frozenset())
        self.tracker.remove(self, time.perf_counter())

    def _in_group(self) -> bool:
        return self.in_group

    def converged(self, now: float) -> None:
        """The tracker saw the member's group reconciled with this member in it: it is at its
        target (possibly no partitions) from now on."""
        if not self.joined_once:
            self.joined_once = True
            self.rt.record(self, "join", self.started, now, ErrorCode.NONE, self.generation)

    # the state machine

    async def _run(self) -> None:
        while True:
            try:
                if self.topic_id is None:
                    await self._lookup_topic_id()
                await self._consume()
            except Broken:
                self.close()
                self.stable = False
                if self.generation > 0:
                    self.full_next = True
                await asyncio.sleep(0.2 + self._rng.random() * 0.3)

    async def _consume(self) -> None:
        loop = self.rt.loop
        commit_interval = self.rt.scenario.commit_interval_ms / 1000
        next_heartbeat = loop.time()
        next_commit = loop.time() + commit_interval * (0.05 + 0.95 * self._rng.random())
        while True:
            committing = bool(self.owned) and self.generation > 0
            wake = min(next_heartbeat, next_commit) if committing else next_heartbeat
            delay = wake - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            now = loop.time()
            if committing and now >= next_commit:
                next_commit = now + commit_interval
                if await self._commit_cg():
                    next_heartbeat = now
            if loop.time() < next_heartbeat:
                continue
            wait = await self._heartbeat_cg()
            next_heartbeat = loop.time() + wait
            if wait <= 0 or self.generation <= 0:
                continue  # acknowledge or rejoin first
            if self.commit_after_heartbeat and self.owned:
                self.commit_after_heartbeat = False
                next_commit = loop.time() + commit_interval
                if await self._commit_cg():
                    next_heartbeat = loop.time()
            if self.fetch_pending:
                await self._fetch_gained()

    # ownership

    def consumable(self) -> list[int]:
        if self.generation <= 0:
            return []
        return [p for p in self.partitions if p in self.offsets and p not in self.fetch_pending]

    def _set_owned(self, owned: frozenset[int]) -> None:
        if owned == self.owned:
            return
        if self.rt.scenario.pipeline:
            for gone in self.offsets.keys() - owned:
                del self.offsets[gone]  # positions of partitions given up are stale
        self.fetch_pending = (self.fetch_pending | (owned - self.owned)) & owned
        self.owned = owned
        self.partitions = sorted(owned)
        self.report_owned = True

    def _drop_membership(self, now: float) -> None:
        self._set_owned(frozenset())
        self.report_owned = False
        self.full_next = False
        self.commit_after_heartbeat = False
        self.generation = 0
        self.stable = False
        self.tracker.remove(self, now)

    # round trips

    async def _lookup_topic_id(self) -> None:
        """Metadata for the subscribed topic: assignments name topics by id."""
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=self.topic)], allow_auto_topic_creation=False
        )
        while self.topic_id is None:
            response: MetadataResponse
            response, sent, received = await self._call(
                "metadata", ApiKey.METADATA, request, self.rt.scenario.request_timeout_ms
            )
            topic = next((t for t in response.topics if t.name == self.topic), None)
            code = topic.error_code if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            self.rt.record(self, "metadata", sent, received, code, self.generation)
            if code == ErrorCode.NONE and topic is not None:
                if topic.topic_id == ZERO_UUID:
                    raise Fatal(f"Metadata names no topic id for {self.topic}")
                self.topic_id = topic.topic_id
                return
            await asyncio.sleep(0.5 + self._rng.random() * 0.5)

    def _request(self) -> ConsumerGroupHeartbeatRequest | Prepared:
        sc = self.rt.scenario
        epoch = self.generation
        joining = epoch == 0
        full = joining or self.full_next
        if not full and not self.report_owned:
            # The steady heartbeat only changes with the epoch: encode it once per epoch.
            if self._steady is None or self._steady[0] != epoch:
                body = ConsumerGroupHeartbeatRequest(
                    group_id=self.group,
                    member_id=self.member_id,
                    member_epoch=epoch,
                    instance_id=self.instance_id,
                )
                prepared = Prepared(ApiKey.CONSUMER_GROUP_HEARTBEAT, self.version, self.client_id, body)
                self._steady = (epoch, prepared)
            return self._steady[1]
        owned: list[TopicPartitions] = []
        if not joining and self.owned and self.topic_id is not None:
            owned = [TopicPartitions(self.topic_id, sorted(self.owned))]
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.instance_id,
            rebalance_timeout_ms=sc.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=[self.topic] if full else None,
            topic_partitions=owned,
        )

    async def _heartbeat_cg(self) -> float:
        """One ConsumerGroupHeartbeat; returns the seconds until the next one (0: at once)."""
        sc = self.rt.scenario
        joining = self.generation == 0
        op = JOIN_OP if joining else HEARTBEAT_OP
        request = self._request()
        reported = not isinstance(request, Prepared)
        response: ConsumerGroupHeartbeatResponse
        response, sent, received = await self._call(
            op, ApiKey.CONSUMER_GROUP_HEARTBEAT, request, sc.request_timeout_ms
        )
        now = time.perf_counter()
        code = response.error_code
        if code != ErrorCode.NONE:
            self.rt.record(self, op, sent, received, code, self.generation)
            if response.error_message:
                self.rt.note(f"{op} {ErrorCode(code).name}: {response.error_message}", code)
            return await self._heartbeat_error(code, joining, now)
        if self.version == 0 and response.member_id:
            self.member_id = response.member_id
        self.generation = response.member_epoch
        self.rt.record(self, op, sent, received, code, self.generation)
        self.in_group = True
        self.stable = True
        if reported:
            self.report_owned = False
            self.full_next = False
        changed = False
        if response.assignment is not None:
            topic_id = self.topic_id
            owned = frozenset(
                p
                for tp in response.assignment.topic_partitions
                if tp.topic_id == topic_id
                for p in tp.partitions
            )
            changed = owned != self.owned
            self._set_owned(owned)
        self.tracker.update(self, self.generation, self.owned, now)
        if self.owned and not self.joined_once:
            self.joined_once = True
            self.rt.record(self, "join", self.started, now, ErrorCode.NONE, self.generation)
        if changed:
            return 0.0  # acknowledge the new owned set at once (as the Java consumer does)
        interval = response.heartbeat_interval_ms or sc.heartbeat_interval_ms
        return interval / 1000

    async def _heartbeat_error(self, code: int, joining: bool, now: float) -> float:
        backoff = 0.5 + self._rng.random() * 0.5
        if code in _REJOIN:
            self.in_group = code == ErrorCode.FENCED_MEMBER_EPOCH
            self._drop_membership(now)
            return backoff if joining else 0.0
        if code == ErrorCode.FENCED_INSTANCE_ID:
            self.in_group = False
            self._drop_membership(now)
            return 2 * backoff
        if code in _COORDINATOR_MOVED:
            self.close()
            self.coordinator = None
        if not joining:
            self.full_next = True
        if code == ErrorCode.UNRELEASED_INSTANCE_ID:
            return 2 * backoff  # the previous instance's session has to expire first
        return backoff

    async def _commit_cg(self) -> bool:
        """OffsetCommit v9 of the owned partitions at the member epoch; True when the heartbeat
        should come at once (the server may have fenced the member)."""
        code = await self._commit()
        if code == ErrorCode.STALE_MEMBER_EPOCH:
            self.commit_after_heartbeat = True
        return code in _MEMBER_GONE

    async def _fetch_gained(self) -> None:
        """OffsetFetch v9 (member id and epoch) of the partitions gained since the last fetch."""
        partitions = sorted(self.fetch_pending)
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=self.group,
                    member_id=self.member_id,
                    member_epoch=self.generation,
                    topics=[OffsetFetchRequestTopics(name=self.topic, partition_indexes=partitions)],
                )
            ]
        )
        response: OffsetFetchResponse
        response, sent, received = await self._call(
            "offset_fetch", ApiKey.OFFSET_FETCH, request, self.rt.scenario.request_timeout_ms
        )
        group = response.groups[0] if response.groups else None
        code = group.error_code if group else ErrorCode.UNKNOWN_SERVER_ERROR
        found = [
            (p.partition_index, p.committed_offset, p.error_code)
            for t in (group.topics if group else [])
            for p in t.partitions
        ]
        code = code or next((c for _, _, c in found if c), 0)
        self.rt.record(self, "offset_fetch", sent, received, code, self.generation)
        if code != ErrorCode.NONE:
            return  # STALE_MEMBER_EPOCH and friends: again after the next heartbeat
        for partition, offset, _ in found:
            if partition in self.owned:
                self.offsets[partition] = max(offset, 0)
        self.fetch_pending.difference_update(partitions)

    async def _leave(self) -> None:
        epoch = LEAVE_STATIC_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        request = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id
        )
        response: ConsumerGroupHeartbeatResponse
        response, sent, received = await self._call(
            LEAVE_OP, ApiKey.CONSUMER_GROUP_HEARTBEAT, request, self.rt.scenario.request_timeout_ms
        )
        code = response.error_code
        self.rt.record(
            self, LEAVE_OP, sent, received, code, epoch if code == ErrorCode.NONE else self.generation
        )
        if code and response.error_message:
            self.rt.note(f"{LEAVE_OP} {ErrorCode(code).name}: {response.error_message}", code)
        self.in_group = False
        self.generation = 0


class GroupTracker:
    """What the members of one group in this task own, and the group epochs they report."""

    def __init__(self, rt: MemberRuntime, group: str, partitions: int) -> None:
        self.rt = rt
        self.group = group
        self.partitions = partitions
        self.members: dict[int, ConsumerMember] = {}  # live: answered with an epoch, not dropped
        self.epochs: dict[int, int] = {}
        self.owned: dict[int, frozenset[int]] = {}
        self.owners: dict[int, set[int]] = {}  # partition -> members owning it
        self.shared = 0  # partitions with more than one owner now
        self.epoch = 0  # the highest epoch a member was given
        self.epoch_start = 0.0
        self.at_epoch = 0  # live members at `epoch`
        self.last_change: float | None = None  # last owned-set change during `epoch`
        self.reconciled = True  # `epoch` reconciled (or none seen yet)
        self.tracking = True  # epochs are measured until the load stops
        self.double_ownership = 0
        self.epochs_reconciled = 0
        self.epochs_superseded = 0

    @property
    def converged(self) -> bool:
        """Every live member at the newest epoch, owning a complete disjoint split."""
        return (
            bool(self.members)
            and self.at_epoch == len(self.members)
            and self.shared == 0
            and len(self.owners) == self.partitions
        )

    def update(self, member: ConsumerMember, epoch: int, owned: frozenset[int], now: float) -> None:
        number = member.number
        started = epoch > self.epoch
        if started:
            self._new_epoch(epoch, now)
        self._own(member, owned, now, epoch)
        previous = self.epochs.get(number)
        self.members[number] = member
        self.epochs[number] = epoch
        if previous != epoch:
            self.at_epoch += (epoch == self.epoch) - (previous == self.epoch)
        self._check(now, started)

    def remove(self, member: ConsumerMember, now: float) -> None:
        number = member.number
        if number not in self.members and number not in self.owned:
            return
        self._own(member, frozenset(), now, self.epochs.get(number, 0))
        self.members.pop(number, None)
        if self.epochs.pop(number, None) == self.epoch:
            self.at_epoch -= 1
        self._check(now)

    def finish(self, now: float) -> None:
        """The load stops: record whether the group is reconciled, and stop measuring epochs."""
        if not self.tracking:
            return
        self.tracking = False
        converged = self.converged
        code = ErrorCode.NONE if converged else NOT_CONVERGED
        self.rt.record_row(-1, self.group, GROUP_END_OP, now, now, code, self.epoch)
        if not converged:
            self.rt.note(
                f"group {self.group} not reconciled at the end: epoch {self.epoch}, "
                f"{self.at_epoch}/{len(self.members)} members at it, {len(self.owners)}/{self.partitions} "
                f"partitions owned, {self.shared} by several members",
                NOT_CONVERGED,
            )

    def _new_epoch(self, epoch: int, now: float) -> None:
        if self.tracking and not self.reconciled:
            self.epochs_superseded += 1
            self.rt.record_row(
                -1, self.group, RECONCILIATION_OP, self.epoch_start, now, SUPERSEDED, self.epoch
            )
        self.epoch = epoch
        self.epoch_start = now
        self.last_change = None
        self.reconciled = False
        self.at_epoch = sum(1 for e in self.epochs.values() if e == epoch)

    def _own(self, member: ConsumerMember, owned: frozenset[int], now: float, epoch: int) -> None:
        number = member.number
        before = self.owned.get(number, frozenset())
        if owned == before:
            return
        owners = self.owners
        for p in before - owned:
            holders = owners[p]
            holders.discard(number)
            if len(holders) == 1:
                self.shared -= 1
            elif not holders:
                del owners[p]
        for p in sorted(owned - before):
            holders = owners.setdefault(p, set())
            if holders:
                if len(holders) == 1:
                    self.shared += 1
                self._double_ownership(member, epoch, p, holders, now)
            holders.add(number)
        if owned:
            self.owned[number] = owned
        else:
            self.owned.pop(number, None)
        self.last_change = now

    def _double_ownership(
        self, member: ConsumerMember, epoch: int, partition: int, holders: set[int], now: float
    ) -> None:
        self.double_ownership += 1
        self.rt.record_row(member.number, self.group, DOUBLE_OWNERSHIP_OP, now, now, DOUBLE_OWNERSHIP, epoch)
        members = self.members
        others = ", ".join(
            f"member {n} (epoch {self.epochs.get(n, '-')}, id {members[n].member_id if n in members else '?'})"
            for n in sorted(holders)
        )
        self.rt.note(
            f"group {self.group}: member {member.number} (epoch {epoch}, id {member.member_id}) "
            f"took partition {partition} still owned by {others}",
            DOUBLE_OWNERSHIP,
        )

    def _check(self, now: float, instant: bool = False) -> None:
        if self.reconciled or not self.tracking or not self.converged:
            return
        self.reconciled = True
        self.epochs_reconciled += 1
        record = self.rt.record_row
        if instant:  # nothing to reconcile: the group is this one member
            record(-1, self.group, RECONCILIATION_OP, now, now, INSTANT, self.epoch)
        else:
            record(-1, self.group, RECONCILIATION_OP, self.epoch_start, now, ErrorCode.NONE, self.epoch)
            handover_end = self.last_change if self.last_change is not None else self.epoch_start
            record(-1, self.group, HANDOVER_OP, self.epoch_start, handover_end, ErrorCode.NONE, self.epoch)
        for member in list(self.members.values()):
            member.converged(now)
