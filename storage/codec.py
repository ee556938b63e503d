"""Encodings of the composite columns: the members blob of a group and the configs of a topic.

Members blob, version 1 (all integers big-endian)::

    u8   version = 1
    u32  member count
    per member:
        str   member_id
        nstr  group_instance_id
        str   client_id
        str   client_host
        i32   rebalance_timeout_ms
        i32   session_timeout_ms
        bytes subscription
        bytes assignment

where ``str``/``bytes`` are an i32 length followed by the (UTF-8) payload and ``nstr`` uses
length -1 for None. A future layout gets a new version byte; decoders keep reading old ones.

Consumer member topics blob (the list fields of a KIP-848 member), version 1::

    u8   version = 1
    u32  subscribed topic count, then per topic: str name
    3 x  topic-partition list (assigned, pending revocation, target):
         u32 topic count, then per topic: str name, u32 partition count, i32 partition * count

Partitions must be in 0..2**31-1. Order is kept as given (the coordinator sorts).

Classic protocols blob (the JoinGroup protocols of a classic member inside a consumer group),
version 1::

    u8   version = 1
    u32  protocol count, then per protocol: str name, bytes metadata

Share-partition state batches (the in-flight window of a share-partition as persisted,
docs/share-groups.md, "What is persisted"), version 1::

    u8   version = 1
    u32  batch count, then per batch: i64 first offset, i64 last offset, u8 delivery state,
         u16 delivery count

Topic configs are a JSON array of ``[name, value-or-null]`` pairs: order and None survive,
and the column stays readable from a SQL shell.
"""

from __future__ import annotations

import json
import struct
from typing import Final

from storage.records import MemberRecord, ShareStateBatches, TopicPartitionList

MEMBERS_V1: Final = 1
CONSUMER_TOPICS_V1: Final = 1
CLASSIC_PROTOCOLS_V1: Final = 1
SHARE_BATCHES_V1: Final = 1

_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_TIMEOUTS = struct.Struct(">ii")
_SHARE_BATCH = struct.Struct(">qqBH")


class CodecError(ValueError):
    """A stored blob or a value to store does not fit the encoding."""


