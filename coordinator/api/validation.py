"""Request screening before the core: sizes, identifiers and value ranges (see ``limits``).

``screen_request`` runs on every decoded request. It answers with the API's own error when a
request carries what the server must not store or could not answer (an identifier too long to
be echoed back, a NUL that a database cannot hold, more partitions than a topic may have), and
asks to close the connection when a request has more array elements than any client sends.
It also brings values into the range the server can store (an OffsetCommit retention so large
that the expiry time would overflow 64 bits means "never expire" and is clamped).

Only requests that create or change state keyed by client-chosen strings are checked for
identifiers: JoinGroup, ConsumerGroupHeartbeat and OffsetCommit. Other requests name groups
and members that either exist (and so passed these checks) or are answered as unknown.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from coordinator.api.limits import RequestLimits
from protocol.apis import ApiKey
from protocol.error_responses import join_group_error
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from protocol.messages.create_topics import CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)

# A retention beyond this (about 146 million years) is clamped: wall-clock ms + it fits int64.
MAX_RETENTION_MS: Final = 2**62


@dataclass(slots=True)
class Screening:
    """What to do instead of (or besides) handing the request to its handler.

    ``close``: close the connection with this log reason. ``answer``: send this response and
    skip the handler. ``extra``: (response attribute, items) to append to the handler's
    response: the per-topic refusals of a request whose other topics go on.
    """

    close: str | None = None
    answer: Any = None
    extra: tuple[str, list[Any]] | None = None


def screen_request(
    limits: RequestLimits,
    api_key: int,
    api_version: int,
    client_id: str,
    body: Any,
    *,
    frame_bytes: int | None = None,
) -> Screening | None:
    """``frame_bytes``: the request's size on the wire, when known (it may spare the count)."""
    kind = type(body)
    lists = _LIST_FIELDS.get(kind)  # _list_fields inlined for the cached case: every request
    if lists is None:
        lists = _list_fields(kind)
    if not lists and api_key not in _SCREENED_APIS:
        return None  # nothing to count or check (Heartbeat, SyncGroup without assignments...)
    if frame_bytes is None or frame_bytes > limits.request_max_items or api_key not in _BYTE_PER_ELEMENT:
        items = count_items(body, limits.request_max_items)
        if items > limits.request_max_items:
            return Screening(close=f"request has more than {limits.request_max_items} array elements")
    groups_field = _GROUP_LISTS.get(api_key)
    if groups_field is not None and len(getattr(body, groups_field, None) or ()) > limits.request_max_groups:
        return Screening(close=f"request names more than {limits.request_max_groups} groups")
    if api_key == ApiKey.JOIN_GROUP:
        return _join_group(limits, api_version, client_id, body)
    if api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
        return _consumer_group_heartbeat(limits, client_id, body)
    if api_key == ApiKey.OFFSET_COMMIT:
        return _offset_commit(limits, body)
    if api_key == ApiKey.CREATE_TOPICS:
        return _create_topics(limits, body)
    if api_key == ApiKey.CREATE_PARTITIONS:
        return _create_partitions(limits, body)
    return None


# APIs with checks of their own below (a body without arrays skips count_items otherwise).
_SCREENED_APIS: Final = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.OFFSET_COMMIT,
        ApiKey.CREATE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
    }
)

# APIs each of whose array elements takes at least one byte on the wire in every version (a
# partition index, a topic name or id, a group id): a request of no more bytes than
# request.max.items cannot exceed it, and its elements are not counted
# (docs/performance.md#the-1-partition-commit-where-its-cpu-goes).
_BYTE_PER_ELEMENT: Final = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH})

_GROUP_LISTS: Final[dict[int, str]] = {
    ApiKey.DESCRIBE_GROUPS: "groups",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "group_ids",
    ApiKey.STREAMS_GROUP_DESCRIBE: "group_ids",
    ApiKey.DELETE_GROUPS: "groups_names",
    ApiKey.OFFSET_FETCH: "groups",
}


# ---- array elements ----------------------------------------------------------------------------
_LIST_FIELDS: dict[type, tuple[str, ...]] = {}


def count_items(body: Any, limit: int) -> int:
    """Elements of every array in ``body``, nested ones included; stops early past ``limit``."""
    total = 0
    stack = [body]
    while stack:
        obj = stack.pop()
        kind = type(obj)
        names = _LIST_FIELDS.get(kind)
        if names is None:
            names = _list_fields(kind)
        for name in names:
            value = getattr(obj, name)
            if not value:
                continue
            total += len(value)
            if total > limit:
                return total
            first = value[0]
            if not isinstance(first, (int, str, bytes)):
                # The elements of a message's array are of one class: walked only when that class
                # has arrays of its own (not the 100 partitions of a commit, one by one).
                inner = _LIST_FIELDS.get(type(first))
                if inner is None:
                    inner = _list_fields(type(first))
                if inner:
                    stack.extend(value)
    return total


def _list_fields(kind: type) -> tuple[str, ...]:
    names = _LIST_FIELDS.get(kind)
    if names is None:
        fields = getattr(kind, "__dataclass_fields__", {})
        names = tuple(name for name, f in fields.items() if "list[" in str(f.type))
        _LIST_FIELDS[kind] = names
    return names


# ---- identifiers -------------------------------------------------------------------------------
def bad_identifier(value: str | None, max_chars: int) -> str | None:
    """Why ``value`` cannot be stored and echoed as an identifier, or None."""
    if value is None:
        return None
    if len(value) > max_chars:
        return f"longer than {max_chars} characters"
    if "\x00" in value:
        return "contains a NUL character"
    return None


