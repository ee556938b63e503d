"""Bytes a scripted classic consumer puts in its requests: ConsumerProtocol subscriptions and
assignments (version 0), as Kafka's ConsumerProtocol encodes them."""

from __future__ import annotations

import struct


def _string(value: str) -> bytes:
    encoded = value.encode()
    return struct.pack(">h", len(encoded)) + encoded


def subscription(*topics: str) -> bytes:
    return struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics) + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    body = (
        _string(topic)
        + struct.pack(">i", len(partitions))
        + b"".join(struct.pack(">i", p) for p in partitions)
    )
    return struct.pack(">hi", 0, 1) + body + struct.pack(">i", -1)