def encode_members(members: tuple[MemberRecord, ...]) -> bytes:
    out = bytearray(_U8.pack(MEMBERS_V1))
    out += _U32.pack(len(members))
    try:
        for m in members:
            _put_bytes(out, m.member_id.encode())
            if m.group_instance_id is None:
                out += _I32.pack(-1)
            else:
                _put_bytes(out, m.group_instance_id.encode())
            _put_bytes(out, m.client_id.encode())
            _put_bytes(out, m.client_host.encode())
            out += _TIMEOUTS.pack(m.rebalance_timeout_ms, m.session_timeout_ms)
            _put_bytes(out, m.subscription)
            _put_bytes(out, m.assignment)
    except (struct.error, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise CodecError(f"cannot encode group member: {exc}") from exc
    return bytes(out)


def decode_members(blob: bytes) -> tuple[MemberRecord, ...]:
    # Every field read inline (a restart decodes one blob per stored classic group:
    # docs/performance.md#restart-decoding); _get_bytes's checks, in the same order.
    if type(blob) is not bytes:  # a driver's memoryview: its slices have no decode()
        blob = bytes(blob)
    unpack_i32 = _I32.unpack_from
    size = len(blob)

    def field(pos: int) -> tuple[bytes, int]:
        (n,) = unpack_i32(blob, pos)
        start = pos + 4
        end = start + n
        if n < 0 or end > size:
            raise CodecError(f"bad length {n} at offset {pos}")
        return blob[start:end], end

    try:
        version = blob[0]
        if version != MEMBERS_V1:
            raise CodecError(f"unknown members blob version {version}")
        (count,) = _U32.unpack_from(blob, 1)
        pos = 5
        members = []
        for _ in range(count):
            member_id, pos = field(pos)
            if unpack_i32(blob, pos)[0] == -1:
                instance_id: str | None = None
                pos += 4
            else:
                raw_instance_id, pos = field(pos)
                instance_id = raw_instance_id.decode()
            client_id, pos = field(pos)
            client_host, pos = field(pos)
            rebalance_timeout_ms, session_timeout_ms = _TIMEOUTS.unpack_from(blob, pos)
            subscription, pos = field(pos + 8)
            assignment, pos = field(pos)
            members.append(
                MemberRecord(
                    member_id.decode(),
                    instance_id,
                    client_id.decode(),
                    client_host.decode(),
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    bytes(subscription),
                    bytes(assignment),
                )
            )
        if pos != size:
            raise CodecError(f"{size - pos} trailing bytes after the members")
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise CodecError(f"corrupt members blob: {exc}") from exc
    return tuple(members)


def encode_consumer_topics(
    subscribed: tuple[str, ...],
    assigned: TopicPartitionList,
    pending_revocation: TopicPartitionList,
    target: TopicPartitionList,
) -> bytes:
    out = bytearray(_U8.pack(CONSUMER_TOPICS_V1))
    try:
        out += _U32.pack(len(subscribed))
        for name in subscribed:
            _put_bytes(out, name.encode())
        for tps in (assigned, pending_revocation, target):
            out += _U32.pack(len(tps))
            for name, partitions in tps:
                _put_bytes(out, name.encode())
                n = len(partitions)
                out += _U32.pack(n)
                if n:
                    if min(partitions) < 0:
                        raise CodecError(f"negative partition in {name!r}: {min(partitions)}")
                    out += struct.pack(f">{n}i", *partitions)
    except (struct.error, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise CodecError(f"cannot encode consumer member topics: {exc}") from exc
    return bytes(out)


def decode_consumer_topics(
    blob: bytes,
) -> tuple[tuple[str, ...], TopicPartitionList, TopicPartitionList, TopicPartitionList]:
    try:
        version = blob[0]
        if version != CONSUMER_TOPICS_V1:
            raise CodecError(f"unknown consumer topics blob version {version}")
        (count,) = _U32.unpack_from(blob, 1)
        pos = 5
        subscribed = []
        for _ in range(count):
            name, pos = _get_str(blob, pos)
            subscribed.append(name)
        lists = []
        for _ in range(3):
            (count,) = _U32.unpack_from(blob, pos)
            pos += 4
            tps = []
            for _ in range(count):
                name, pos = _get_str(blob, pos)
                (n,) = _U32.unpack_from(blob, pos)
                pos += 4
                partitions: tuple[int, ...] = struct.unpack_from(f">{n}i", blob, pos) if n else ()
                pos += 4 * n
                tps.append((name, partitions))
            lists.append(tuple(tps))
        if pos != len(blob):
            raise CodecError(f"{len(blob) - pos} trailing bytes after the consumer topics")
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise CodecError(f"corrupt consumer topics blob: {exc}") from exc
    return tuple(subscribed), lists[0], lists[1], lists[2]


def encode_classic_protocols(protocols: tuple[tuple[str, bytes], ...]) -> bytes:
    out = bytearray(_U8.pack(CLASSIC_PROTOCOLS_V1))
    try:
        out += _U32.pack(len(protocols))
        for name, metadata in protocols:
            _put_bytes(out, name.encode())
            _put_bytes(out, bytes(metadata))
    except (struct.error, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise CodecError(f"cannot encode classic protocols: {exc}") from exc
    return bytes(out)


def decode_classic_protocols(blob: bytes) -> tuple[tuple[str, bytes], ...]:
    try:
        version = blob[0]
        if version != CLASSIC_PROTOCOLS_V1:
            raise CodecError(f"unknown classic protocols blob version {version}")
        (count,) = _U32.unpack_from(blob, 1)
        pos = 5
        protocols = []
        for _ in range(count):
            name, pos = _get_str(blob, pos)
            metadata, pos = _get_bytes(blob, pos)
            protocols.append((name, metadata))
        if pos != len(blob):
            raise CodecError(f"{len(blob) - pos} trailing bytes after the classic protocols")
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise CodecError(f"corrupt classic protocols blob: {exc}") from exc
    return tuple(protocols)


def encode_share_batches(batches: ShareStateBatches) -> bytes:
    out = bytearray(_U8.pack(SHARE_BATCHES_V1))
    try:
        out += _U32.pack(len(batches))
        for first, last, state, count in batches:
            out += _SHARE_BATCH.pack(first, last, state, count)
    except (struct.error, TypeError, ValueError) as exc:
        raise CodecError(f"cannot encode share-partition batches: {exc}") from exc
    return bytes(out)


def decode_share_batches(blob: bytes) -> ShareStateBatches:
    try:
        version = blob[0]
        if version != SHARE_BATCHES_V1:
            raise CodecError(f"unknown share batches blob version {version}")
        (count,) = _U32.unpack_from(blob, 1)
        if len(blob) != 5 + count * _SHARE_BATCH.size:
            raise CodecError(f"share batches blob of {len(blob)} bytes for {count} batches")
        return tuple(_SHARE_BATCH.unpack_from(blob, 5 + i * _SHARE_BATCH.size) for i in range(count))
    except (IndexError, struct.error) as exc:
        raise CodecError(f"corrupt share batches blob: {exc}") from exc


def encode_configs(configs: tuple[tuple[str, str | None], ...]) -> str:
    # ensure_ascii keeps U+0000 and lone surrogates out of the text column.
    return json.dumps([[name, value] for name, value in configs], separators=(",", ":"))


def decode_configs(text: str) -> tuple[tuple[str, str | None], ...]:
    try:
        pairs = json.loads(text)
        return tuple((str(name), None if value is None else str(value)) for name, value in pairs)
    except (ValueError, TypeError) as exc:
        raise CodecError(f"corrupt topic configs: {exc}") from exc


def _put_bytes(out: bytearray, data: bytes) -> None:
    out += _I32.pack(len(data))
    out += data


def _get_bytes(blob: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _I32.unpack_from(blob, pos)
    start = pos + 4
    end = start + n
    if n < 0 or end > len(blob):
        raise CodecError(f"bad length {n} at offset {pos}")
    return bytes(blob[start:end]), end


def _get_str(blob: bytes, pos: int) -> tuple[str, int]:
    data, pos = _get_bytes(blob, pos)
    return data.decode(), pos