def _first_problem(checks: Iterable[tuple[str, str | None, int]]) -> str | None:
    for label, value, max_chars in checks:
        if value is None or (len(value) <= max_chars and "\x00" not in value):
            continue  # bad_identifier's None, without the call (a JoinGroup checks 5 or more)
        reason = bad_identifier(value, max_chars)
        if reason is not None:
            return f"{label} is {reason}" if reason.startswith("longer") else f"{label} {reason}"
    return None


def _group_and_member_problem(limits: RequestLimits, group_id: str, member_id: str) -> tuple[int, str | None]:
    """The error and reason for an over-long or NUL-carrying group or member id, in Kafka's order."""
    problem = _first_problem([("group id", group_id, limits.group_id_max_chars)])
    if problem is not None:
        return ErrorCode.INVALID_GROUP_ID, problem
    return ErrorCode.UNKNOWN_MEMBER_ID, _first_problem([("member id", member_id, limits.member_id_max_chars)])


def _join_group(
    limits: RequestLimits, version: int, client_id: str, req: JoinGroupRequest
) -> Screening | None:
    longest = limits.group_id_max_chars
    code, problem = _group_and_member_problem(limits, req.group_id, req.member_id)
    if problem is None:
        code = ErrorCode.INVALID_REQUEST
        problem = _first_problem(
            [
                ("group instance id", req.group_instance_id, longest),
                ("client id", client_id, longest),
                ("protocol type", req.protocol_type, longest),
                *(("protocol name", p.name, longest) for p in req.protocols),
            ]
        )
    if problem is None:
        metadata = sum(len(p.metadata) for p in req.protocols)
        if metadata > limits.group_member_metadata_max_bytes:
            problem = f"member metadata of {metadata} bytes exceeds {limits.group_member_metadata_max_bytes}"
    if problem is None:
        return None
    return Screening(answer=join_group_error(version, code))


def _consumer_group_heartbeat(
    limits: RequestLimits, client_id: str, req: ConsumerGroupHeartbeatRequest
) -> Screening | None:
    longest = limits.group_id_max_chars
    code, problem = _group_and_member_problem(limits, req.group_id, req.member_id)
    if problem is None:
        code = ErrorCode.INVALID_REQUEST
        problem = _first_problem(
            [
                ("instance id", req.instance_id, longest),
                ("rack id", req.rack_id, longest),
                ("client id", client_id, longest),
                ("server assignor", req.server_assignor, longest),
            ]
        )
    if problem is None:
        return None
    return Screening(answer=ConsumerGroupHeartbeatResponse(error_code=code, error_message=f"{problem}."))


def _offset_commit(limits: RequestLimits, req: OffsetCommitRequest) -> Screening | None:
    if req.retention_time_ms > MAX_RETENTION_MS:
        req.retention_time_ms = MAX_RETENTION_MS
    elif req.retention_time_ms < -MAX_RETENTION_MS:
        req.retention_time_ms = -MAX_RETENTION_MS
    group_id, member_id, instance_id = req.group_id, req.member_id, req.group_instance_id
    longest = limits.group_id_max_chars
    if (
        len(group_id) <= longest
        and "\x00" not in group_id
        and len(member_id) <= limits.member_id_max_chars
        and "\x00" not in member_id
        and (instance_id is None or (len(instance_id) <= longest and "\x00" not in instance_id))
    ):
        return None  # every identifier fine: decided inline, no check list built (every commit)
    code = ErrorCode.INVALID_GROUP_ID
    problem = _first_problem([("group id", req.group_id, limits.group_id_max_chars)])
    if problem is None:
        code = ErrorCode.UNKNOWN_MEMBER_ID
        problem = _first_problem(
            [
                ("member id", req.member_id, limits.member_id_max_chars),
                ("group instance id", req.group_instance_id, limits.group_id_max_chars),
            ]
        )
    if problem is None:
        return None
    return Screening(
        answer=OffsetCommitResponse(
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=[OffsetCommitResponsePartition(p.partition_index, code) for p in t.partitions],
                )
                for t in req.topics
            ]
        )
    )


# ---- topic requests ----------------------------------------------------------------------------
def _partitions_refusal(limits: RequestLimits, count: int, used: int) -> str | None:
    if count > limits.topic_max_partitions:
        return f"{count} partitions exceed the limit of {limits.topic_max_partitions} per topic"
    if used + max(count, 0) > limits.request_max_partitions:
        return f"more than {limits.request_max_partitions} partitions in one request"
    return None


def _create_topics(limits: RequestLimits, req: CreateTopicsRequest) -> Screening | None:
    kept = []
    refused = []
    used = 0
    for topic in req.topics:
        reason = _partitions_refusal(limits, topic.num_partitions, used)
        if reason is None:
            used += max(topic.num_partitions, 0)
            kept.append(topic)
        else:
            refused.append(
                CreatableTopicResult(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_PARTITIONS,
                    error_message=reason,
                    configs=None,
                )
            )
    if not refused:
        return None
    if not kept:
        return Screening(answer=CreateTopicsResponse(topics=refused))
    req.topics = kept
    return Screening(extra=("topics", refused))


def _create_partitions(limits: RequestLimits, req: CreatePartitionsRequest) -> Screening | None:
    kept = []
    refused = []
    used = 0
    for topic in req.topics:
        reason = _partitions_refusal(limits, topic.count, used)
        if reason is None:
            used += max(topic.count, 0)
            kept.append(topic)
        else:
            refused.append(
                CreatePartitionsTopicResult(
                    name=topic.name, error_code=ErrorCode.INVALID_PARTITIONS, error_message=reason
                )
            )
    if not refused:
        return None
    if not kept:
        return Screening(answer=CreatePartitionsResponse(results=refused))
    req.topics = kept
    return Screening(extra=("results", refused))
