"""ShareFetch and ShareAcknowledge on the wire against the standalone server (no records: every
partition is an empty log): share sessions, Kafka's error codes for bad input, and one member's
bad request leaving another member's session alone (docs/share-groups.md, "Share sessions")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import share_acknowledge as sak
from protocol.messages import share_fetch as sf
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

FETCH, ACK = ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[ServerProcess]:
    """A standalone server keeping at most two share sessions."""
    with running_server(f"sqlite:///{tmp_path / 'c.db'}", {"group-share-max-share-sessions": "2"}) as proc:
        yield proc


def join(client: WireClient, member: str, topic: str) -> bytes:
    """The member joins share group g; the topic's id."""
    response = client.request(
        ApiKey.SHARE_GROUP_HEARTBEAT,
        1,
        ShareGroupHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=0, subscribed_topic_names=[topic]
        ),
    )
    assert response.error_code == 0, response
    # A member joining within the group's assignment interval (1 s) of the last target gets its
    # partitions with a later heartbeat (docs/share-groups.md, "Membership").
    deadline = time.monotonic() + 10
    while response.assignment is None or not response.assignment.topic_partitions:
        assert time.monotonic() < deadline, response
        time.sleep(0.1)
        response = client.request(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=response.member_epoch),
        )
        assert response.error_code == 0, response
    [assigned] = response.assignment.topic_partitions
    topic_id: bytes = assigned.topic_id
    return topic_id


def fetch(
    client: WireClient,
    member: str,
    epoch: int,
    topic_id: bytes | None,
    acks: list[sf.AcknowledgementBatch] | None = None,
    version: int = 2,
) -> sf.ShareFetchResponse:
    topics = []
    if topic_id is not None:
        partition = sf.FetchPartition(partition_index=0, acknowledgement_batches=acks or [])
        topics = [sf.FetchTopic(topic_id=topic_id, partitions=[partition])]
    request = sf.ShareFetchRequest(
        group_id="g", member_id=member, share_session_epoch=epoch, max_wait_ms=50, min_bytes=1,
        max_records=100, batch_size=100, topics=topics,
    )  # fmt: skip
    response: sf.ShareFetchResponse = client.request(FETCH, version, request)
    return response


def acknowledge(
    client: WireClient, member: str, epoch: int, topic_id: bytes, offset: int
) -> sak.ShareAcknowledgeResponse:
    batch = sak.AcknowledgementBatch(first_offset=offset, last_offset=offset, acknowledge_types=[1])
    partition = sak.AcknowledgePartition(partition_index=0, acknowledgement_batches=[batch])
    request = sak.ShareAcknowledgeRequest(
        group_id="g", member_id=member, share_session_epoch=epoch,
        topics=[sak.AcknowledgeTopic(topic_id=topic_id, partitions=[partition])],
    )  # fmt: skip
    response: sak.ShareAcknowledgeResponse = client.request(ACK, 2, request)
    return response


def partition(response: sf.ShareFetchResponse) -> sf.PartitionData:
    [topic] = response.responses
    [data] = topic.partitions
    return data


def create(client: WireClient, topic: str) -> None:
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=topic, num_partitions=1, replication_factor=1)], timeout_ms=5000
    )
    assert client.request(ApiKey.CREATE_TOPICS, 7, request).topics[0].error_code == 0


