"""Every served (API, version) against kafka-python 3.x, in both directions, plus our own round trip.

The APIs kafka-python has no classes for (model.NO_KAFKA_PYTHON: ConsumerGroupHeartbeat and
ConsumerGroupDescribe) take the round-trip and tagged-field tests here and get their oracle from
the hand-computed bytes of test_golden.py instead.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import wire
from protocol.apis import ApiKey
from protocol.messages import CODECS, FLEXIBLE
from protocol.primitives import write_uvarint
from tests.protocol.model import (
    INT_RANGES,
    NO_KAFKA_PYTHON,
    canon_kp,
    canon_ours,
    golden_pairs,
    kafka_broker_pairs,
    kafka_python_pairs,
    kp_class_or_none,
    message_strategy,
    pair_id,
    request_side,
    response_side,
    served_pairs,
    to_kp,
    to_ours,
)

PAIRS = served_pairs()
KP_PAIRS = kafka_python_pairs()
correlation_ids = st.integers(*INT_RANGES["int32"])
client_ids = st.none() | st.text(st.characters(codec="utf-8"), max_size=12)


def response_values(key: ApiKey, version: int) -> st.SearchStrategy[dict[str, Any]]:
    values = message_strategy(response_side(key).msg.name, version)
    if key == ApiKey.API_VERSIONS and version > 0:
        # kafka-python decodes any ApiVersionsResponse with a non-zero error code as v0 (it
        # assumes the KIP-511 fallback); that path is covered in test_headers.py.
        values = values.map(lambda v: {**v, "error_code": 0})
    return values


def test_every_pair_has_an_oracle() -> None:
    """Each served pair is compared with kafka-python; where it has no class, with golden bytes; where
    its classes predate the version (Kafka 4.4 additions), with a real Kafka broker (tests/kafka)."""
    assert sorted(KP_PAIRS + golden_pairs() + kafka_broker_pairs()) == sorted(PAIRS)
    for key, _ in PAIRS:
        has_classes = all(
            kp_class_or_none(s.msg.name) is not None for s in (request_side(key), response_side(key))
        )
        # A kafka-python release that ships classes for these APIs should become their oracle here.
        assert has_classes == (key not in NO_KAFKA_PYTHON), key


@pytest.mark.parametrize("pair", KP_PAIRS, ids=pair_id)
@given(data=st.data())
def test_request_from_kafka_python(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    """kafka-python encodes a request; we decode it to the same values and re-encode the same bytes."""
    key, version = pair
    side = request_side(key)
    value = data.draw(message_strategy(side.msg.name, version), label="request")
    correlation_id = data.draw(correlation_ids, label="correlation_id")
    client_id = data.draw(client_ids, label="client_id")

    theirs = to_kp(side, value, version)
    theirs.with_header(correlation_id=correlation_id, client_id=client_id)
    frame = bytes(theirs.encode(header=True))
    expected = canon_ours(to_ours(side, value, version), side.msg.fields, version)
    assert canon_kp(side, theirs, version) == expected  # the oracle holds the values we generated

    request = wire.decode_request(frame)
    assert (request.api_key, request.api_version) == (key, version)
    assert (request.correlation_id, request.client_id) == (correlation_id, client_id)
    assert isinstance(request.body, side.ours)
    assert canon_ours(request.body, side.msg.fields, version) == expected

    again = wire.encode_request(key, version, correlation_id, client_id, request.body)
    assert again[4:] == frame
    assert int.from_bytes(again[:4], "big", signed=True) == len(frame)


@pytest.mark.parametrize("pair", KP_PAIRS, ids=pair_id)
@given(data=st.data())
def test_response_to_kafka_python(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    """We encode a response; kafka-python decodes the same values and re-encodes the same bytes."""
    key, version = pair
    side = response_side(key)
    value = data.draw(response_values(key, version), label="response")
    correlation_id = data.draw(correlation_ids, label="correlation_id")
    ours = to_ours(side, value, version)

    frame = wire.encode_response(key, version, correlation_id, ours)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    theirs = side.kp[version].decode(frame[4:], header=True)
    assert theirs.header.correlation_id == correlation_id
    assert canon_kp(side, theirs, version) == canon_ours(ours, side.msg.fields, version)

    theirs.with_header(correlation_id=correlation_id)
    assert bytes(theirs.encode(header=True)) == frame[4:]


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@given(data=st.data())
def test_round_trip(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    """decode(encode(x)) == x for our requests and responses: body codecs and whole frames."""
    key, version = pair
    request_side_, response_side_ = request_side(key), response_side(key)
    request = to_ours(request_side_, data.draw(message_strategy(request_side_.msg.name, version)), version)
    response = to_ours(response_side_, data.draw(message_strategy(response_side_.msg.name, version)), version)
    decode_request, encode_request, decode_response, encode_response = CODECS[(key, version)]
    for obj, decode, encode in (
        (request, decode_request, encode_request),
        (response, decode_response, encode_response),
    ):
        out = bytearray()
        encode(obj, out)
        assert decode(bytes(out), 0) == (obj, len(out))
        # Decoding must also work at an offset inside a larger buffer.
        assert decode(b"\x07" * 3 + bytes(out) + b"\x09", 3) == (obj, 3 + len(out))

    correlation_id = data.draw(correlation_ids, label="correlation_id")
    client_id = data.draw(client_ids, label="client_id")
    decoded = wire.decode_request(wire.encode_request(key, version, correlation_id, client_id, request)[4:])
    assert (decoded.api_key, decoded.api_version) == (key, version)
    assert (decoded.correlation_id, decoded.client_id, decoded.body) == (correlation_id, client_id, request)
    frame = wire.encode_response(key, version, correlation_id, response)
    assert wire.decode_response(key, version, frame[4:]) == (correlation_id, response)


FLEXIBLE_PAIRS = [pair for pair in PAIRS if pair in FLEXIBLE]


@pytest.mark.parametrize("pair", FLEXIBLE_PAIRS, ids=pair_id)
def test_unknown_tagged_fields_are_skipped(pair: tuple[ApiKey, int]) -> None:
    """Tags this version does not know (from newer peers) are skipped, whatever their size."""
    key, version = pair
    unknown = bytearray()
    write_uvarint(unknown, 2)
    for tag, payload in ((90, b"abc"), (1000, bytes(range(200)))):
        write_uvarint(unknown, tag)
        write_uvarint(unknown, len(payload))
        unknown += payload
    request = request_side(key).ours()
    frame = wire.encode_request(key, version, 5, "c", request)[4:]
    assert frame[-1] == 0  # the (empty) top-level tag section ends the message
    assert wire.decode_request(frame[:-1] + unknown).body == request

    response = response_side(key).ours()
    frame = wire.encode_response(key, version, 5, response)[4:]
    assert frame[-1] == 0
    assert wire.decode_response(key, version, frame[:-1] + unknown) == (5, response)
