"""A synchronous harness around GroupCoordinator: fake clock, fake runtime, fake store.

Every Result is applied the way the runtime must: records are written (to a dict-backed store)
as one batch, then ``Result.deliver`` applies their state and sends the replies; or, when the
harness is told to fail writes, ``on_failed`` runs instead. Writes can also be *held* to observe
in-flight state, or time out and land late (``flush_late``).

Every response is encoded with the generated encoder of its request's version and decoded back:
``Reply.wire`` is what the client would see, so version-dependent fields can be asserted on.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.consumer.manager import ConsumerGroupManager
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.result import Result
from protocol.errors import ErrorCode
from protocol.messages import CODECS
from protocol.messages.consumer_protocol import (
    ConsumerProtocolSubscription,
    encode_consumer_protocol_subscription_v0,
    encode_consumer_protocol_subscription_v1,
)
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
from storage.records import (
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    ConsumerMemberRecord,
    GroupConfigRecord,
    GroupMetadataRecord,
    OffsetCommitRecord,
    Record,
    ShareGroupRecord,
    ShareGroupTombstone,
    ShareMemberRecord,
    SharePartitionStateRecord,
    StreamsGroupRecord,
    StreamsGroupTombstone,
    StreamsMemberRecord,
    TopicRecord,
    TxnOffsetRecord,
)

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47

START_MS = 1_000_000
WALL_START_MS = 1_700_000_000_000
AUTO = object()  # "fill in the obvious value" sentinel for optional request fields


def classic_group_of(shard: GroupCoordinator, group_id: str) -> ClassicGroup | None:
    """The shard's classic group ``group_id`` (None: no classic group has that id)."""
    return shard.kind(ClassicGroupManager).groups.get(group_id)


def consumer_group_of(shard: GroupCoordinator, group_id: str) -> ConsumerGroup | None:
    """The shard's KIP-848 consumer group ``group_id`` (None: no consumer group has that id)."""
    return shard.kind(ConsumerGroupManager).groups.get(group_id)


@dataclass(slots=True, frozen=True)
class GroupSnapshot:
    group_id: str
    state: str
    protocol_type: str | None
    protocol_name: str | None
    generation_id: int
    leader_id: str | None
    member_ids: tuple[str, ...]


def classic_snapshots(shard: GroupCoordinator) -> list[GroupSnapshot]:
    """What a restart must rebuild of every classic group."""
    return [
        GroupSnapshot(
            group_id=g.group_id,
            state=g.state.value,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol_name,
            generation_id=g.generation_id,
            leader_id=g.leader_id,
            member_ids=tuple(g.members),
        )
        for g in shard.kind(ClassicGroupManager).groups.values()
    ]


