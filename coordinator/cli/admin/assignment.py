"""Decode the bytes a consumer-protocol leader hands each member (ConsumerProtocolAssignment)."""

from __future__ import annotations

import struct

from protocol.messages.consumer_protocol import (
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_assignment_v1,
    decode_consumer_protocol_assignment_v2,
    decode_consumer_protocol_assignment_v3,
)
from protocol.primitives import DecodeError

_DECODERS = (
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_assignment_v1,
    decode_consumer_protocol_assignment_v2,
    decode_consumer_protocol_assignment_v3,
)


def decode_assignment(data: bytes) -> list[tuple[str, int]] | None:
    """Assigned (topic, partition)s, sorted; None if the bytes are not a consumer assignment.

    The bytes start with an int16 version; a newer version than we know is read with our newest
    layout, as Kafka's consumers do (new versions only append fields).
    """
    if len(data) < 2:
        return [] if not data else None
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        return None
    try:
        assignment, _pos = _DECODERS[min(version, len(_DECODERS) - 1)](data, 2)
    except (DecodeError, IndexError, struct.error, UnicodeDecodeError):
        return None
    return sorted((tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions)
