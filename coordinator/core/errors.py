"""Kafka error codes as plain ints (the core's hot paths compare ints), and the mapping of a
failed write to the error each request type answers with."""

from __future__ import annotations

from typing import Final

from protocol.errors import ErrorCode

NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = int(ErrorCode.UNKNOWN_SERVER_ERROR)
COORDINATOR_NOT_AVAILABLE: Final = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
NOT_COORDINATOR: Final = int(ErrorCode.NOT_COORDINATOR)
ILLEGAL_GENERATION: Final = int(ErrorCode.ILLEGAL_GENERATION)
INCONSISTENT_GROUP_PROTOCOL: Final = int(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
INVALID_GROUP_ID: Final = int(ErrorCode.INVALID_GROUP_ID)
UNKNOWN_MEMBER_ID: Final = int(ErrorCode.UNKNOWN_MEMBER_ID)
INVALID_SESSION_TIMEOUT: Final = int(ErrorCode.INVALID_SESSION_TIMEOUT)
REBALANCE_IN_PROGRESS: Final = int(ErrorCode.REBALANCE_IN_PROGRESS)
MEMBER_ID_REQUIRED: Final = int(ErrorCode.MEMBER_ID_REQUIRED)
GROUP_MAX_SIZE_REACHED: Final = int(ErrorCode.GROUP_MAX_SIZE_REACHED)
FENCED_INSTANCE_ID: Final = int(ErrorCode.FENCED_INSTANCE_ID)
GROUP_ID_NOT_FOUND: Final = int(ErrorCode.GROUP_ID_NOT_FOUND)
NON_EMPTY_GROUP: Final = int(ErrorCode.NON_EMPTY_GROUP)
INVALID_REQUEST: Final = int(ErrorCode.INVALID_REQUEST)
FENCED_MEMBER_EPOCH: Final = int(ErrorCode.FENCED_MEMBER_EPOCH)
UNRELEASED_INSTANCE_ID: Final = int(ErrorCode.UNRELEASED_INSTANCE_ID)
UNSUPPORTED_ASSIGNOR: Final = int(ErrorCode.UNSUPPORTED_ASSIGNOR)
STALE_MEMBER_EPOCH: Final = int(ErrorCode.STALE_MEMBER_EPOCH)
UNSUPPORTED_VERSION: Final = int(ErrorCode.UNSUPPORTED_VERSION)
INVALID_REGULAR_EXPRESSION: Final = int(ErrorCode.INVALID_REGULAR_EXPRESSION)
OFFSET_METADATA_TOO_LARGE: Final = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
GROUP_SUBSCRIBED_TO_TOPIC: Final = int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)
UNSTABLE_OFFSET_COMMIT: Final = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)
REQUEST_TIMED_OUT: Final = int(ErrorCode.REQUEST_TIMED_OUT)
STREAMS_INVALID_TOPOLOGY: Final = int(ErrorCode.STREAMS_INVALID_TOPOLOGY)
STREAMS_INVALID_TOPOLOGY_EPOCH: Final = int(ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH)
STREAMS_TOPOLOGY_FENCED: Final = int(ErrorCode.STREAMS_TOPOLOGY_FENCED)


def map_write_error(code: int, timed_out: int, too_large: int) -> int:
    """Kafka's mapping of a failed log append to the error a client understands."""
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return NOT_COORDINATOR
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return timed_out
    if code in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return too_large
    return code


def group_write_error(code: int) -> int:
    """Group-metadata write failures (SyncGroup, static member replacement): a timed-out write
    tells the members to rebalance again."""
    return map_write_error(code, REBALANCE_IN_PROGRESS, UNKNOWN_SERVER_ERROR)


def offset_write_error(code: int) -> int:
    """OffsetCommit write failures: a timed-out write is REQUEST_TIMED_OUT (retriable)."""
    return map_write_error(code, REQUEST_TIMED_OUT, int(ErrorCode.INVALID_COMMIT_OFFSET_SIZE))


def admin_write_error(code: int) -> int:
    """Tombstone write failures of admin requests (DeleteGroups, OffsetDelete)."""
    return map_write_error(code, REQUEST_TIMED_OUT, UNKNOWN_SERVER_ERROR)


def consumer_write_error(code: int) -> int:
    """Kafka's GroupCoordinatorService.normalizeException for failed consumer-group writes."""
    return map_write_error(code, COORDINATOR_NOT_AVAILABLE, UNKNOWN_SERVER_ERROR)
