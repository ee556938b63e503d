"""KIP-951 NodeEndpoints rewriting, with kafka-python's spec-built classes as the oracle."""

from __future__ import annotations

import uuid
import warnings

import pytest

from coordinator.gateway.node_endpoints import _fill_to, endpoints_in, rewrite_node_endpoints
from protocol.apis import ApiKey
from protocol.primitives import DecodeError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.fetch import FetchResponse
    from kafka.protocol.producer.produce import ProduceResponse

GATEWAY = {1: ("gw.local", 40001), 2: ("gw.local", 40002)}


def _produce(version: int, endpoints: list[tuple[int, str, int, str | None]]) -> bytes:
    topic = {"topic_id": uuid.UUID(int=7)} if version >= 13 else {"name": "orders"}
    partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=3, error_code=6, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
        record_errors=[
            ProduceResponse.TopicProduceResponse.PartitionProduceResponse.BatchIndexAndErrorMessage(
                batch_index=0, batch_index_error_message="moved"
            )
        ],
        error_message="not the leader",
    )  # fmt: skip
    response = ProduceResponse[version](
        responses=[ProduceResponse.TopicProduceResponse(**topic, partition_responses=[partition])],
        throttle_time_ms=5,
        node_endpoints=[
            ProduceResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints
        ],
    )
    response.with_header(correlation_id=42)
    return bytes(response.encode(header=True))


def _fetch(version: int, endpoints: list[tuple[int, str, int, str | None]]) -> bytes:
    data = FetchResponse.FetchableTopicResponse.PartitionData
    partition = data(
        partition_index=1, error_code=0, high_watermark=10, last_stable_offset=10, log_start_offset=0,
        aborted_transactions=[data.AbortedTransaction(producer_id=7, first_offset=3)],
        preferred_read_replica=-1, records=b"\x00" * 61 + b"192.168.1.9:9092",
    )  # fmt: skip
    response = FetchResponse[version](
        throttle_time_ms=0,
        error_code=0,
        session_id=9,
        responses=[
            FetchResponse.FetchableTopicResponse(topic_id=uuid.UUID(int=9), partitions=[partition, partition])
        ],
        node_endpoints=[
            FetchResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints
        ],
    )
    response.with_header(correlation_id=42)
    return bytes(response.encode(header=True))


UPSTREAM = [(1, "broker-1.upstream", 19092, "rack-a"), (2, "broker-2.upstream", 19093, None)]


@pytest.mark.parametrize(
    ("key", "version", "build", "decoder"),
    [
        *[(ApiKey.PRODUCE, v, _produce, ProduceResponse) for v in (10, 11, 12, 13)],
        *[(ApiKey.FETCH, v, _fetch, FetchResponse) for v in (16, 17, 18)],
    ],
)
def test_node_endpoints_point_at_the_gateway(key: ApiKey, version: int, build, decoder) -> None:  # type: ignore[no-untyped-def]
    frame = build(version, UPSTREAM)
    assert [e[:3] for e in endpoints_in(key, version, frame)] == [e[:3] for e in UPSTREAM]
    rewritten = rewrite_node_endpoints(key, version, frame, GATEWAY.get)
    assert b"upstream" not in rewritten and b"19092" not in rewritten
    original = decoder[version].decode(frame, header=True)
    theirs = decoder[version].decode(rewritten, header=True)
    assert [(e.node_id, e.host, e.port, e.rack) for e in theirs.node_endpoints] == [
        (1, "gw.local", 40001, "rack-a"),
        (2, "gw.local", 40002, None),
    ]
    # Everything else, records included, is byte-for-byte what upstream sent.
    original.node_endpoints = theirs.node_endpoints
    assert original.to_dict() == theirs.to_dict()


def test_a_response_without_endpoints_is_passed_through_untouched() -> None:
    frame = _fetch(16, [])
    assert rewrite_node_endpoints(ApiKey.FETCH, 16, frame, GATEWAY.get) is frame


def test_a_node_without_a_virtual_broker_is_dropped_rather_than_leaked() -> None:
    frame = _produce(11, [(3, "broker-3.upstream", 19094, None), *UPSTREAM])
    rewritten = rewrite_node_endpoints(ApiKey.PRODUCE, 11, frame, GATEWAY.get)
    assert [e[0] for e in endpoints_in(ApiKey.PRODUCE, 11, rewritten)] == [1, 2]
    assert b"upstream" not in rewritten


def test_a_truncated_response_is_a_decode_error() -> None:
    frame = _produce(11, UPSTREAM)
    with pytest.raises((DecodeError, IndexError)):
        rewrite_node_endpoints(ApiKey.PRODUCE, 11, frame[:20], GATEWAY.get)


@pytest.mark.parametrize("host", ["g", "gw.local", "gateway.example.internal", "h" * 17, "h" * 18, "h" * 19])
@pytest.mark.parametrize("key", [ApiKey.FETCH, ApiKey.PRODUCE])
def test_the_rewritten_response_keeps_its_length_so_it_can_be_streamed(host: str, key: ApiKey) -> None:
    """Shorter gateway addresses leave room for a filler field, longer ones that do not fit are
    dropped: either way the length prefix sent before the tail arrived stays true."""
    version = 16 if key == ApiKey.FETCH else 11
    build, decoder = (_fetch, FetchResponse) if key == ApiKey.FETCH else (_produce, ProduceResponse)
    frame = build(version, UPSTREAM)
    gateway = {1: (host, 40001), 2: (host, 40002)}
    rewritten = rewrite_node_endpoints(key, version, frame, gateway.get)
    assert len(rewritten) == len(frame)
    assert b"upstream" not in rewritten and b"19092" not in rewritten
    theirs = decoder[version].decode(rewritten, header=True)  # the filler is skipped as unknown
    found = [(e.node_id, e.host, e.port) for e in theirs.node_endpoints]
    assert found in ([(1, host, 40001), (2, host, 40002)], [])
    assert found or len(host) > len("broker-1.upstream")
    assert [e[:3] for e in endpoints_in(key, version, rewritten)] == found


@pytest.mark.parametrize("room", range(0, 300))
def test_every_room_of_two_bytes_or_more_is_filled_exactly(room: int) -> None:
    fields = [(0, b"\x01")]
    base = len(_fill_to(4, fields) or b"")  # count, tag, size, one byte
    filled = _fill_to(base + room, fields)
    if room == 0 or room >= 2:
        assert filled is not None and len(filled) == base + room
        assert filled.startswith(b"\x02\x00\x01\x01") or filled == b"\x01\x00\x01\x01"
    else:
        assert filled is None
