"""Which shard a group belongs to: Kafka's ``GroupCoordinatorService.partitionFor``.

``Utils.abs(groupId.hashCode()) % numPartitions`` where ``Utils.abs`` is ``x & 0x7fffffff`` (not
``Math.abs``, which stays negative for ``Integer.MIN_VALUE``) and ``hashCode`` is Java's
``String.hashCode``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in 32-bit
arithmetic. Using the same function lets operators' Kafka tools agree on a group's partition.
"""

from __future__ import annotations

import array
import sys
from typing import Final

_MASK: Final = 0xFFFFFFFF
_UTF16_NATIVE: Final = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"  # array("H") order


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (a signed 32-bit int)."""
    # Python ints do not overflow: reducing once at the end equals Java's wrap at every step.
    # ASCII (nearly every group id) is one UTF-16 code unit per byte, read straight from bytes.
    h = 0
    if text.isascii():
        for unit in text.encode("ascii"):
            h = 31 * h + unit
    else:
        for unit in array.array("H", text.encode(_UTF16_NATIVE, "surrogatepass")):
            h = 31 * h + unit
    h &= _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def shard_of(group_id: str, shards: int) -> int:
    """The shard (``__consumer_offsets`` partition) of a group."""
    return (java_string_hashcode(group_id) & 0x7FFFFFFF) % shards
