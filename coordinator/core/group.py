"""The group model: what the shard, the offsets and the retention sweep know of a group of any
kind (docs/group-model.md).

``Group`` is one group (Kafka's ``Group`` interface: its type, state, members, how ListGroups
shows it). ``GroupKind`` is one kind of group on one shard -- the classic groups, the KIP-848
consumer groups -- and everything the shard asks of it: loading and unloading, timers, deletion,
and the offset rules (commit and fetch validation, OffsetDelete, the expiry condition). Each kind
lives in its own folder (``coordinator/core/classic``, ``coordinator/core/consumer``) and is
registered in ``coordinator/core/kinds.py``; nothing outside that folder branches on its type.

A deletion is a pending change: the records to write and the change to apply once they are
durable (nothing is removed before that, so a failed write has nothing to undo).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.liveness import MemberLiveness
from coordinator.core.timers import TimerKey
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListedGroup
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sync_group import SyncGroupRequest
from storage.records import Record, TopicRecord

log = logging.getLogger(__name__)

G = TypeVar("G")

TimerHandler = Callable[[TimerKey, Effects], None]
# A request one kind serves on its own (ConsumerGroupHeartbeat, DescribeGroups, ...).
RequestHandler = Callable[[RequestContext, Any, Effects], None]

# DescribeGroups v3+ and ConsumerGroupDescribe: INT32_MIN means "not requested". When requested,
# the core reports what Kafka reports without an authorizer: every operation a group supports
# (READ=3, DELETE=6, DESCRIBE=8).
AUTHORIZED_OPERATIONS_OMITTED: Final = -(2**31)
GROUP_AUTHORIZED_OPERATIONS: Final = (1 << 3) | (1 << 6) | (1 << 8)


@dataclass(slots=True)
class PendingChange:
    """Records to write and the state change they carry, applied once they are durable."""

    records: list[Record] = field(default_factory=list)
    apply: Callable[[], None] = lambda: None


@dataclass(slots=True, frozen=True)
class OffsetExpiry:
    """Which committed offsets of a group the retention sweep may expire (KIP-211): those of
    topics not in ``keep_topics``, counted from ``base_ms`` (None: each offset's commit time)."""

    keep_topics: frozenset[str] = frozenset()
    base_ms: int | None = None


# OffsetDelete: the group's error code, and the test "is this topic protected" (None: none is).
OffsetDeleteRule = tuple[int, Callable[[str], bool] | None]


def group_deletion(
    groups: Mapping[str, G],
    group_id: str,
    records: list[Record],
    is_empty: Callable[[G], bool],
    remove: Callable[[G], None],
) -> PendingChange:
    """The deletion of an empty group (DeleteGroups, or the retention sweep): ``records`` now;
    once they are durable the group is removed -- unless it was replaced meanwhile, or gained
    members, in which case it stays."""
    group = groups[group_id]

    def apply() -> None:
        if groups.get(group_id) is not group:
            return
        if is_empty(group):
            remove(group)
        else:
            log.info("group %s: deleted while members joined; it stays", group_id)

    return PendingChange(records, apply)


class Group(Protocol):
    """One group, whatever its kind."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str:
        """ListGroups' GroupType: "classic", "consumer"."""
        ...

    @property
    def state_name(self) -> str:
        """The state as Kafka names it on the wire ("Empty", "Stable", ...)."""
        ...

    @property
    def member_count(self) -> int: ...

    def listed(self) -> ListedGroup:
        """The group as ListGroups shows it."""
        ...


class GroupView(Protocol):
    """How the HTTP API and the console show one group (coordinator/server/group_views.py and
    topic_views.py, docs/observability.md#the-console): JSON-ready values, built from the group as
    it is now (the server reads them between two core calls)."""

    def row(self) -> dict[str, object]:
        """The group list's fields: ``type``, ``state``, ``members`` (a count), then the kind's
        own (``protocol_type``, ``protocol_name``, ``generation``, ...), in the order shown."""
        ...

    def page(self) -> dict[str, object]:
        """The group page's fields: ``type``, ``state``, ..., ``members`` (one dict each, with
        its ``member_id``), in the order shown."""
        ...

    def assigned(self) -> list[tuple[str, int, str]]:
        """(topic, partition, member id) of each partition a member owns, for the topic pages
        (empty where the kind's assignments are not topic partitions a consumer commits)."""
        ...


def view_row(
    group: Group, generation: int, protocol_type: str | None = None, protocol_name: str | None = None
) -> dict[str, object]:
    """The start of ``GroupView.row`` every kind shares: type, state, member count, then the
    protocol fields (``protocol_type`` None: the group's type); the kind adds its own after."""
    return {
        "type": group.group_type,
        "state": group.state_name,
        "members": group.member_count,
        **_protocol_fields(group, generation, protocol_type, protocol_name),
    }


def view_page(
    group: Group, generation: int, protocol_type: str | None = None, protocol_name: str | None = None
) -> dict[str, object]:
    """The start of ``GroupView.page`` every kind shares: type, state, then the protocol fields;
    the kind adds its own after (its ``members`` among them)."""
    return {
        "type": group.group_type,
        "state": group.state_name,
        **_protocol_fields(group, generation, protocol_type, protocol_name),
    }


def _protocol_fields(
    group: Group, generation: int, protocol_type: str | None, protocol_name: str | None
) -> dict[str, object]:
    return {
        "protocol_type": group.group_type if protocol_type is None else protocol_type,
        "protocol_name": protocol_name,
        "generation": generation,
    }


class TopicCatalog(Protocol):
    """What the core reads of the topic catalog: names, ids, partition counts, and a version
    that changes whenever any of them does."""

    @property
    def version(self) -> int: ...

    @property
    def topics(self) -> Mapping[str, TopicRecord]: ...

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None: ...


class EmptyCatalog:
    """The catalog before one is attached: no topics."""

    version = 0
    topics: Mapping[str, TopicRecord] = {}

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None:
        return None


EMPTY_CATALOG: Final = EmptyCatalog()


class ClassicProtocolApi(Protocol):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for the groups of one kind: the classic
    groups themselves, or the classic-protocol members of consumer groups (docs/migration.md)."""

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None: ...

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, fx: Effects) -> None: ...

    def heartbeat(
        self, ctx: RequestContext, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> int:
        """The Heartbeat's error code (the hot path: no Effects, no allocation)."""
        ...

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, fx: Effects) -> None: ...


