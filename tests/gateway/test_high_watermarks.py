"""The high watermarks read from forwarded Fetch responses (every version, any chunking), and the
log end they make of a ListOffsets(latest) answer that lies behind them."""

from __future__ import annotations

import logging

import pytest

from coordinator.gateway.high_watermarks import FetchWatch, HighWatermarks, TopicKey
from protocol.apis import ApiKey
from protocol.messages.fetch import AbortedTransaction, FetchableTopicResponse, FetchResponse, PartitionData
from protocol.wire import encode_response

TOPIC_ID = bytes(range(16))


def _response(version: int) -> bytes:
    def partition(index: int, high_watermark: int, error: int = 0) -> PartitionData:
        return PartitionData(
            partition_index=index,
            error_code=error,
            high_watermark=high_watermark,
            aborted_transactions=[AbortedTransaction(7, 3)],
            records=b"\x00" * (37 + index),
        )

    topics = [
        FetchableTopicResponse(
            "orders", TOPIC_ID, [partition(0, 100), partition(1, 5, error=6), partition(2, 42)]
        ),
        FetchableTopicResponse("audit", bytes(16), [partition(0, 9)]),
    ]
    # v14-v18 answer as v13 does up to the last partition (v16+ add top-level tagged fields after
    # it, which the watch never reads): our codecs stop at v13.
    return encode_response(ApiKey.FETCH, min(version, 13), 11, FetchResponse(responses=topics))


@pytest.mark.parametrize("version", range(19))
@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_every_fetch_version_yields_its_partitions_high_watermarks(version: int, chunk: int) -> None:
    seen: list[tuple[TopicKey, int, int]] = []
    watch = FetchWatch(version, lambda topic, partition, hw: seen.append((topic, partition, hw)))
    frame = _response(version)
    for start in range(0, len(frame), chunk):
        watch.feed(memoryview(frame)[start : start + chunk])
    orders: TopicKey = TOPIC_ID if version >= 13 else "orders"
    audit: TopicKey = bytes(16) if version >= 13 else "audit"
    # The partition answered with an error (NOT_LEADER) tells nothing.
    assert seen == [(orders, 0, 100), (orders, 2, 42), (audit, 0, 9)]


def test_a_response_it_cannot_follow_is_left_alone() -> None:
    seen: list[tuple[TopicKey, int, int]] = []
    watch = FetchWatch(12, lambda *args: seen.append(args))
    watch.feed(b"\x00\x00\x00\x20\x00\x00\x00\x01\x00" + b"\xff" * 40)  # a varint of 6 bytes
    watch.feed(b"more")  # ignored, never raises
    assert seen == []


def test_the_log_end_is_the_fetched_high_watermark_where_list_offsets_answers_less(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watermarks = HighWatermarks(max_partitions=2)
    assert watermarks.log_end(("t", 0), 1) == 1  # nothing fetched: as listed
    watermarks.observe(("t", 0), 100)
    with caplog.at_level(logging.WARNING):
        # Tansu 0.6: one batch of 100 records, ListOffsets(latest) answers its base offset + 1.
        assert watermarks.log_end(("t", 0), 1) == 100
        assert watermarks.log_end(("t", 0), 1) == 100
    assert watermarks.log_end(("t", 0), 150) == 150  # a log that grew since the last fetch
    [warning] = [r.getMessage() for r in caplog.records]
    assert "upstream answers ListOffsets(latest) behind the log end: t-0 is 1" in warning
    watermarks.observe(("t", 1), 3)
    watermarks.observe(("t", 2), 3)  # over the bound: not kept
    assert watermarks.get(("t", 2)) is None and watermarks.get(("t", 1)) == 3
