"""ConsumerProtocolSubscription / ConsumerProtocolAssignment v0-3 against kafka-python's classes.

These are "data" messages: no request/response header. On the wire (inside JoinGroup protocol
metadata and SyncGroup assignments) they are preceded by an int16 version, which kafka-python
writes with ``encode(header=True)`` and which the coordinator, not these codecs, handles.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.messages import consumer_protocol
from tests.protocol.model import canon_kp, canon_ours, message_strategy, side, to_kp, to_ours

CASES = [
    (name, v) for name in ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment") for v in range(4)
]


def codecs(
    name: str, version: int
) -> tuple[Callable[[bytes, int], tuple[Any, int]], Callable[[Any, bytearray], None]]:
    stem = "consumer_protocol_" + name.removeprefix("ConsumerProtocol").lower()
    return getattr(consumer_protocol, f"decode_{stem}_v{version}"), getattr(
        consumer_protocol, f"encode_{stem}_v{version}"
    )


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@given(data=st.data())
def test_consumer_protocol_matches_kafka_python(name: str, version: int, data: st.DataObject) -> None:
    s = side(name, "consumer_protocol")
    decode, encode = codecs(name, version)
    value = data.draw(message_strategy(name, version), label=name)
    ours = to_ours(s, value, version)
    theirs = to_kp(s, value, version)
    expected = canon_ours(ours, s.msg.fields, version)
    assert canon_kp(s, theirs, version) == expected

    out = bytearray()
    encode(ours, out)
    assert bytes(out) == bytes(theirs.encode(version=version, header=False))
    assert decode(bytes(out), 0) == (ours, len(out))
    assert canon_kp(s, s.kp.decode(bytes(out), version=version, header=False), version) == expected

    # With kafka-python's version prefix, as clients put it into JoinGroup/SyncGroup payloads.
    prefixed = bytes(theirs.encode(version=version, header=True))
    assert prefixed == struct.pack(">h", version) + bytes(out)
    assert canon_kp(s, s.kp.decode(prefixed), version) == expected
