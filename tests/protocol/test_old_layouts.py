"""Second oracle for the versions Kafka 4.0 removed but we still serve (KAFKA_3X_VERSION_FLOOR).

Our codecs for these versions come from the 4.x specs' field annotations with validVersions
lowered; kafka-python's hand-written pre-4.0 classes (``kafka.protocol.old``) spell the 3.x
layouts out field by field. Same field names, same values, same bytes, both directions.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import wire
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.schemas import KAFKA_3X_VERSION_FLOOR, raw_spec
from tests.protocol.model import (
    INT_RANGES,
    kp_import,
    message_strategy,
    request_side,
    response_side,
    spec,
    to_ours,
)

Array = kp_import("kafka.protocol.old.types", "Array")
Schema = kp_import("kafka.protocol.old.types", "Schema")

# (api, version) -> (module, old request class, old response class)
OLD_CLASSES: dict[tuple[ApiKey, int], tuple[str, str, str]] = {
    (ApiKey.OFFSET_COMMIT, 0): ("commit", "OffsetCommitRequest_v0", "OffsetCommitResponse_v0"),
    (ApiKey.OFFSET_COMMIT, 1): ("commit", "OffsetCommitRequest_v1", "OffsetCommitResponse_v1"),
    (ApiKey.OFFSET_FETCH, 0): ("commit", "OffsetFetchRequest_v0", "OffsetFetchResponse_v0"),
    (ApiKey.CREATE_TOPICS, 0): ("admin", "CreateTopicsRequest_v0", "CreateTopicsResponse_v0"),
    (ApiKey.CREATE_TOPICS, 1): ("admin", "CreateTopicsRequest_v1", "CreateTopicsResponse_v1"),
    (ApiKey.DELETE_TOPICS, 0): ("admin", "DeleteTopicsRequest_v0", "DeleteTopicsResponse_v0"),
    (ApiKey.LIST_OFFSETS, 0): ("list_offsets", "ListOffsetsRequest_v0", "ListOffsetsResponse_v0"),
    **{(ApiKey.PRODUCE, v): ("produce", f"ProduceRequest_v{v}", f"ProduceResponse_v{v}") for v in range(3)},
    **{(ApiKey.FETCH, v): ("fetch", f"FetchRequest_v{v}", f"FetchResponse_v{v}") for v in range(4)},
}
CASES = sorted(OLD_CLASSES)


def test_cases_are_exactly_the_dropped_versions() -> None:
    """Every served version below the 4.x specs' own floor has an old-class oracle here."""
    dropped = set()
    for name in KAFKA_3X_VERSION_FLOOR:
        spec_floor = int(raw_spec(name)["validVersions"].split("-")[0])
        api_key = spec(name).api_key
        assert api_key is not None
        key = ApiKey(api_key)
        low, _ = SERVED_VERSIONS[key]
        dropped |= {(key, v) for v in range(low, spec_floor)}
    assert dropped == set(CASES)


def old_values(schema: Any, obj: Any) -> tuple[Any, ...]:
    """Our object as the positional values of an old Schema, looked up by the old field names."""
    return tuple(
        _old_value(t, getattr(obj, name)) for name, t in zip(schema.names, schema.fields, strict=True)
    )


def _old_value(t: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(t, Array):
        if isinstance(t.array_of, Schema):
            return [old_values(t.array_of, e) for e in value]
        return list(value)
    if isinstance(t, Schema):
        return old_values(t, value)
    return value


def old_view(schema: Any, obj: Any) -> dict[str, Any]:
    """Our object in the shape of the old classes' ``to_object()``."""
    out = {}
    for name, t in zip(schema.names, schema.fields, strict=True):
        value = getattr(obj, name)
        if isinstance(t, Array) and isinstance(t.array_of, Schema) and value is not None:
            value = [old_view(t.array_of, e) for e in value]
        elif isinstance(t, Schema):
            value = old_view(t, value)
        out[name] = value
    return out


@pytest.mark.parametrize("pair", CASES, ids=[f"{k.name}-v{v}" for k, v in CASES])
@given(data=st.data())
def test_old_layouts(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = pair
    module, request_name, response_name = OLD_CLASSES[pair]
    old_request = kp_import(f"kafka.protocol.old.{module}", request_name)
    old_response = kp_import(f"kafka.protocol.old.{module}", response_name)
    assert (key, version) == (old_request.API_KEY, old_request.API_VERSION)
    assert (key, version) == (old_response.API_KEY, old_response.API_VERSION)
    correlation_id = data.draw(st.integers(*INT_RANGES["int32"]), label="correlation_id")
    client_id = data.draw(st.none() | st.text(max_size=8), label="client_id")

    side = request_side(key)
    request = to_ours(side, data.draw(message_strategy(side.msg.name, version), label="request"), version)
    frame = wire.encode_request(key, version, correlation_id, client_id, request)[4:]
    theirs = old_request(*old_values(old_request.SCHEMA, request))
    theirs.with_header(correlation_id=correlation_id, client_id=client_id)
    assert bytes(theirs.encode(header=True)) == frame
    assert old_request.decode(frame, header=True).to_object() == old_view(old_request.SCHEMA, request)
    assert wire.decode_request(frame).body == request

    side = response_side(key)
    response = to_ours(side, data.draw(message_strategy(side.msg.name, version), label="response"), version)
    frame = wire.encode_response(key, version, correlation_id, response)[4:]
    decoded = old_response.decode(frame, header=True)
    assert decoded.header.correlation_id == correlation_id
    assert decoded.to_object() == old_view(old_response.SCHEMA, response)
    theirs = old_response(*old_values(old_response.SCHEMA, response))
    theirs.with_header(correlation_id=correlation_id)
    assert bytes(theirs.encode(header=True)) == frame
