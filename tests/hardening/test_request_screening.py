"""Request screening (coordinator/api/validation.py): item caps, identifiers, retention, partitions."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.api import validation
from coordinator.api.validation import MAX_RETENTION_MS, count_items, screen_request
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import CODECS
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)

LIMITS = Config().request_limits()  # the settings table's defaults


def _join(**fields: object) -> JoinGroupRequest:
    request = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10000,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", b"x")],
    )
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def test_count_items_walks_nested_arrays_and_stops_early() -> None:
    commit = OffsetCommitRequest(
        group_id="g",
        topics=[
            OffsetCommitRequestTopic(
                name=f"t{i}", partitions=[OffsetCommitRequestPartition(p) for p in range(3)]
            )
            for i in range(4)
        ],
    )
    assert count_items(commit, 1000) == 4 + 12
    assert count_items(DescribeGroupsRequest(groups=["g"] * 50), 10) == 50


def test_too_many_array_elements_closes_the_connection() -> None:
    huge = DescribeGroupsRequest(groups=["g"] * (LIMITS.request_max_items + 1))
    screening = screen_request(LIMITS, ApiKey.DESCRIBE_GROUPS, 5, "c", huge)
    assert screening is not None and screening.close is not None
    assert (
        screen_request(LIMITS, ApiKey.DESCRIBE_GROUPS, 5, "c", DescribeGroupsRequest(groups=["g"] * 100))
        is None
    )


@pytest.mark.parametrize(
    ("fields", "client_id", "code"),
    [
        ({"group_instance_id": "i" * 32767}, "c", ErrorCode.INVALID_REQUEST),
        ({"group_id": "g" * 2000}, "c", ErrorCode.INVALID_GROUP_ID),
        ({"group_id": "g\x00"}, "c", ErrorCode.INVALID_GROUP_ID),
        ({"member_id": "m" * 5000}, "c", ErrorCode.UNKNOWN_MEMBER_ID),
        ({}, "c" * 2000, ErrorCode.INVALID_REQUEST),
        ({}, "c\x00", ErrorCode.INVALID_REQUEST),
        (
            {"protocols": [JoinGroupRequestProtocol("range", b"x" * (2 << 20))]},
            "c",
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_join_group_refuses_what_cannot_be_stored_or_answered(
    fields: dict[str, object], client_id: str, code: int
) -> None:
    screening = screen_request(LIMITS, ApiKey.JOIN_GROUP, 7, client_id, _join(**fields))
    assert screening is not None and screening.answer is not None
    assert screening.answer.error_code == code
    assert screening.answer.member_id == ""  # never echo what could not be encoded


def test_join_group_within_limits_passes() -> None:
    assert screen_request(LIMITS, ApiKey.JOIN_GROUP, 7, "c", _join(group_instance_id="i" * 1024)) is None


def test_consumer_group_heartbeat_identifiers() -> None:
    bad = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", instance_id="i" * 5000)
    screening = screen_request(LIMITS, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, "c", bad)
    assert screening is not None and screening.answer.error_code == ErrorCode.INVALID_REQUEST
    assert "instance id" in screening.answer.error_message
    nul = ConsumerGroupHeartbeatRequest(group_id="g\x00", member_id="m")
    screening = screen_request(LIMITS, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, "c", nul)
    assert screening is not None and screening.answer.error_code == ErrorCode.INVALID_GROUP_ID
    good = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", rack_id="r")
    assert screen_request(LIMITS, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, "c", good) is None


def test_offset_commit_retention_is_clamped_and_bad_group_ids_refused() -> None:
    commit = OffsetCommitRequest(
        group_id="g",
        retention_time_ms=2**63 - 1,
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(0, 5)])],
    )
    assert screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 2, "c", commit) is None
    assert commit.retention_time_ms == MAX_RETENTION_MS
    assert MAX_RETENTION_MS + 2**45 < 2**63 - 1  # any wall clock of this era plus it fits int64
    commit.retention_time_ms = -(2**63)
    screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 2, "c", commit)
    assert commit.retention_time_ms == -MAX_RETENTION_MS
    commit.group_id = "bad\x00group"
    screening = screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 2, "c", commit)
    assert screening is not None
    assert screening.answer.topics[0].partitions[0].error_code == ErrorCode.INVALID_GROUP_ID


def test_create_topics_partition_bounds_per_topic_and_per_request() -> None:
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(name="huge", num_partitions=2**31 - 1, replication_factor=1),
            CreatableTopic(name="ok", num_partitions=6000, replication_factor=1),
            CreatableTopic(name="over-total", num_partitions=6000, replication_factor=1),
            CreatableTopic(name="default", num_partitions=-1, replication_factor=-1),
        ]
    )
    screening = screen_request(LIMITS, ApiKey.CREATE_TOPICS, 5, "c", request)
    assert screening is not None and screening.extra is not None
    attribute, refused = screening.extra
    assert attribute == "topics"
    assert {r.name: r.error_code for r in refused} == {
        "huge": ErrorCode.INVALID_PARTITIONS,
        "over-total": ErrorCode.INVALID_PARTITIONS,
    }
    assert [t.name for t in request.topics] == ["ok", "default"]
    alone = CreateTopicsRequest(topics=[CreatableTopic(name="huge", num_partitions=2_000_000)])
    screening = screen_request(LIMITS, ApiKey.CREATE_TOPICS, 5, "c", alone)
    assert screening is not None and screening.answer.topics[0].error_code == ErrorCode.INVALID_PARTITIONS


def test_create_partitions_bound() -> None:
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic(name="t", count=2**31 - 1, assignments=None)]
    )
    screening = screen_request(LIMITS, ApiKey.CREATE_PARTITIONS, 3, "c", request)
    assert screening is not None
    assert screening.answer.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert "per topic" in screening.answer.results[0].error_message


def test_frame_limit_per_api() -> None:
    assert LIMITS.frame_limit(ApiKey.DESCRIBE_GROUPS, 100 << 20) == LIMITS.control_request_max_bytes
    assert LIMITS.frame_limit(ApiKey.SYNC_GROUP, 100 << 20) == 100 << 20


def test_too_many_groups_in_one_describe_closes_the_connection() -> None:
    many = DescribeGroupsRequest(groups=["g"] * (LIMITS.request_max_groups + 1))
    screening = screen_request(LIMITS, ApiKey.DESCRIBE_GROUPS, 5, "c", many)
    assert (
        screening is not None
        and screening.close == f"request names more than {LIMITS.request_max_groups} groups"
    )
    fine = DescribeGroupsRequest(groups=["g"] * LIMITS.request_max_groups)
    assert screen_request(LIMITS, ApiKey.DESCRIBE_GROUPS, 5, "c", fine) is None


def _smallest_commit_and_fetch(version: int, elements: int) -> list[tuple[ApiKey, Any]]:
    """An OffsetCommit and an OffsetFetch whose elements are as small as the wire allows."""
    partitions = [OffsetCommitRequestPartition(0, 0, committed_metadata=None) for _ in range(elements)]
    commit = OffsetCommitRequest(topics=[OffsetCommitRequestTopic(name="", partitions=partitions)])
    indexes = [0] * elements
    if version < 8:
        fetch = OffsetFetchRequest(topics=[OffsetFetchRequestTopic(name="", partition_indexes=indexes)])
    else:
        group = OffsetFetchRequestGroup(
            group_id="", topics=[OffsetFetchRequestTopics(partition_indexes=indexes)]
        )
        fetch = OffsetFetchRequest(groups=[group] * elements)
    return [(ApiKey.OFFSET_COMMIT, commit), (ApiKey.OFFSET_FETCH, fetch)]


@pytest.mark.parametrize("version", range(11))
def test_every_commit_and_fetch_element_takes_a_byte(version: int) -> None:
    """The premise of skipping the count for requests of fewer bytes than request.max.items."""
    for key, body in _smallest_commit_and_fetch(version, 50):
        if (key, version) not in CODECS:
            continue
        out = bytearray()
        CODECS[(key, version)][1](body, out)
        decoded, _ = CODECS[(key, version)][0](bytes(out), 0)
        assert count_items(decoded, 10**9) <= len(out)


def test_a_commit_smaller_than_the_limit_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def counted(body: Any, limit: int) -> int:
        raise AssertionError("counted")

    commit = OffsetCommitRequest(
        group_id="g",
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(0, 5)])],
    )
    monkeypatch.setattr(validation, "count_items", counted)
    assert screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 8, "c", commit, frame_bytes=80) is None
    with pytest.raises(AssertionError, match="counted"):
        screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 8, "c", commit, frame_bytes=LIMITS.request_max_items + 1)
    with pytest.raises(AssertionError, match="counted"):
        screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 8, "c", commit)
    join = _join()
    with pytest.raises(AssertionError, match="counted"):
        screen_request(LIMITS, ApiKey.JOIN_GROUP, 7, "c", join, frame_bytes=80)


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("group_id", "g" * (LIMITS.group_id_max_chars + 1), ErrorCode.INVALID_GROUP_ID),
        ("member_id", "m" * (LIMITS.member_id_max_chars + 1), ErrorCode.UNKNOWN_MEMBER_ID),
        ("member_id", "m\x00", ErrorCode.UNKNOWN_MEMBER_ID),
        ("group_instance_id", "i" * (LIMITS.group_id_max_chars + 1), ErrorCode.UNKNOWN_MEMBER_ID),
        ("group_instance_id", "i\x00", ErrorCode.UNKNOWN_MEMBER_ID),
    ],
)
def test_offset_commit_identifiers_are_checked(field: str, value: str, code: int) -> None:
    commit = OffsetCommitRequest(
        group_id="g",
        member_id="m",
        topics=[OffsetCommitRequestTopic(name="t", partitions=[OffsetCommitRequestPartition(3, 5)])],
    )
    assert screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 8, "c", commit) is None
    setattr(commit, field, value)
    screening = screen_request(LIMITS, ApiKey.OFFSET_COMMIT, 8, "c", commit)
    assert screening is not None
    assert [(p.partition_index, p.error_code) for p in screening.answer.topics[0].partitions] == [(3, code)]
