"""The admin APIs of share groups' start offsets (Kafka 4.4): DescribeShareGroupOffsets v0-1,
AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0, over the persisted state of every
share-partition of the shard's share groups (``partition_states``).

Alter and delete change that state only on an empty group; they write the rows first and apply
them once durable, then tell the share-partition leader through ``state_listeners`` so that it
drops or replaces the partitions it holds in memory (docs/share-groups.md, "Admin").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from coordinator.core.clock import ShardClock
from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import (
    GROUP_ID_NOT_FOUND,
    INVALID_GROUP_ID,
    NON_EMPTY_GROUP,
    consumer_write_error,
)
from coordinator.core.events import GroupEvents
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.registry import GroupRegistry
from coordinator.core.share.delivery import ShareDelivery, lock_key
from coordinator.core.share.group import ShareGroup
from coordinator.core.share.membership import Rejected
from coordinator.core.share.partition import PersistedShareState, RecordState
from coordinator.core.share.records import group_record, partition_state_record
from coordinator.core.stats import CoreStats
from coordinator.core.timers import TimerKey, Timers
from protocol.errors import ErrorCode
from protocol.messages import alter_share_group_offsets as asgo
from protocol.messages import delete_share_group_offsets as dsgo
from protocol.messages import describe_share_group_offsets as dsgo_describe
from storage.records import Record, SharePartitionStateTombstone

PartitionKey = tuple[str, str, int]  # (group id, topic, partition)
# Called once an admin change of a share-partition's state is durable and applied: the new
# persisted state, or None when it was deleted. The share-partition leader drops (or restores
# from it) the SharePartition it caches for that key.
StateListener = Callable[[PartitionKey, PersistedShareState | None], None]

UNKNOWN_TOPIC_OR_PARTITION: Final = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
ZERO_UUID: Final = bytes(16)
UNINITIALIZED_START_OFFSET: Final = -1
UNKNOWN_LAG: Final = -1
# Kafka's Errors messages, as its share admin answers carry them.
UNKNOWN_TOPIC_MESSAGE: Final = "This server does not host this topic-partition."
NON_EMPTY_MESSAGE: Final = "The group is not empty."
NOTHING_TO_DELETE: Final = "There is no offset information to delete."
_DONE: Final = frozenset((int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED)))


class LogEnds(Protocol):
    """The log end (high watermark) of a partition as the runtime knows it, None if unknown."""

    def __call__(self, topic: str, partition: int) -> int | None: ...


def _no_log_ends(topic: str, partition: int) -> int | None:
    return None


def delivery_complete_count(state: PersistedShareState) -> int:
    """Kafka's deliveryCompleteCount (KIP-1226): the acknowledged and archived records of the
    window at or above the start offset."""
    total = 0
    for batch in state.batches:
        if batch.delivery_state in _DONE and batch.last_offset >= state.start_offset:
            total += batch.last_offset - max(batch.first_offset, state.start_offset) + 1
    return total


def share_lag(state: PersistedShareState, log_end: int | None) -> int:
    """Kafka's share-partition lag: log end - start offset - records already done; -1 unknown."""
    if log_end is None or state.start_offset < 0:
        return UNKNOWN_LAG
    return log_end - state.start_offset - delivery_complete_count(state)


