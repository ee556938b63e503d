"""Which shard a group belongs to: Kafka's ``GroupCoordinatorService.partitionFor``.

``Utils.abs(groupId.hashCode()) % numPartitions`` where ``Utils.abs`` is ``x & 0x7fffffff`` (not
``Math.abs``, which stays negative for ``Integer.MIN_VALUE``) and ``hashCode`` is Java's
``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in 32-bit
arithmetic. Using the same function lets operators' Kafka tools agree on a group's partition.
"""

from __future__ import annotations

from typing import Final

_MASK: Final = 0xFFFFFFFF


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (a signed 32-bit int)."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def shard_of(group_id: str, shards: int) -> int:
    """The shard (``__consumer_offsets`` partition) of a group."""
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % shards
