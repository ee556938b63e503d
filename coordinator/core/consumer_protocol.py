"""The ConsumerProtocol bytes a classic member speaks inside a consumer group (docs/migration.md).

A classic member's JoinGroup carries its subscription as ConsumerProtocolSubscription metadata
(topics; owned partitions from version 1; rack from version 3) and receives its assignment in
SyncGroup as ConsumerProtocolAssignment bytes, which the coordinator writes itself once the group
is a consumer group. Each layout appends fields to the previous one, so a version newer than the
ones known here is read with the newest known layout, and an assignment is written in the
member's subscription version, capped at the newest known one (Kafka does the same).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from protocol.messages import consumer_protocol as cp
from protocol.primitives import DecodeError

# The protocol type of groups whose members speak ConsumerProtocol (Kafka's "consumer").
CONSUMER_PROTOCOL_TYPE: Final = "consumer"

_I16 = struct.Struct(">h")
NEWEST_VERSION: Final = 3

_SUBSCRIPTION_DECODERS: Final[
    tuple[Callable[[bytes, int], tuple[cp.ConsumerProtocolSubscription, int]], ...]
] = (
    cp.decode_consumer_protocol_subscription_v0,
    cp.decode_consumer_protocol_subscription_v1,
    cp.decode_consumer_protocol_subscription_v2,
    cp.decode_consumer_protocol_subscription_v3,
)
_ASSIGNMENT_DECODERS: Final[tuple[Callable[[bytes, int], tuple[cp.ConsumerProtocolAssignment, int]], ...]] = (
    cp.decode_consumer_protocol_assignment_v0,
    cp.decode_consumer_protocol_assignment_v1,
    cp.decode_consumer_protocol_assignment_v2,
    cp.decode_consumer_protocol_assignment_v3,
)
_ASSIGNMENT_ENCODERS: Final[tuple[Callable[[cp.ConsumerProtocolAssignment, bytearray], None], ...]] = (
    cp.encode_consumer_protocol_assignment_v0,
    cp.encode_consumer_protocol_assignment_v1,
    cp.encode_consumer_protocol_assignment_v2,
    cp.encode_consumer_protocol_assignment_v3,
)


class MalformedConsumerProtocol(ValueError):
    """Metadata or an assignment that is not ConsumerProtocol bytes."""


@dataclass(slots=True, frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]  # owned partitions (empty before version 1)
    rack_id: str | None


def version_of(data: bytes) -> int:
    """The version prefix of ConsumerProtocol bytes (MalformedConsumerProtocol if there is none)."""
    try:
        (version,) = _I16.unpack_from(data, 0)
    except struct.error:
        raise MalformedConsumerProtocol("no version prefix") from None
    if version < 0:
        raise MalformedConsumerProtocol(f"negative version {version}")
    return int(version)


def decode_subscription(metadata: bytes) -> Subscription:
    version = version_of(metadata)
    decoder = _SUBSCRIPTION_DECODERS[min(version, NEWEST_VERSION)]
    try:
        subscription, _ = decoder(metadata, 2)
    except (DecodeError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MalformedConsumerProtocol(f"subscription version {version}: {exc}") from None
    owned: dict[str, frozenset[int]] = {}
    for tp in subscription.owned_partitions:
        if tp.partitions:
            owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return Subscription(tuple(subscription.topics), owned, subscription.rack_id or None)


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """The partitions of ConsumerProtocolAssignment bytes; no bytes at all (a member that has not
    received an assignment yet) is an empty assignment."""
    if not data:
        return {}
    version = version_of(data)
    try:
        assignment, _ = _ASSIGNMENT_DECODERS[min(version, NEWEST_VERSION)](data, 2)
    except (DecodeError, struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MalformedConsumerProtocol(f"assignment version {version}: {exc}") from None
    partitions: dict[str, frozenset[int]] = {}
    for tp in assignment.assigned_partitions:
        if tp.partitions:
            partitions[tp.topic] = partitions.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return partitions


def encode_assignment(assignment: Mapping[str, frozenset[int]], subscription_metadata: bytes) -> bytes:
    """ConsumerProtocolAssignment bytes in the version of the member's subscription."""
    try:
        version = min(version_of(subscription_metadata), NEWEST_VERSION)
    except MalformedConsumerProtocol:
        version = 0
    message = cp.ConsumerProtocolAssignment(
        assigned_partitions=[
            cp.TopicPartition(topic, sorted(parts)) for topic, parts in sorted(assignment.items()) if parts
        ],
        user_data=None,
    )
    out = bytearray(_I16.pack(version))
    _ASSIGNMENT_ENCODERS[version](message, out)
    return bytes(out)