def test_share_sessions_and_bad_input_get_kafkas_error_codes(server: ServerProcess) -> None:
    server.wait_loaded()
    with WireClient(server.bootstrap) as a, WireClient(server.bootstrap) as b:
        versions = {
            k.api_key: (k.min_version, k.max_version)
            for k in a.request(ApiKey.API_VERSIONS, 2, ApiVersionsRequest()).api_keys
        }
        assert versions[FETCH] == (1, 2) and versions[ACK] == (1, 2)
        create(a, "t")
        topic_id = join(a, "m-a", "t")
        join(b, "m-b", "t")

        # No session yet: SHARE_SESSION_NOT_FOUND; acknowledgements on the opening request: INVALID_REQUEST.
        assert fetch(a, "m-a", 3, topic_id).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        opening_with_acks = fetch(a, "m-a", 0, topic_id, [sf.AcknowledgementBatch(0, 0, [1])])
        assert opening_with_acks.error_code == ErrorCode.INVALID_REQUEST
        assert fetch(a, "m-a", 0, None, version=1).error_code == 0  # v1 works too

        # Sessions open for both members; an empty log answers the partition with nothing.
        opened = fetch(a, "m-a", 0, topic_id)
        assert opened.error_code == 0 and opened.acquisition_lock_timeout_ms == 30000
        assert partition(opened).error_code == 0 and partition(opened).acquired_records == []
        assert fetch(b, "m-b", 0, topic_id).error_code == 0

        # A's stale or future epoch is refused; its session, and B's, go on.
        assert fetch(a, "m-a", 2, None).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert fetch(a, "m-a", 1, None).error_code == 0
        assert fetch(b, "m-b", 1, None).error_code == 0

        # Acknowledging offsets never acquired: INVALID_RECORD_STATE on that partition only.
        bad_ack = fetch(a, "m-a", 2, topic_id, [sf.AcknowledgementBatch(0, 0, [1])])
        assert bad_ack.error_code == 0
        assert partition(bad_ack).acknowledge_error_code == ErrorCode.INVALID_RECORD_STATE
        assert (
            acknowledge(a, "m-a", 3, topic_id, 0).responses[0].partitions[0].error_code
            == ErrorCode.INVALID_RECORD_STATE
        )
        assert acknowledge(a, "m-a", 0, topic_id, 0).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        assert acknowledge(a, "m-a", 9, topic_id, 0).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH

        # An unknown topic id, and a member the group does not know.
        unknown_topic = fetch(a, "m-a", 4, b"\x01" * 16)
        assert [
            p.error_code for t in unknown_topic.responses for p in t.partitions if t.topic_id == b"\x01" * 16
        ] == [ErrorCode.UNKNOWN_TOPIC_ID]
        ghost = fetch(b, "ghost", 0, topic_id)
        assert ghost.error_code == 0 and partition(ghost).error_code == ErrorCode.UNKNOWN_MEMBER_ID

        # A renewing fetch (v2 IsRenewAck) only acknowledges: asking for records too is refused
        # with Kafka's message, before the session moves; otherwise it answers without records.
        renewing = sf.ShareFetchRequest(
            group_id="g", member_id="m-b", share_session_epoch=2, max_wait_ms=50, max_bytes=0, max_records=100,
            is_renew_ack=True,
        )  # fmt: skip
        refused = b.request(FETCH, 2, renewing)
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "maxRecords must be set to 0, maxWaitMs must be set to 0, if isRenewAck is true.",
        )
        renewing.max_wait_ms = renewing.max_records = 0
        renewed = b.request(FETCH, 2, renewing)
        assert renewed.error_code == 0 and all(not p.records for t in renewed.responses for p in t.partitions)

        # B was never disturbed.
        assert fetch(b, "m-b", 3, None).error_code == 0

        # Closing: partitions on the final request are INVALID_REQUEST; then it closes once.
        assert fetch(a, "m-a", -1, topic_id).error_code == ErrorCode.INVALID_REQUEST
        assert fetch(a, "m-a", -1, None).error_code == 0
        assert fetch(a, "m-a", -1, None).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        missing = sf.ShareFetchRequest(group_id="", member_id="m-a", share_session_epoch=0)
        assert a.request(FETCH, 2, missing).error_code == ErrorCode.INVALID_REQUEST


def test_share_sessions_are_bounded(limited: ServerProcess) -> None:
    limited.wait_loaded()
    with WireClient(limited.bootstrap) as client:
        create(client, "t")
        topic_id = join(client, "m-1", "t")
        assert fetch(client, "m-1", 0, topic_id).error_code == 0
        assert fetch(client, "m-2", 0, None).error_code == 0
        assert fetch(client, "m-3", 0, None).error_code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
        assert fetch(client, "m-1", 0, topic_id).error_code == 0  # reopening one's own session is no new one
        assert fetch(client, "m-2", -1, None).error_code == 0
        assert fetch(client, "m-3", 0, None).error_code == 0