class GroupKind(Protocol):
    """One kind of group on one shard: its groups and the rules the shard applies through it."""

    @property
    def name(self) -> str:
        """The kind's GroupType ("classic", "consumer")."""
        ...

    @property
    def groups(self) -> Mapping[str, Group]:
        """This kind's part of the group id space: a kind creates a group only for an id no kind
        holds (``GroupRegistry.holds``), and a conversion moves an id from one kind to another."""
        ...

    # -- lifecycle -------------------------------------------------------------------------------

    def load(self, records: Sequence[Record]) -> None:
        """Rebuild groups from the stored records of this kind (others are ignored)."""
        ...

    def on_loaded(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """Everything (or the groups of ``group_ids``) is loaded: restart member sessions and other timers."""
        ...

    def unload(self, fx: Effects, group_ids: Collection[str] | None = None) -> None:
        """The shard is gone: every group (or those of ``group_ids``) goes away, parked requests
        are answered."""
        ...

    def timer_handlers(self) -> Mapping[str, TimerHandler]:
        """The timer kinds this kind schedules (the first element of their keys)."""
        ...

    def attach_catalog(self, catalog: TopicCatalog) -> None:
        """The topic catalog (read only; its version marks changes)."""
        ...

    def request_handlers(self) -> Mapping[type, RequestHandler]:
        """The requests this kind serves on its own, by request class (GroupCoordinator.handle)."""
        ...

    def classic_protocol(self, group_id: str, joining: bool) -> ClassicProtocolApi | None:
        """Who answers JoinGroup/SyncGroup/Heartbeat/LeaveGroup for ``group_id``, held by this
        kind (``joining``: for a JoinGroup); None: the default kind does (see the registry)."""
        ...

    def release_empty(self, group_id: str, fx: Effects) -> None:
        """Another kind takes the id of a group of this kind that has no members over: the group
        goes, its stored record is tombstoned (its offsets stay with the id)."""
        ...

    # -- DeleteGroups and the retention sweep ----------------------------------------------------

    def validate_delete(self, group_id: str) -> int:
        """DeleteGroups: NONE, NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND."""
        ...

    def deletion(self, group_id: str, expiring: bool) -> PendingChange:
        """Delete a group of this kind (DeleteGroups, or ``expiring`` by the retention sweep).
        Applied, it removes the group unless it gained members in the meantime."""
        ...

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        """Which of the group's offsets may expire now; None: none (e.g. it is rebalancing)."""
        ...

    def expires_without_offsets(self, group_id: str) -> bool:
        """Whether the retention sweep removes the group once it has no offset left (it is Empty)."""
        ...

    # -- offsets ---------------------------------------------------------------------------------

    def validate_offset_commit(self, group_id: str, req: OffsetCommitRequest, version: int) -> int:
        """Kafka's validateOffsetCommit; a commit accepted from a member counts as its heartbeat
        where the kind says so."""
        ...

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, instance_id: str | None, generation_or_epoch: int
    ) -> int:
        """Kafka's validateOffsetCommit with isTransactional (TxnOffsetCommit, KIP-447: v3+ name
        the member and its generation; earlier versions send -1 and no member)."""
        ...

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """Kafka's validateOffsetFetch (OffsetFetch v9+, which names the member)."""
        ...

    def offset_delete_rule(self, group_id: str) -> OffsetDeleteRule:
        """OffsetDelete: the group's error code, and which topics its members still consume."""
        ...

    def member_liveness(self, group_id: str, member_id: str, now_ms: int) -> MemberLiveness | None:
        """A member's last heartbeat, session deadline and liveness at monotonic ``now_ms``
        (coordinator/core/liveness.py); None for an unknown member."""
        ...

    # -- views -----------------------------------------------------------------------------------

    def view(self, group_id: str) -> GroupView | None:
        """How the console and the HTTP API show the group; None if this kind does not hold it."""
        ...