def subscription(topics: Sequence[str], version: int = 0, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription bytes as a Java consumer sends them (int16 version + body)."""
    out = bytearray(struct.pack(">h", version))
    message = ConsumerProtocolSubscription(topics=list(topics), user_data=user_data)
    if version == 0:
        encode_consumer_protocol_subscription_v0(message, out)
    else:
        encode_consumer_protocol_subscription_v1(message, out)
    return bytes(out)


class Reply:
    """A fake ReplyTo: records what the coordinator sent for one request."""

    def __init__(self, api_key: int, version: int, observer: Callable[[Reply], None] | None = None) -> None:
        self.api_key = api_key
        self.version = version
        self.responses: list[Any] = []
        self.wires: list[Any] = []
        # Called as the response leaves, where a server would dispatch the connection's next
        # (pipelined) request: what it observes then is what such a request would see.
        self.observer = observer

    def send(self, response: Any) -> None:
        assert not self.responses, f"request answered twice: {self.responses[0]!r} then {response!r}"
        _, _, decode, encode = CODECS[(self.api_key, self.version)]
        out = bytearray()
        encode(response, out)  # raises if a field is invalid for this version (e.g. None)
        wire, end = decode(bytes(out), 0)
        assert end == len(out)
        self.responses.append(response)
        self.wires.append(wire)
        if self.observer is not None:
            self.observer(self)

    @property
    def answered(self) -> bool:
        return bool(self.responses)

    @property
    def response(self) -> Any:
        assert self.responses, "request not answered (parked)"
        return self.responses[0]

    @property
    def wire(self) -> Any:
        """The response as decoded by a client of this version."""
        assert self.wires, "request not answered (parked)"
        return self.wires[0]

    @property
    def error(self) -> int:
        return int(self.wire.error_code)


@dataclass
class FakeStore:
    """State-table storage: upserts and deletes, like the real backends."""

    groups: dict[str, GroupMetadataRecord] = field(default_factory=dict)
    offsets: dict[tuple[str, str, int], OffsetCommitRecord] = field(default_factory=dict)
    consumer_groups: dict[str, ConsumerGroupRecord] = field(default_factory=dict)
    consumer_members: dict[tuple[str, str], ConsumerMemberRecord] = field(default_factory=dict)
    streams_groups: dict[str, StreamsGroupRecord] = field(default_factory=dict)
    streams_members: dict[tuple[str, str], StreamsMemberRecord] = field(default_factory=dict)
    group_configs: dict[tuple[str, str], GroupConfigRecord] = field(default_factory=dict)
    txn_offsets: dict[tuple[str, int, str, int], TxnOffsetRecord] = field(default_factory=dict)
    share_groups: dict[str, ShareGroupRecord] = field(default_factory=dict)
    share_members: dict[tuple[str, str], ShareMemberRecord] = field(default_factory=dict)
    share_partitions: dict[tuple[str, str, int], SharePartitionStateRecord] = field(default_factory=dict)
    batches: list[list[Record]] = field(default_factory=list)

    def write(self, records: Iterable[Record]) -> None:
        batch = list(records)
        self.batches.append(batch)
        tables: dict[str, dict[Any, Any]] = {
            "groups": self.groups,
            "offsets": self.offsets,
            "consumer_groups": self.consumer_groups,
            "consumer_members": self.consumer_members,
            "group_configs": self.group_configs,
            "txn_offsets": self.txn_offsets,
            "share_groups": self.share_groups,
            "share_members": self.share_members,
            "share_partitions": self.share_partitions,
            "streams_groups": self.streams_groups,
            "streams_members": self.streams_members,
        }
        for record in batch:
            rows = tables.get(record.table)
            if rows is None:
                raise AssertionError(f"unexpected record {record!r}")
            record.apply_to(rows)
            if isinstance(record, ConsumerGroupTombstone):  # also deletes the group's members
                for key in [k for k in self.consumer_members if k[0] == record.group_id]:
                    del self.consumer_members[key]
            if isinstance(record, ShareGroupTombstone):
                for key in [k for k in self.share_members if k[0] == record.group_id]:
                    del self.share_members[key]
                for state_key in [k for k in self.share_partitions if k[0] == record.group_id]:
                    del self.share_partitions[state_key]
            if isinstance(record, StreamsGroupTombstone):
                for key in [k for k in self.streams_members if k[0] == record.group_id]:
                    del self.streams_members[key]

    def records(self) -> list[Record]:
        return [r for batch in self.batches for r in batch]

    def load_into(self, coordinator: GroupCoordinator, now_ms: int, wall_ms: int) -> None:
        coordinator.load(
            [
                *self.groups.values(),
                *self.consumer_groups.values(),
                *self.consumer_members.values(),
                *self.share_groups.values(),
                *self.share_members.values(),
                *self.share_partitions.values(),
                *self.streams_groups.values(),
                *self.streams_members.values(),
            ],
            list(self.offsets.values()),
            now_ms,
            wall_ms,
            list(self.group_configs.values()),
            list(self.txn_offsets.values()),
        )


class FakeCatalog:
    """The topic catalog consumer groups read (names, ids, partition counts, version)."""

    def __init__(self) -> None:
        self.version = 0
        self.topics: dict[str, TopicRecord] = {}
        self._by_id: dict[bytes, TopicRecord] = {}

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None:
        return self._by_id.get(topic_id)

    def set_topic(self, name: str, partitions: int) -> TopicRecord:
        old = self.topics.get(name)
        topic_id = old.topic_id if old is not None else bytes([len(self.topics) + 1]) * 16
        record = TopicRecord(name, topic_id, partitions, 1, ())
        self.topics[name] = record
        self._by_id[topic_id] = record
        self.version += 1
        return record

    def delete_topic(self, name: str) -> None:
        record = self.topics.pop(name)
        del self._by_id[record.topic_id]
        self.version += 1


class Harness:
    def __init__(
        self,
        config: BrokerGroupSettings | None = None,
        *,
        load: bool = True,
        store: FakeStore | None = None,
        random_unit: Callable[[], float] | None = None,
    ) -> None:
        self.config = config or BrokerGroupSettings()
        self.random_unit = random_unit
        self.now_ms = START_MS
        self.wall_ms = WALL_START_MS
        self._ids = itertools.count(1)
        self.store = store or FakeStore()
        self.fail_code: int | None = None  # when set, every write fails with this code
        self.hold = False  # when set, writes wait for flush()
        self.held: list[Result] = []
        self.on_reply: Callable[[Reply], None] | None = None  # observer given to every Reply
        self.failed_batches: list[list[Record]] = []
        self.coordinator = GroupCoordinator(self.config, self._new_member_id, random_unit)
        self.catalog = FakeCatalog()
        self.coordinator.attach_catalog(self.catalog)
        if load:
            self.store.load_into(self.coordinator, self.now_ms, self.wall_ms)

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    # -- runtime -----------------------------------------------------------------------------

    def apply(self, result: Result) -> None:
        if result.records:
            assert result.on_durable is not None and result.on_failed is not None
            if self.hold or self.held:  # writes complete in order, like the runtime's batches
                self.held.append(result)
                return
        self._complete(result, self.fail_code)

    def _complete(self, result: Result, fail_code: int | None) -> None:
        if result.records:
            assert result.on_durable is not None and result.on_failed is not None
            if fail_code is not None:
                self.failed_batches.append(list(result.records))
                self.apply(result.on_failed(self.now_ms, fail_code))
                return
            self.store.write(result.records)
        follow_up = result.deliver(self.now_ms)
        if follow_up is not None:
            self.apply(follow_up)

    def flush(self, fail_code: int | None = None) -> None:
        """Complete the held writes in order (failing them with ``fail_code`` if given)."""
        while self.held:
            self._complete(self.held.pop(0), fail_code)

    def flush_late(self) -> None:
        """The held writes time out (their requests are answered REQUEST_TIMED_OUT), then land
        after all, in order: the runtime then applies their state without answering again."""
        while self.held:
            result = self.held.pop(0)
            assert result.on_durable is not None and result.on_failed is not None
            self.apply(result.on_failed(self.now_ms, ErrorCode.REQUEST_TIMED_OUT))
            self.store.write(result.records)
            self.apply(result.on_durable(self.now_ms))

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer at its own deadline."""
        target = self.now_ms + ms
        while True:
            deadline = self.coordinator.next_deadline()
            if deadline is None or deadline > target:
                break
            self._set_time(max(self.now_ms, deadline))
            for result in self.coordinator.poll_timers(self.now_ms, self.wall_ms):
                self.apply(result)
        self._set_time(target)

    def _set_time(self, now_ms: int) -> None:
        self.wall_ms += now_ms - self.now_ms
        self.now_ms = now_ms

    def restart(self, config: BrokerGroupSettings | None = None) -> Harness:
        """A new coordinator loaded from this one's store (failover), same clock."""
        other = Harness(config or self.config, load=False, store=self.store, random_unit=self.random_unit)
        other.now_ms, other.wall_ms = self.now_ms, self.wall_ms
        other._ids = self._ids
        other.catalog = self.catalog
        other.coordinator.attach_catalog(self.catalog)
        self.store.load_into(other.coordinator, other.now_ms, other.wall_ms)
        return other

    def group(self, group_id: str = "g") -> ClassicGroup:
        group = classic_group_of(self.coordinator, group_id)
        assert group is not None, f"no group {group_id}"
        return group

    def ctx(
        self, api_key: int, version: int, client_id: str = "client", host: str = "/10.0.0.1"
    ) -> RequestContext:
        return RequestContext(
            now_ms=self.now_ms,
            wall_ms=self.wall_ms,
            api_version=version,
            client_id=client_id,
            client_host=host,
            reply_to=Reply(api_key, version, self.on_reply),
        )

    def _call(
        self, method: Any, api_key: int, version: int, request: Any, client_id: str = "client"
    ) -> Reply:
        ctx = self.ctx(api_key, version, client_id)
        self.apply(method(ctx, request))
        assert isinstance(ctx.reply_to, Reply)
        return ctx.reply_to

    # -- requests ----------------------------------------------------------------------------

    def join(
        self,
        group: str = "g",
        member_id: str = "",
        *,
        version: int = 5,
        instance_id: str | None = None,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        protocol_type: str = "consumer",
        protocols: Sequence[tuple[str, bytes]] | None = None,
        topics: Sequence[str] = ("t",),
        client_id: str = "client",
    ) -> Reply:
        if protocols is None:
            protocols = [("range", subscription(topics))]
        request = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms if version >= 1 else -1,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=[JoinGroupRequestProtocol(name, metadata) for name, metadata in protocols],
        )
        return self._call(self.coordinator.join_group, JOIN_GROUP, version, request, client_id)

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        *,
        version: int = 3,
        assignments: Mapping[str, bytes] | None = None,
        instance_id: str | None = None,
        protocol_type: Any = AUTO,
        protocol_name: Any = AUTO,
    ) -> Reply:
        if protocol_type is AUTO:
            protocol_type = "consumer" if version >= 5 else None
        if protocol_name is AUTO:
            protocol_name = "range" if version >= 5 else None
        request = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
        )
        return self._call(self.coordinator.sync_group, SYNC_GROUP, version, request)

    def heartbeat(
        self, group: str, member_id: str, generation: int, *, version: int = 3, instance_id: str | None = None
    ) -> Reply:
        request = HeartbeatRequest(group, generation, member_id, instance_id)
        return self._call(self.coordinator.heartbeat, HEARTBEAT, version, request)

    def leave(
        self,
        group: str,
        member_id: str = "",
        *,
        version: int = 3,
        members: Sequence[tuple[str, str | None]] | None = None,
    ) -> Reply:
        if members is None:
            members = [(member_id, None)]
        request = LeaveGroupRequest(
            group_id=group,
            member_id=member_id,
            members=[MemberIdentity(m, i) for m, i in members],
        )
        return self._call(self.coordinator.leave_group, LEAVE_GROUP, version, request)

    def commit(
        self,
        group: str,
        offsets: Mapping[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        version: int = 8,
        instance_id: str | None = None,
        metadata: str | None = "",
        retention_time_ms: int = -1,
        commit_timestamp: int = -1,
        leader_epoch: int = -1,
    ) -> Reply:
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=leader_epoch,
                    commit_timestamp=commit_timestamp,
                    committed_metadata=metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation if version >= 1 else -1,
            member_id=member_id if version >= 1 else "",
            group_instance_id=instance_id,
            retention_time_ms=retention_time_ms,
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        return self._call(self.coordinator.commit_offsets, OFFSET_COMMIT, version, request)

    def fetch(
        self,
        group: str,
        topics: Mapping[str, Sequence[int]] | None,
        *,
        version: int = 7,
        require_stable: bool = False,
    ) -> Reply:
        if version >= 8:
            return self.fetch_groups({group: topics}, version=version, require_stable=require_stable)
        request = OffsetFetchRequest(
            group_id=group,
            topics=None
            if topics is None
            else [OffsetFetchRequestTopic(t, list(ps)) for t, ps in topics.items()],
            require_stable=require_stable,
        )
        return self._call(self.coordinator.fetch_offsets, OFFSET_FETCH, version, request)

    def fetch_groups(
        self,
        groups: Mapping[str, Mapping[str, Sequence[int]] | None],
        *,
        version: int = 8,
        require_stable: bool = False,
    ) -> Reply:
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=g,
                    topics=None
                    if topics is None
                    else [
                        OffsetFetchRequestTopics(name=t, partition_indexes=list(ps))
                        for t, ps in topics.items()
                    ],
                )
                for g, topics in groups.items()
            ],
            require_stable=require_stable,
        )
        return self._call(self.coordinator.fetch_offsets, OFFSET_FETCH, version, request)

    def describe(self, *groups: str, version: int = 5, include_authorized_operations: bool = False) -> Reply:
        request = DescribeGroupsRequest(list(groups), include_authorized_operations)
        return self._call(self.coordinator.handle, DESCRIBE_GROUPS, version, request)

    def list_groups(
        self, *, version: int = 5, states: Sequence[str] = (), types: Sequence[str] = ()
    ) -> Reply:
        request = ListGroupsRequest(list(states), list(types))
        return self._call(self.coordinator.list_groups, LIST_GROUPS, version, request)

    def delete_groups(self, *groups: str, version: int = 2) -> Reply:
        return self._call(
            self.coordinator.delete_groups, DELETE_GROUPS, version, DeleteGroupsRequest(list(groups))
        )

    def delete_offsets(self, group: str, topics: Mapping[str, Sequence[int]]) -> Reply:
        request = OffsetDeleteRequest(
            group,
            [
                OffsetDeleteRequestTopic(t, [OffsetDeleteRequestPartition(p) for p in ps])
                for t, ps in topics.items()
            ],
        )
        return self._call(self.coordinator.delete_offsets, OFFSET_DELETE, 0, request)

    def delete_topics(self, *topics: str) -> None:
        self.apply(self.coordinator.delete_topics(list(topics), self.now_ms, self.wall_ms))

    # -- scenarios -----------------------------------------------------------------------------

    def stable_group(
        self,
        group: str = "g",
        size: int = 2,
        *,
        version: int = 5,
        instance_ids: Sequence[str | None] | None = None,
        **join_args: Any,
    ) -> tuple[list[str], int]:
        """Form a Stable group of ``size`` members; returns (member ids, leader first; generation)."""
        instance_ids = list(instance_ids) if instance_ids is not None else [None] * size
        joins = []
        for instance_id in instance_ids:
            reply = self.join(group, version=version, instance_id=instance_id, **join_args)
            if reply.answered and reply.error == 79:  # MEMBER_ID_REQUIRED
                reply = self.join(group, reply.wire.member_id, version=version, **join_args)
            joins.append(reply)
        for _ in range(100):  # the initial delayed join is extended while members keep arriving
            if all(j.answered for j in joins):
                break
            self.advance(max(self.config.group_initial_rebalance_delay_ms, 1))
        assert all(j.error == 0 for j in joins), [j.wire for j in joins]
        generation = joins[0].wire.generation_id
        leader = joins[0].wire.leader
        members = [j.wire.member_id for j in joins]
        members.sort(key=lambda m: m != leader)
        syncs = [
            self.sync(
                group,
                m,
                generation,
                assignments={x: f"assignment-{x}".encode() for x in members} if m == leader else None,
            )
            for m in members
        ]
        assert all(s.error == 0 for s in syncs)
        assert self.group(group).state.value == "Stable"
        return members, generation
