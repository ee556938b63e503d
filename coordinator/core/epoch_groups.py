"""What the kinds of groups whose members carry epochs (consumer, streams and share groups,
KIP-848, KIP-1071 and KIP-932) do the same way: selecting and unloading a shard's groups, the
DeleteGroups check, the id fields every heartbeat validates first, and Kafka's transactional
offset commit check (consumer and streams groups: a share group takes no offsets). Each kind
keeps its own rules; only logic that is the same in Kafka for the kinds using it lives here
(docs/group-model.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping
from typing import Protocol, TypeVar

from coordinator.core.errors import (
    GROUP_ID_NOT_FOUND,
    ILLEGAL_GENERATION,
    NON_EMPTY_GROUP,
    NONE,
    UNKNOWN_MEMBER_ID,
)


class EpochMember(Protocol):
    @property
    def member_epoch(self) -> int: ...


class EpochGroup(Protocol):
    dead: bool

    @property
    def group_id(self) -> str: ...

    @property
    def members(self) -> Mapping[str, EpochMember]: ...


G = TypeVar("G", bound=EpochGroup)


def selected(groups: Mapping[str, G], group_ids: Collection[str] | None) -> list[G]:
    """The groups of ``group_ids`` that are here (all of them for None)."""
    if group_ids is None:
        return list(groups.values())
    return [groups[group_id] for group_id in group_ids if group_id in groups]


def unload(groups: MutableMapping[str, G], group_ids: Collection[str] | None) -> None:
    """The groups (all, or those of ``group_ids``) leave the shard: they are dead to whoever
    still holds them."""
    for group in selected(groups, group_ids):
        group.dead = True
        del groups[group.group_id]


def delete_refusal(groups: Mapping[str, G], group_id: str) -> int:
    """DeleteGroups: a group that is not here, or one with members, is refused."""
    group = groups.get(group_id)
    if group is None:
        return GROUP_ID_NOT_FOUND
    return NON_EMPTY_GROUP if group.members else NONE


def txn_offset_commit_error(group: EpochGroup, member_id: str, instance_id: str | None, epoch: int) -> int:
    """Kafka's ConsumerGroup and StreamsGroup validateOffsetCommit with isTransactional: the member
    is checked only when named, and a stale epoch is ILLEGAL_GENERATION (what the producer expects)."""
    if epoch < 0 and not group.members:
        return NONE
    if epoch < 0 and not member_id and instance_id is None:
        return NONE
    member = group.members.get(member_id)
    if member is None:
        return UNKNOWN_MEMBER_ID
    return ILLEGAL_GENERATION if epoch != member.member_epoch else NONE


def invalid_ids(
    member_id: str | None, group_id: str, instance_id: str | None, rack_id: str | None
) -> str | None:
    """Kafka's first heartbeat checks (its throwIf...HeartbeatRequestIsInvalid), in its order: the
    message of the first id field that is blank (``member_id`` None: not checked), else None."""
    if member_id is not None and not member_id.strip():
        return "MemberId can't be empty."
    if not group_id.strip():
        return "GroupId can't be empty."
    if instance_id is not None and not instance_id.strip():
        return "InstanceId can't be empty."
    if rack_id is not None and not rack_id.strip():
        return "RackId can't be empty."
    return None


def is_empty(group: EpochGroup) -> bool:
    """Whether the group has no members (what DeleteGroups and the retention sweep ask)."""
    return not group.members
