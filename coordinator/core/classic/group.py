"""Classic group and member state, and the pure helpers that read it (Kafka's ClassicGroup).

These objects are mutated only by the managers. A member's parked JoinGroup/SyncGroup is the
``ReplyTo`` of that request plus its API version (the response is built at completion time in
the version the client asked for).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from coordinator.core.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from coordinator.core.context import ReplyTo
from coordinator.core.members import Protocols, static_member_check
from coordinator.core.shared_values import shared_set, shared_support
from coordinator.core.state import VALID_PREVIOUS, GroupState, transition_to
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol import decode_consumer_protocol_subscription_v0
from protocol.messages.list_groups import ListedGroup
from protocol.primitives import DecodeError

CLASSIC_GROUP_TYPE: Final = "classic"

# Timer kinds of classic groups (the first element of their timer keys).
SESSION_TIMER: Final = "session"
JOIN_TIMER: Final = "join"
SYNC_TIMER: Final = "sync"

SessionKey = tuple[str, str, str]  # ("session", group_id, member_id)
JoinKey = tuple[str, str]  # ("join", group_id)
SyncKey = tuple[str, str, int]  # ("sync", group_id, generation_id)

_UNKNOWN_MEMBER_ID: Final = int(ErrorCode.UNKNOWN_MEMBER_ID)
_NO_MEMBERS: Final[frozenset[str]] = frozenset()
_NO_STATIC_MEMBERS: Final[Mapping[str, str]] = MappingProxyType({})
_I16 = struct.Struct(">h")


def session_key(group_id: str, member_id: str) -> SessionKey:
    return (SESSION_TIMER, group_id, member_id)


def sync_key(group_id: str, generation_id: int) -> SyncKey:
    return (SYNC_TIMER, group_id, generation_id)


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    session_key: SessionKey
    assignment: bytes = b""
    join_reply: ReplyTo | None = None  # parked JoinGroup
    join_version: int = 0
    sync_reply: ReplyTo | None = None  # parked SyncGroup
    sync_version: int = 0
    # Added by a JoinGroup and not yet part of a completed generation: its session timer runs the
    # new-member join timeout and a parked JoinGroup does not keep it alive (KAFKA-7610).
    is_new: bool = False
    # Monotonic ms of the last request that renewed its session (-1: none yet); for the console.
    last_heartbeat_ms: int = -1

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Whether an expired session timer must spare this member.

        Members with a parked JoinGroup/SyncGroup are alive (their timer is re-armed when the
        response is delivered), except new members, whose JoinGroup may hang on a dead socket.
        """
        if self.is_new:
            return False
        return self.join_reply is not None or self.sync_reply is not None

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


def protocol_names(protocols: Protocols) -> set[str]:
    return {name for name, _ in protocols}


def parse_subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """Topics of a ConsumerProtocolSubscription, or None if it does not parse.

    Only the version-0 prefix is read: every later version appends fields to it, so this keeps
    working with subscription versions the coordinator does not know (Kafka does the same).
    """
    try:
        _I16.unpack_from(metadata, 0)
        subscription, _ = decode_consumer_protocol_subscription_v0(metadata, 2)
    except (DecodeError, struct.error, IndexError, UnicodeDecodeError):
        return None
    return frozenset(subscription.topics)


def union_of_subscriptions(subscriptions: Iterable[bytes]) -> frozenset[str] | None:
    """The topics of every ConsumerProtocolSubscription, or None if one does not parse."""
    topics: set[str] = set()
    for metadata in subscriptions:
        parsed = parse_subscribed_topics(metadata)
        if parsed is None:
            return None
        topics |= parsed
    return shared_set(frozenset(topics))


