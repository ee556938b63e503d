"""KIP-951 NodeEndpoints in Produce (v10+) and Fetch (v16+) responses, rewritten without
decoding the records.

When a partition's leader moved, the broker names the new leader's address in a top-level
tagged field (tag 0) after all the partitions. To reach it, this module walks the response's
structure, skipping record sets by their length, and replaces only that field: the bytes before
the tagged-field section are reused as they are. A response without tagged fields (the common
case) is returned untouched.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from protocol.apis import ApiKey
from protocol.primitives import DecodeError, read_uvarint, write_uvarint

PRODUCE_FIRST: Final = 10
FETCH_FIRST: Final = 16
_NODE_ENDPOINTS_TAG: Final = 0
FILLER_TAG: Final = 100  # the least tag of a filler field; no response we forward defines it
_INT32: Final = struct.Struct(">i")

Endpoint = tuple[int, str, int, str | None]  # node id, host, port, rack
Rewrite = Callable[[int], tuple[str, int] | None]  # node id -> gateway address (None: unknown)


def carries_node_endpoints(api_key: int, api_version: int) -> bool:
    return (api_key == ApiKey.PRODUCE and api_version >= PRODUCE_FIRST) or (
        api_key == ApiKey.FETCH and api_version >= FETCH_FIRST
    )


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = read_uvarint(data, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        pos += size
    return pos


def _skip_compact_bytes(data: bytes, pos: int) -> int:
    """A compact (nullable) string, bytes or records field."""
    size, pos = read_uvarint(data, pos)
    return pos + max(size - 1, 0)


def _top_level_tags_offset(api_key: int, api_version: int, frame: bytes, origin: int = 0) -> int:
    """Where the top-level tagged fields start in a response frame whose correlation id is at
    `origin` (4 when the frame still has its length prefix)."""
    pos = _skip_tags(frame, origin + 4)  # response header v1
    if api_key == ApiKey.FETCH:
        pos += 10  # throttle_time_ms, error_code, session_id
    topics, pos = read_uvarint(frame, pos)
    for _ in range(max(topics - 1, 0)):
        if api_key == ApiKey.FETCH or api_version >= 13:
            pos += 16  # topic id
        else:
            pos = _skip_compact_bytes(frame, pos)  # topic name
        partitions, pos = read_uvarint(frame, pos)
        for _ in range(max(partitions - 1, 0)):
            pos += 30  # index, error_code, three int64 offsets
            if api_key == ApiKey.PRODUCE:
                errors, pos = read_uvarint(frame, pos)
                for _ in range(max(errors - 1, 0)):
                    pos = _skip_tags(frame, _skip_compact_bytes(frame, pos + 4))
                pos = _skip_compact_bytes(frame, pos)  # error message
            else:
                aborted, pos = read_uvarint(frame, pos)
                for _ in range(max(aborted - 1, 0)):
                    pos = _skip_tags(frame, pos + 16)
                pos += 4  # preferred read replica
                pos = _skip_compact_bytes(frame, pos)  # records
            pos = _skip_tags(frame, pos)
        pos = _skip_tags(frame, pos)
    if api_key == ApiKey.PRODUCE:
        pos += 4  # throttle_time_ms
    if pos >= len(frame):
        raise DecodeError("truncated response: no top-level tagged fields")
    return pos


def decode_endpoints(data: bytes) -> list[Endpoint]:
    count, pos = read_uvarint(data, 0)
    endpoints: list[Endpoint] = []
    for _ in range(max(count - 1, 0)):
        (node_id,) = _INT32.unpack_from(data, pos)
        size, pos = read_uvarint(data, pos + 4)
        host = data[pos : pos + size - 1].decode()
        pos += size - 1
        (port,) = _INT32.unpack_from(data, pos)
        size, pos = read_uvarint(data, pos + 4)
        rack = None if size == 0 else data[pos : pos + size - 1].decode()
        pos = _skip_tags(data, pos + max(size - 1, 0))
        endpoints.append((node_id, host, port, rack))
    return endpoints


def encode_endpoints(endpoints: list[Endpoint]) -> bytes:
    out = bytearray()
    write_uvarint(out, len(endpoints) + 1)
    for node_id, host, port, rack in endpoints:
        out += _INT32.pack(node_id)
        encoded = host.encode()
        write_uvarint(out, len(encoded) + 1)
        out += encoded
        out += _INT32.pack(port)
        if rack is None:
            out.append(0)
        else:
            encoded = rack.encode()
            write_uvarint(out, len(encoded) + 1)
            out += encoded
        out.append(0)  # no tagged fields
    return bytes(out)


def endpoints_in(api_key: int, api_version: int, frame: bytes, origin: int = 0) -> list[Endpoint]:
    """The NodeEndpoints a response frame carries (empty when none); see origin above."""
    pos = _top_level_tags_offset(api_key, api_version, frame, origin)
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        if tag == _NODE_ENDPOINTS_TAG:
            return decode_endpoints(frame[pos : pos + size])
        pos += size
    return []


def rewrite_node_endpoints(api_key: int, api_version: int, frame: bytes, address_of: Rewrite) -> bytes:
    """The response frame with every NodeEndpoint pointing at the gateway, at its original length
    (see ``rewrite_tagged_fields``). Raises DecodeError on a malformed frame."""
    start = _top_level_tags_offset(api_key, api_version, frame)
    section = frame[start:]
    rewritten = rewrite_tagged_fields(section, address_of)
    return frame if rewritten is section else frame[:start] + rewritten


def rewrite_tagged_fields(section: bytes, address_of: Rewrite) -> bytes:
    """A response's top-level tagged-field section with its NodeEndpoints pointing at the gateway,
    exactly as long as it was (``section`` itself when it carries no endpoints).

    The length is kept so that a response can be passed on while it is still arriving, its
    length prefix first (docs/gateway.md, "Cut-through"): the bytes freed or missing are made up
    by a filler field under a tag that no version we forward defines, which every client skips
    as an unknown tagged field. An endpoint whose node has no gateway address is dropped (the
    client then refreshes its metadata, which it does anyway after NOT_LEADER_OR_FOLLOWER); when
    the gateway's addresses are longer than upstream's and do not fit, every endpoint is
    dropped. Never returns an upstream address. Raises DecodeError on a malformed section."""
    count, pos = read_uvarint(section, 0)
    fields: list[tuple[int, bytes]] = []
    for _ in range(count):
        tag, pos = read_uvarint(section, pos)
        size, pos = read_uvarint(section, pos)
        data = section[pos : pos + size]
        if len(data) != size:
            raise DecodeError("truncated tagged field")
        pos += size
        fields.append((tag, data))
    if pos != len(section):
        raise DecodeError(f"{len(section) - pos} bytes after the tagged fields")
    if all(tag != _NODE_ENDPOINTS_TAG for tag, _data in fields):
        return section
    rewritten: list[Endpoint] = []
    for tag, data in fields:
        if tag == _NODE_ENDPOINTS_TAG:
            for node_id, _host, _port, rack in decode_endpoints(data):
                address = address_of(node_id)
                if address is not None:
                    rewritten.append((node_id, address[0], address[1], rack))
    kept = [(tag, data) for tag, data in fields if tag != _NODE_ENDPOINTS_TAG]
    for endpoints in (rewritten, []):
        candidate = _fill_to(len(section), [(_NODE_ENDPOINTS_TAG, encode_endpoints(endpoints)), *kept])
        if candidate is not None:
            return candidate
    dropped = _fill_to(len(section), kept)
    if dropped is None:  # cannot happen: the endpoints field took at least three bytes
        raise DecodeError("cannot rewrite the node endpoints at the response's length")
    return dropped


def _encode_fields(fields: list[tuple[int, bytes]]) -> bytearray:
    out = bytearray()
    write_uvarint(out, len(fields))
    for tag, data in sorted(fields, key=lambda field: field[0]):
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    return out


def _uvarint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


def _fill_to(length: int, fields: list[tuple[int, bytes]]) -> bytes | None:
    """``fields`` encoded in exactly ``length`` bytes, with a filler field when shorter; None when
    they do not fit."""
    exact = _encode_fields(fields)
    if len(exact) == length:
        return bytes(exact)
    # The filler adds one to the field count, then its tag, its size and its zero bytes. Its tag
    # is any tag above the others and FILLER_TAG; picking one of another varint size, and the
    # size varint growing with the size, one combination fills every room of two bytes or more.
    room = length - (len(exact) - _uvarint_size(len(fields)) + _uvarint_size(len(fields) + 1))
    above = max([FILLER_TAG - 1, *(tag for tag, _data in fields)]) + 1
    for tag_size in range(_uvarint_size(above), 6):
        tag = max(above, 1 << (7 * (tag_size - 1)))
        for size_size in range(1, 4):
            size = room - tag_size - size_size
            if size >= 0 and _uvarint_size(size) == size_size:
                return bytes(_encode_fields([*fields, (tag, bytes(size))]))
    return None