class ShareOffsetsAdmin(ShareDelivery):
    """DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets."""

    def __init__(
        self,
        config: BrokerGroupSettings,
        timers: Timers[TimerKey],
        clock: ShardClock,
        stats: CoreStats,
        events: GroupEvents,
        registry: GroupRegistry,
    ) -> None:
        super().__init__(config, timers, clock, stats, events, registry)
        self.log_ends: LogEnds = _no_log_ends
        self.state_listeners: list[StateListener] = []

    def attach_log_ends(self, log_ends: LogEnds) -> None:
        """Where lag reads the partitions' log ends (the runtime's view of the log)."""
        self.log_ends = log_ends

    def add_state_listener(self, listener: StateListener) -> None:
        self.state_listeners.append(listener)

    def note_partition_state(self, key: PartitionKey, state: PersistedShareState) -> None:
        """The share-partition leader's durable write of ``key``'s state (what it persisted):
        DescribeShareGroupOffsets reads the latest one."""
        if key[0] in self.groups:
            self.partition_states[key] = state

    # -- DescribeShareGroupOffsets -------------------------------------------------------------

    def describe_offsets(
        self, ctx: RequestContext, req: dsgo_describe.DescribeShareGroupOffsetsRequest, fx: Effects
    ) -> None:
        response = dsgo_describe.DescribeShareGroupOffsetsResponse(
            groups=[self._describe_group(g) for g in req.groups]
        )
        fx.reply(ctx.reply_to, response)

    def _describe_group(
        self, request: dsgo_describe.DescribeShareGroupOffsetsRequestGroup
    ) -> dsgo_describe.DescribeShareGroupOffsetsResponseGroup:
        group_id = request.group_id
        out = dsgo_describe.DescribeShareGroupOffsetsResponseGroup(group_id=group_id)
        if not group_id:
            out.error_code = INVALID_GROUP_ID
            return out
        if request.topics is None:  # v1: every partition with state
            wanted: dict[str, list[int]] = {}
            for g, topic, partition in sorted(self.partition_states):
                if g == group_id:
                    wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {}
            for t in request.topics:
                wanted.setdefault(t.topic_name, []).extend(t.partitions)
        for topic, partitions in wanted.items():
            out.topics.append(self._describe_topic(group_id, topic, partitions))
        return out

    def _describe_topic(
        self, group_id: str, topic: str, partitions: list[int]
    ) -> dsgo_describe.DescribeShareGroupOffsetsResponseTopic:
        record = self.catalog.topics.get(topic)
        out = dsgo_describe.DescribeShareGroupOffsetsResponseTopic(
            topic_name=topic, topic_id=ZERO_UUID if record is None else record.topic_id
        )
        for partition in partitions:
            answer = dsgo_describe.DescribeShareGroupOffsetsResponsePartition(
                partition_index=partition, start_offset=UNINITIALIZED_START_OFFSET, lag=UNKNOWN_LAG
            )
            state = self.partition_states.get((group_id, topic, partition)) if record else None
            if state is not None:
                answer.start_offset = state.start_offset
                answer.lag = share_lag(state, self.log_ends(topic, partition))
            out.partitions.append(answer)
        return out

    # -- AlterShareGroupOffsets ----------------------------------------------------------------

    def alter_offsets(
        self, ctx: RequestContext, req: asgo.AlterShareGroupOffsetsRequest, fx: Effects
    ) -> None:
        try:
            group = self._empty_group(req.group_id, create=True)
        except Rejected as rejected:
            fx.reply(
                ctx.reply_to,
                asgo.AlterShareGroupOffsetsResponse(error_code=rejected.code, error_message=rejected.message),
            )
            return
        response = asgo.AlterShareGroupOffsetsResponse()
        changes: dict[PartitionKey, PersistedShareState] = {}
        for topic in req.topics:
            record = self.catalog.topics.get(topic.topic_name)
            answer = asgo.AlterShareGroupOffsetsResponseTopic(topic_name=topic.topic_name)
            if record is not None:
                answer.topic_id = record.topic_id
            for p in topic.partitions:
                if record is None or not 0 <= p.partition_index < record.num_partitions:
                    answer.partitions.append(
                        asgo.AlterShareGroupOffsetsResponsePartition(
                            partition_index=p.partition_index,
                            error_code=UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=UNKNOWN_TOPIC_MESSAGE,
                        )
                    )
                    continue
                key = (group.group_id, topic.topic_name, p.partition_index)
                before = changes.get(key) or self.partition_states.get(key)
                epoch = 0 if before is None else before.state_epoch + 1
                changes[key] = PersistedShareState(max(p.start_offset, 0), epoch, ())
                answer.partitions.append(
                    asgo.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
                )
            response.responses.append(answer)
        records: list[Record] = [partition_state_record(*key, state) for key, state in changes.items()]
        # A group created by this request exists once it has state (Kafka writes nothing otherwise).
        created = group.group_id not in self.groups
        if created and records:
            records.insert(0, group_record(group))
        if not records:
            fx.reply(ctx.reply_to, response)
            return

        def durable(_out: Effects) -> None:
            if created and group.group_id not in self.groups and not self.registry.holds(group.group_id):
                self.groups[group.group_id] = group
            for key, state in changes.items():
                self.partition_states[key] = state
                self._drop_live(key)
                for listener in self.state_listeners:
                    listener(key, state)

        fx.reply(ctx.reply_to, response, _alter_failed)
        fx.write(records, on_durable=durable)

    # -- DeleteShareGroupOffsets ---------------------------------------------------------------

    def delete_offsets(
        self, ctx: RequestContext, req: dsgo.DeleteShareGroupOffsetsRequest, fx: Effects
    ) -> None:
        try:
            group = self._empty_group(req.group_id, create=False)
        except Rejected as rejected:
            fx.reply(
                ctx.reply_to,
                dsgo.DeleteShareGroupOffsetsResponse(
                    error_code=rejected.code, error_message=rejected.message
                ),
            )
            return
        response = dsgo.DeleteShareGroupOffsetsResponse()
        deleted: list[PartitionKey] = []
        for topic in req.topics:
            name = topic.topic_name
            record = self.catalog.topics.get(name)
            answer = dsgo.DeleteShareGroupOffsetsResponseTopic(topic_name=name)
            keys = sorted(k for k in self.partition_states if k[0] == group.group_id and k[1] == name)
            if record is None:
                answer.error_code, answer.error_message = UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE
            elif not keys:
                answer.error_code, answer.error_message = UNKNOWN_TOPIC_OR_PARTITION, NOTHING_TO_DELETE
            else:
                answer.topic_id = record.topic_id
                deleted += [k for k in keys if k not in deleted]
            response.responses.append(answer)
        if not deleted:
            fx.reply(ctx.reply_to, response)
            return

        def durable(_out: Effects) -> None:
            for key in deleted:
                self.partition_states.pop(key, None)
                self._drop_live(key)
                for listener in self.state_listeners:
                    listener(key, None)

        fx.reply(ctx.reply_to, response, _delete_failed)
        fx.write([SharePartitionStateTombstone(*key) for key in deleted], on_durable=durable)

    # -- shared --------------------------------------------------------------------------------

    def _drop_live(self, key: PartitionKey) -> None:
        """The live share-partition goes: its next use restores it from the new state."""
        self.live.pop(key, None)
        self.unwritten_partitions.discard(key)
        self.timers.cancel(lock_key(key))

    def _empty_group(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's checks before an offsets change: the id names a share group (AlterShareGroupOffsets
        creates it when no group has the id), and the group has no member."""
        if not group_id:
            raise Rejected(INVALID_GROUP_ID, None)
        if not create and group_id not in self.groups and not self.registry.holds(group_id):
            raise Rejected(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        group = self._group_for(group_id, create=create)
        if group.members:
            raise Rejected(NON_EMPTY_GROUP, NON_EMPTY_MESSAGE)
        return group


def _alter_failed(code: int) -> object:
    return asgo.AlterShareGroupOffsetsResponse(error_code=consumer_write_error(code))


def _delete_failed(code: int) -> object:
    return dsgo.DeleteShareGroupOffsetsResponse(error_code=consumer_write_error(code))