@dataclass(slots=True, eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    state_ms: int | None = None  # wall-clock time of the last transition; None when unknown
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # group_instance_id -> member_id, None without static members (almost every group: an empty
    # dict costs 64 B); read static_members.
    _static: dict[str, str] | None = None
    # The two member id sets below are empty in almost every group, almost all the time: they
    # are None then (an empty set costs 216 bytes); read them through the properties. A pending
    # id maps to the session key its timer runs under, so that the member it becomes keeps that
    # key and id instead of equal copies decoded from its JoinGroup.
    _pending: dict[str, SessionKey] | None = None
    _pending_sync: set[str] | None = None
    num_awaiting_join: int = 0
    # (name, supporting members) pairs, one shared tuple for every group with the same counts (a
    # dict per group cost 184 B; docs/performance.md#memory-per-idle-group): read protocol_support.
    _support: tuple[tuple[str, int], ...] = ()
    # The subscribed topics (read subscribed_topics), or, for a group as loaded, the subscription
    # bytes of its members at load (one member: its bytes; several: a tuple of them), parsed on
    # first read: most loaded groups are never asked (docs/performance.md#restart-decoding).
    _subscribed: frozenset[str] | bytes | tuple[bytes, ...] | None = None
    # Initial delayed join (group.initial.rebalance.delay.ms): a member joined during the delay.
    new_member_added: bool = False
    # (delay_ms, remaining_ms) while the join timer is the initial delayed join, else None.
    initial_join_delay: tuple[int, int] | None = None

    @property
    def join_key(self) -> JoinKey:
        """The join timer's key, built when it is needed: the timer runs only while the group
        rebalances, and a tuple kept per idle group cost 56 B (docs/performance.md#memory-per-idle-group)."""
        return (JOIN_TIMER, self.group_id)

    # -- the Group protocol (coordinator/core/group.py) ----------------------------------------

    @property
    def group_type(self) -> str:
        return CLASSIC_GROUP_TYPE

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def member_count(self) -> int:
        return len(self.members)

    def listed(self) -> ListedGroup:
        return ListedGroup(
            group_id=self.group_id,
            protocol_type=self.protocol_type or "",
            group_state=self.state.value,
            group_type=CLASSIC_GROUP_TYPE,
        )

    # -- static and pending member ids --------------------------------------------------------

    @property
    def static_members(self) -> Mapping[str, str]:
        """group_instance_id -> member_id of the static members (KIP-345)."""
        static = self._static
        return _NO_STATIC_MEMBERS if static is None else static

    def _set_static_member(self, instance_id: str, member_id: str) -> None:
        if self._static is None:
            self._static = {}
        self._static[instance_id] = member_id

    @property
    def pending_members(self) -> AbstractSet[str]:
        """Member ids handed out with MEMBER_ID_REQUIRED (KIP-394) that have not joined yet."""
        pending = self._pending
        return _NO_MEMBERS if pending is None else pending.keys()

    def pending_session_key(self, member_id: str) -> SessionKey | None:
        """The session timer key of a pending member id, or None when the id is not pending."""
        pending = self._pending
        return None if pending is None else pending.get(member_id)

    @property
    def pending_sync_members(self) -> AbstractSet[str]:
        """Members that got this generation's JoinGroup response and have not sent SyncGroup yet."""
        return self._pending_sync or _NO_MEMBERS

    def add_pending_member(self, key: SessionKey) -> None:
        if self._pending is None:
            self._pending = {}
        self._pending[key[2]] = key

    def discard_pending_member(self, member_id: str) -> None:
        pending = self._pending
        if pending is not None:
            pending.pop(member_id, None)
            if not pending:
                self._pending = None

    def clear_pending_members(self) -> None:
        self._pending = None

    def add_pending_sync_member(self, member_id: str) -> None:
        if self._pending_sync is None:
            self._pending_sync = set()
        self._pending_sync.add(member_id)

    def discard_pending_sync_member(self, member_id: str) -> None:
        pending = self._pending_sync
        if pending is not None:
            pending.discard(member_id)
            if not pending:
                self._pending_sync = None

    def clear_pending_sync_members(self) -> None:
        self._pending_sync = None

    # -- state -------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, wall_ms: int) -> None:
        self.state, self.previous_state = transition_to(self.state, target), self.state
        self.state_ms = wall_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- membership --------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add_member(self, member: Member, reply: ReplyTo | None, version: int) -> None:
        instance_id = member.group_instance_id
        if instance_id is not None:
            if instance_id in self.static_members:
                raise ValueError(f"static member {instance_id} is already in group {self.group_id}")
            self._set_static_member(instance_id, member.member_id)
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member.protocols, 1)
        self.set_join_reply(member, reply, version)
        self.discard_pending_member(member.member_id)

    def remove_member(self, member_id: str) -> Member | None:
        """Drop a member (or pending member); parked replies are left for the caller to answer."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member.protocols, -1)
            if member.join_reply is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                static = self._static
                if static is not None:
                    static.pop(member.group_instance_id, None)
                    if not static:
                        self._static = None
        if self.leader_id == member_id:
            # Kafka picks an arbitrary remaining member; we take the oldest.
            self.leader_id = next(iter(self.members), None)
        self.discard_pending_member(member_id)
        self.discard_pending_sync_member(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        reply: ReplyTo | None,
        version: int,
    ) -> None:
        self._count_protocols(member.protocols, -1)
        member.protocols = protocols
        self._count_protocols(protocols, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.set_join_reply(member, reply, version)

    def replace_static_member(
        self, old_member_id: str, new_member_id: str, new_session_key: SessionKey
    ) -> Member:
        """KIP-345: move a static member to a new member id, keeping everything else.

        The old member object keeps its parked replies: the caller must take them (take_join_reply
        keeps num_awaiting_join right) and fence them.
        """
        old = self.members.pop(old_member_id)
        new = Member(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            session_key=new_session_key,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old.group_instance_id is not None:
            self._set_static_member(old.group_instance_id, new_member_id)
        # The new process owes the SyncGroup the old one had not sent yet (Kafka leaves the old id
        # in the set, which forces a rebalance when the pending-sync timer fires).
        if old_member_id in self.pending_sync_members:
            self.discard_pending_sync_member(old_member_id)
            self.add_pending_sync_member(new_member_id)
        return new

    def set_join_reply(self, member: Member, reply: ReplyTo | None, version: int) -> None:
        if reply is not None and member.join_reply is None:
            self.num_awaiting_join += 1
        elif reply is None and member.join_reply is not None:
            self.num_awaiting_join -= 1
        member.join_reply = reply
        member.join_version = version

    def take_join_reply(self, member: Member) -> tuple[ReplyTo, int] | None:
        reply = member.join_reply
        if reply is None:
            return None
        member.join_reply = None
        self.num_awaiting_join -= 1
        return reply, member.join_version

    @staticmethod
    def take_sync_reply(member: Member) -> tuple[ReplyTo, int] | None:
        reply = member.sync_reply
        if reply is None:
            return None
        member.sync_reply = None
        return reply, member.sync_version

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_dynamic_members(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_reply is None and m.group_instance_id is None]

    def rebalance_timeout_ms(self) -> int:
        """The group's rebalance timeout: the largest of its members' (Kafka)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.join_reply is not None:
            return True
        for member in self.members.values():
            if member.join_reply is not None:
                self.leader_id = member.member_id
                return True
        return False

    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        """KIP-345 member validation: FENCED_INSTANCE_ID / UNKNOWN_MEMBER_ID / 0."""
        if group_instance_id is not None:
            code = static_member_check(self.static_members, member_id, group_instance_id)
            if code:
                return code
        if member_id not in self.members:
            return _UNKNOWN_MEMBER_ID
        return 0

    # -- protocols ---------------------------------------------------------------------------

    @property
    def protocol_support(self) -> dict[str, int]:
        """Protocol name -> how many members support it."""
        return dict(self._support)

    def _count_protocols(self, protocols: Protocols, delta: int) -> None:
        support = dict(self._support)
        for name in protocol_names(protocols):
            count = support.get(name, 0) + delta
            if count:
                support[name] = count
            else:
                del support[name]
        self._support = shared_support(tuple(support.items()))

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """JoinGroup compatibility: a new/updated member must share a protocol with all members."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and any(True for _ in names)
        if self.protocol_type != protocol_type:
            return False
        size = len(self.members)
        supported = {name for name, count in self._support if count == size}
        return any(name in supported for name in names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self._support if count == size}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes win.

        Kafka breaks ties by hash-map order; we take the protocol that got its first vote first,
        which is deterministic.
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=votes.__getitem__)

    # -- subscriptions -------------------------------------------------------------------------

    @property
    def subscribed_topics(self) -> frozenset[str] | None:
        """The union of the members' subscriptions as of the last completed generation (or the
        load) for "consumer" groups; None when unknown."""
        subscribed = self._subscribed
        if subscribed is None or type(subscribed) is frozenset:
            return subscribed
        topics = union_of_subscriptions((subscribed,) if type(subscribed) is bytes else subscribed)  # type: ignore[arg-type]
        self._subscribed = topics
        return topics

    @subscribed_topics.setter
    def subscribed_topics(self, topics: frozenset[str] | None) -> None:
        self._subscribed = topics

    def keep_subscriptions_unparsed(self) -> None:
        """subscribed_topics as compute_subscribed_topics would give it now, parsed only when
        first read: the members' subscription bytes are kept (the objects the members hold)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            self._subscribed = None
        elif not self.members:
            self._subscribed = frozenset()
        elif self.protocol_name is None:
            self._subscribed = None
        elif len(self.members) == 1:
            self._subscribed = next(iter(self.members.values())).metadata(self.protocol_name)
        else:
            protocol = self.protocol_name
            self._subscribed = tuple(member.metadata(protocol) for member in self.members.values())

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Union of the members' subscriptions for "consumer" groups; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        protocol = self.protocol_name
        return union_of_subscriptions([member.metadata(protocol) for member in self.members.values()])

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """An unknown subscription counts as subscribed for "consumer" groups (Kafka)."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics
