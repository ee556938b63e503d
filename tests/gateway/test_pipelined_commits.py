"""Gateway mode: pipelined OffsetCommits (served here) and forwarded requests on one connection
still answer in request order (docs/performance.md#pipelined-offsetcommits)."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.wire import decode_response, encode_request
from tests.gateway.conftest import Upstream
from tests.gateway.inprocess import recorded_gateway
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

TOPIC = "piped"


def _commit(offset: int) -> tuple[int, int, Any]:
    partitions = [OffsetCommitRequestPartition(0, offset)]
    return (
        ApiKey.OFFSET_COMMIT,
        8,
        OffsetCommitRequest(group_id="gp", topics=[OffsetCommitRequestTopic(TOPIC, partitions=partitions)]),
    )


def _metadata() -> tuple[int, int, Any]:
    return ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])


def test_forwarded_and_pipelined_answers_keep_request_order(
    monkeypatch: pytest.MonkeyPatch, upstream: Upstream
) -> None:
    settings = {"upstream_bootstrap_servers": upstream.bootstrap, "upstream_metadata_refresh_ms": 500}
    with recorded_gateway(monkeypatch, settings) as (bootstrap, _), WireClient(bootstrap) as client:
        topic = CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)
        created = client.request(
            ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(topics=[topic], timeout_ms=5000)
        )
        assert created.topics[0].error_code in (0, 36)  # created, or there already
        client.request(*_metadata())  # the gateway learns the topic
        fetch = OffsetFetchRequest(group_id="gp", topics=[OffsetFetchRequestTopic(TOPIC, [0])])
        calls = [
            _metadata(),  # forwarded
            _commit(1),  # waits for the forwarded answer; the next two join it (one batch)
            _commit(2),
            _commit(3),
            _metadata(),  # forwarded only once the commits are answered
            _commit(4),
            (ApiKey.OFFSET_FETCH, 7, fetch),
        ]
        frames = []
        for api_key, version, body in calls:
            client.correlation_id += 1
            frames.append(encode_request(api_key, version, client.correlation_id, "piped", body))
        client.send_raw(b"".join(frames))
        first = client.correlation_id - len(calls) + 1
        answers = []
        for offset, (api_key, version, _) in enumerate(calls):
            frame = client.read_frame()
            correlation_id, response = decode_response(api_key, version, frame)
            assert correlation_id == first + offset, "answers out of request order"
            answers.append(response)
    metadata, *commits, again, last, fetched = answers
    assert [t.name for t in metadata.topics] == [TOPIC] == [t.name for t in again.topics]
    assert [p.error_code for c in [*commits, last] for t in c.topics for p in t.partitions] == [0, 0, 0, 0]
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [4]
