"""Second oracle for the APIs kafka-python has no classes for: bytes computed by hand.

ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), versions 0-1, are generated from
Kafka 4.4's specs like the rest (docs/protocol.md). Every expected byte string below is written out field
by field from the Kafka wire format, not produced by any encoder:

* all their versions are flexible: a string is a compact string, uvarint(len + 1) then the UTF-8
  bytes; a nullable string or array that is null is uvarint 0 (``00``); an array of n elements
  starts with uvarint(n + 1); a uuid is its 16 bytes; each struct (the message itself, every
  array element, every nested struct) ends with its tagged fields, here none: uvarint 0 (``00``);
* a nullable struct (ConsumerGroupHeartbeatResponse.Assignment) is preceded by an int8 marker:
  -1 (``ff``) for null, 1 (``01``) before the struct's fields;
* requests travel with request header v2 (int16 api key, int16 version, int32 correlation id,
  int16-length client id, tagged fields), responses with response header v1 (int32 correlation
  id, tagged fields), each after the int32 frame length.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from protocol import wire
from protocol.apis import ApiKey
from protocol.messages import CODECS, FLEXIBLE
from protocol.messages import share_acknowledge as sak
from protocol.messages import share_fetch as sf
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from protocol.messages.consumer_group_describe import (
    Assignment as DescribeAssignment,
)
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
)
from protocol.messages.consumer_group_describe import (
    TopicPartitions as DescribeTopicPartitions,
)
from protocol.messages.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from protocol.messages.share_group_describe import Assignment as ShareDescribedAssignment
from protocol.messages.share_group_describe import DescribedGroup as ShareDescribedGroup
from protocol.messages.share_group_describe import Member as ShareDescribedMember
from protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from protocol.messages.share_group_describe import TopicPartitions as ShareDescribedPartitions
from protocol.messages.share_group_heartbeat import Assignment as ShareAssignment
from protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from protocol.messages.share_group_heartbeat import TopicPartitions as ShareTopicPartitions
from protocol.primitives import DecodeError
from tests.protocol.model import golden_pairs, pair_id

HB = ApiKey.CONSUMER_GROUP_HEARTBEAT
DESCRIBE = ApiKey.CONSUMER_GROUP_DESCRIBE
SHARE_HB = ApiKey.SHARE_GROUP_HEARTBEAT
SHARE_DESCRIBE = ApiKey.SHARE_GROUP_DESCRIBE
SHARE_OFFSETS_KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS
SHARE_ALTER = ApiKey.ALTER_SHARE_GROUP_OFFSETS
SHARE_DELETE = ApiKey.DELETE_SHARE_GROUP_OFFSETS
SHARE_FETCH = ApiKey.SHARE_FETCH
SHARE_ACK = ApiKey.SHARE_ACKNOWLEDGE

# Two topic ids: 01 02 .. 10 and sixteen aa bytes.
T1 = bytes(range(1, 17))
T2 = b"\xaa" * 16
T1_HEX = "01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10"
T2_HEX = "aa aa aa aa aa aa aa aa aa aa aa aa aa aa aa aa"


def h(*parts: str) -> bytes:
    """Hex bytes, one argument per field (spaces ignored)."""
    return bytes.fromhex("".join(parts))


def s(text: str) -> str:
    """The hex of ASCII text (the payload of a string, after its length)."""
    return text.encode("ascii").hex()


# ---- ShareFetch / ShareAcknowledge (v1-v2) -------------------------------------------------------


def share_fetch_request(version: int) -> sf.ShareFetchRequest:
    return sf.ShareFetchRequest(
        group_id="grp",
        member_id="m-1",
        share_session_epoch=1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1024,
        max_records=100,
        batch_size=10,
        share_acquire_mode=1 if version >= 2 else 0,
        is_renew_ack=False,
        topics=[
            sf.FetchTopic(
                topic_id=T1,
                partitions=[
                    sf.FetchPartition(
                        partition_index=0,
                        acknowledgement_batches=[sf.AcknowledgementBatch(5, 6, [1, 2])],
                    )
                ],
            )
        ],
        forgotten_topics_data=[sf.ForgottenTopic(topic_id=T2, partitions=[3])],
    )


def share_fetch_request_wire(version: int) -> bytes:
    return h(
        "04" + s("grp"),  # GroupId
        "04" + s("m-1"),  # MemberId
        "00000001",  # ShareSessionEpoch 1
        "000001f4",  # MaxWaitMs 500
        "00000001",  # MinBytes 1
        "00000400",  # MaxBytes 1024
        "00000064",  # MaxRecords 100 (v1+)
        "0000000a",  # BatchSize 10 (v1+)
        "01 00" if version >= 2 else "",  # ShareAcquireMode 1 (record limit), IsRenewAck false (v2+)
        "02",  # Topics: 1 element
        T1_HEX,  # TopicId
        "02",  # Partitions: 1 element (PartitionMaxBytes is v0 only)
        "00000000",  # PartitionIndex 0
        "02",  # AcknowledgementBatches: 1 element
        "0000000000000005 0000000000000006",  # FirstOffset 5, LastOffset 6
        "03 01 02",  # AcknowledgeTypes [ACCEPT, RELEASE]
        "00 00 00",  # batch, partition, topic tagged fields
        "02",  # ForgottenTopicsData: 1 element
        T2_HEX,  # TopicId
        "02 00000003",  # Partitions [3]
        "00",  # ForgottenTopic tagged fields
        "00",  # tagged fields
    )


SHARE_FETCHED = sf.ShareFetchResponse(
    acquisition_lock_timeout_ms=30000,
    responses=[
        sf.ShareFetchableTopicResponse(
            topic_id=T1,
            partitions=[
                sf.PartitionData(
                    partition_index=0,
                    acknowledge_error_code=121,
                    acknowledge_error_message="x",
                    current_leader=sf.LeaderIdAndEpoch(leader_id=1, leader_epoch=0),
                    records=b"\xab",
                    acquired_records=[sf.AcquiredRecords(first_offset=7, last_offset=9, delivery_count=2)],
                )
            ],
        )
    ],
)
SHARE_FETCHED_WIRE = h(
    "00000000",  # ThrottleTimeMs
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "00007530",  # AcquisitionLockTimeoutMs 30000
    "02",  # Responses: 1 element
    T1_HEX,  # TopicId
    "02",  # Partitions: 1 element
    "00000000",  # PartitionIndex
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "0079",  # AcknowledgeErrorCode 121 (INVALID_RECORD_STATE)
    "02" + s("x"),  # AcknowledgeErrorMessage
    "00000001 00000000 00",  # CurrentLeader: LeaderId 1, LeaderEpoch 0, tagged fields
    "02 ab",  # Records: 1 byte
    "02",  # AcquiredRecords: 1 element
    "0000000000000007 0000000000000009 0002",  # FirstOffset 7, LastOffset 9, DeliveryCount 2
    "00 00 00",  # acquired, partition, topic tagged fields
    "01",  # NodeEndpoints: empty
    "00",  # tagged fields
)

SHARE_ACK_REQ = sak.ShareAcknowledgeRequest(
    group_id="grp",
    member_id="m-1",
    share_session_epoch=2,
    topics=[
        sak.AcknowledgeTopic(
            topic_id=T1,
            partitions=[
                sak.AcknowledgePartition(
                    partition_index=1, acknowledgement_batches=[sak.AcknowledgementBatch(0, 0, [3])]
                )
            ],
        )
    ],
)


def share_ack_request_wire(version: int) -> bytes:
    return h(
        "04" + s("grp"),  # GroupId
        "04" + s("m-1"),  # MemberId
        "00000002",  # ShareSessionEpoch 2
        "00" if version >= 2 else "",  # IsRenewAck false (v2+)
        "02",  # Topics: 1 element
        T1_HEX,  # TopicId
        "02",  # Partitions: 1 element
        "00000001",  # PartitionIndex 1
        "02",  # AcknowledgementBatches: 1 element
        "0000000000000000 0000000000000000 02 03",  # offsets 0-0, AcknowledgeTypes [REJECT]
        "00 00 00",  # batch, partition, topic tagged fields
        "00",  # tagged fields
    )


SHARE_ACKED = sak.ShareAcknowledgeResponse(
    acquisition_lock_timeout_ms=15000,
    responses=[
        sak.ShareAcknowledgeTopicResponse(
            topic_id=T1,
            partitions=[
                sak.PartitionData(
                    partition_index=1,
                    error_code=121,
                    current_leader=sak.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                )
            ],
        )
    ],
)


def share_acked_wire(version: int) -> bytes:
    return h(
        "00000000",  # ThrottleTimeMs
        "0000",  # ErrorCode
        "00",  # ErrorMessage: null
        "00003a98" if version >= 2 else "",  # AcquisitionLockTimeoutMs 15000 (v2+, ignorable)
        "02",  # Responses: 1 element
        T1_HEX,  # TopicId
        "02",  # Partitions: 1 element
        "00000001",  # PartitionIndex 1
        "0079",  # ErrorCode 121
        "00",  # ErrorMessage: null
        "ffffffff ffffffff 00",  # CurrentLeader -1, -1, tagged fields
        "00 00",  # partition, topic tagged fields
        "01",  # NodeEndpoints: empty
        "00",  # tagged fields
    )


@dataclass(frozen=True)
class Golden:
    name: str
    key: ApiKey
    version: int
    request: bool  # request or response body
    value: Any  # what is encoded
    wire: bytes  # the body, computed by hand
    decoded: Any = None  # what decoding the bytes gives, when it differs from value (dropped fields)


# ---- ConsumerGroupHeartbeatRequest ------------------------------------------------------------

HB_JOIN = ConsumerGroupHeartbeatRequest(
    group_id="grp",
    member_id="",
    member_epoch=0,
    instance_id=None,
    rack_id="r1",
    rebalance_timeout_ms=300000,
    subscribed_topic_names=["orders", "audit"],
    server_assignor="uniform",
    topic_partitions=[],
)
HB_JOIN_V0 = h(
    "04" + s("grp"),  # GroupId: compact string, uvarint(3 + 1)
    "01",  # MemberId "": uvarint(0 + 1)
    "00000000",  # MemberEpoch 0 (join)
    "00",  # InstanceId: null
    "03" + s("r1"),  # RackId "r1"
    "000493e0",  # RebalanceTimeoutMs 300000
    "03",  # SubscribedTopicNames: 2 elements, uvarint(2 + 1)
    "07" + s("orders"),  # ... "orders"
    "06" + s("audit"),  # ... "audit"
    "08" + s("uniform"),  # ServerAssignor "uniform"
    "01",  # TopicPartitions: empty (not null), uvarint(0 + 1)
    "00",  # tagged fields: none
)
HB_JOIN_REGEX = replace(HB_JOIN, subscribed_topic_regex="ord.*")
HB_JOIN_REGEX_V1 = h(
    "04" + s("grp"),  # GroupId
    "01",  # MemberId ""
    "00000000",  # MemberEpoch 0
    "00",  # InstanceId: null
    "03" + s("r1"),  # RackId "r1"
    "000493e0",  # RebalanceTimeoutMs 300000
    "03",  # SubscribedTopicNames: 2 elements
    "07" + s("orders"),
    "06" + s("audit"),
    "06" + s("ord.*"),  # SubscribedTopicRegex "ord.*" (v1+ only): uvarint(5 + 1)
    "08" + s("uniform"),  # ServerAssignor
    "01",  # TopicPartitions: empty
    "00",  # tagged fields
)

# A steady-state heartbeat: everything "unchanged" (null), RebalanceTimeoutMs -1.
HB_STEADY = ConsumerGroupHeartbeatRequest(group_id="grp", member_id="m-1", member_epoch=5)
HB_STEADY_V0 = h(
    "04" + s("grp"),  # GroupId
    "04" + s("m-1"),  # MemberId "m-1"
    "00000005",  # MemberEpoch 5
    "00",  # InstanceId: null
    "00",  # RackId: null
    "ffffffff",  # RebalanceTimeoutMs -1 (the default)
    "00",  # SubscribedTopicNames: null
    "00",  # ServerAssignor: null
    "00",  # TopicPartitions: null (not empty)
    "00",  # tagged fields
)
HB_STEADY_V1 = h(
    "04" + s("grp"),  # GroupId
    "04" + s("m-1"),  # MemberId
    "00000005",  # MemberEpoch 5
    "00",  # InstanceId: null
    "00",  # RackId: null
    "ffffffff",  # RebalanceTimeoutMs -1
    "00",  # SubscribedTopicNames: null
    "00",  # SubscribedTopicRegex: null (the one byte v1 adds)
    "00",  # ServerAssignor: null
    "00",  # TopicPartitions: null
    "00",  # tagged fields
)

# Reporting owned partitions, static member, a topic name long enough for a 2-byte length.
LONG_TOPIC = "t" * 130
HB_OWNED = ConsumerGroupHeartbeatRequest(
    group_id="grp",
    member_id="m-1",
    member_epoch=6,
    instance_id="i-1",
    subscribed_topic_names=[LONG_TOPIC],
    topic_partitions=[TopicPartitions(T1, [0, 1, 2]), TopicPartitions(T2, [])],
)
HB_OWNED_V0 = h(
    "04" + s("grp"),  # GroupId
    "04" + s("m-1"),  # MemberId
    "00000006",  # MemberEpoch 6
    "04" + s("i-1"),  # InstanceId "i-1"
    "00",  # RackId: null
    "ffffffff",  # RebalanceTimeoutMs -1
    "02",  # SubscribedTopicNames: 1 element
    "8301" + s(LONG_TOPIC),  # ... 130 chars: uvarint(131) = 0x83 0x01
    "00",  # ServerAssignor: null
    "03",  # TopicPartitions: 2 elements
    T1_HEX,  # [0].TopicId
    "04 00000000 00000001 00000002",  # [0].Partitions [0, 1, 2]: uvarint(3 + 1), three int32
    "00",  # [0] tagged fields
    T2_HEX,  # [1].TopicId
    "01",  # [1].Partitions: empty
    "00",  # [1] tagged fields
    "00",  # tagged fields
)
HB_OWNED_V1 = h(
    "04" + s("grp"),
    "04" + s("m-1"),
    "00000006",
    "04" + s("i-1"),  # InstanceId "i-1"
    "00",  # RackId: null
    "ffffffff",  # RebalanceTimeoutMs -1
    "02" + "8301" + s(LONG_TOPIC),  # SubscribedTopicNames [130 x "t"]
    "00",  # SubscribedTopicRegex: null
    "00",  # ServerAssignor: null
    "03",  # TopicPartitions: 2 elements
    T1_HEX + "04 00000000 00000001 00000002" + "00",
    T2_HEX + "01" + "00",
    "00",  # tagged fields
)

# Leaving: epoch -1.
HB_LEAVE = ConsumerGroupHeartbeatRequest(group_id="grp", member_id="m-1", member_epoch=-1)
HB_LEAVE_V1 = h(
    "04" + s("grp"),  # GroupId
    "04" + s("m-1"),  # MemberId
    "ffffffff",  # MemberEpoch -1 (leave)
    "00",  # InstanceId: null
    "00",  # RackId: null
    "ffffffff",  # RebalanceTimeoutMs -1
    "00",  # SubscribedTopicNames: null
    "00",  # SubscribedTopicRegex: null
    "00",  # ServerAssignor: null
    "00",  # TopicPartitions: null
    "00",  # tagged fields
)

# ---- ConsumerGroupHeartbeatResponse -----------------------------------------------------------

HB_RESPONSE_HEAD = "".join(
    [
        "00000000",  # ThrottleTimeMs 0
        "0000",  # ErrorCode 0
        "00",  # ErrorMessage: null
        "04" + s("m-1"),  # MemberId "m-1"
        "00000007",  # MemberEpoch 7
        "00001388",  # HeartbeatIntervalMs 5000
    ]
)
HB_NO_ASSIGNMENT = ConsumerGroupHeartbeatResponse(member_id="m-1", member_epoch=7, heartbeat_interval_ms=5000)
HB_NO_ASSIGNMENT_WIRE = h(
    HB_RESPONSE_HEAD,
    "ff",  # Assignment: null, int8 marker -1
    "00",  # tagged fields
)
HB_EMPTY_ASSIGNMENT = replace(HB_NO_ASSIGNMENT, assignment=Assignment([]))
HB_EMPTY_ASSIGNMENT_WIRE = h(
    HB_RESPONSE_HEAD,
    "01",  # Assignment: present, int8 marker 1
    "01",  # Assignment.TopicPartitions: empty
    "00",  # Assignment's tagged fields
    "00",  # tagged fields
)
HB_ASSIGNMENT = replace(
    HB_NO_ASSIGNMENT, assignment=Assignment([TopicPartitions(T1, [0, 2]), TopicPartitions(T2, [7])])
)
HB_ASSIGNMENT_WIRE = h(
    HB_RESPONSE_HEAD,
    "01",  # Assignment: present
    "03",  # Assignment.TopicPartitions: 2 elements
    T1_HEX,  # [0].TopicId
    "03 00000000 00000002",  # [0].Partitions [0, 2]
    "00",  # [0] tagged fields
    T2_HEX,  # [1].TopicId
    "02 00000007",  # [1].Partitions [7]
    "00",  # [1] tagged fields
    "00",  # Assignment's tagged fields
    "00",  # tagged fields
)
HB_FENCED = ConsumerGroupHeartbeatResponse(
    throttle_time_ms=20, error_code=110, error_message="fenced", member_id=None, member_epoch=-1
)
HB_FENCED_WIRE = h(
    "00000014",  # ThrottleTimeMs 20
    "006e",  # ErrorCode 110 (FENCED_MEMBER_EPOCH)
    "07" + s("fenced"),  # ErrorMessage "fenced"
    "00",  # MemberId: null
    "ffffffff",  # MemberEpoch -1
    "00000000",  # HeartbeatIntervalMs 0
    "ff",  # Assignment: null
    "00",  # tagged fields
)

# ---- ConsumerGroupDescribeRequest -------------------------------------------------------------

DESCRIBE_TWO = ConsumerGroupDescribeRequest(group_ids=["g1", "g2"], include_authorized_operations=True)
DESCRIBE_TWO_WIRE = h(
    "03",  # GroupIds: 2 elements
    "03" + s("g1"),
    "03" + s("g2"),
    "01",  # IncludeAuthorizedOperations true
    "00",  # tagged fields
)
DESCRIBE_NONE = ConsumerGroupDescribeRequest()
DESCRIBE_NONE_WIRE = h("01", "00", "00")  # GroupIds empty, IncludeAuthorizedOperations false, no tags

# ---- ConsumerGroupDescribeResponse ------------------------------------------------------------


def described(member_type: int) -> ConsumerGroupDescribeResponse:
    member = Member(
        member_id="m-1",
        instance_id=None,
        rack_id="r1",
        member_epoch=4,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=["orders"],
        subscribed_topic_regex=None,
        assignment=DescribeAssignment([DescribeTopicPartitions(T1, "orders", [0, 1])]),
        target_assignment=DescribeAssignment([]),
        member_type=member_type,
    )
    stable = DescribedGroup(
        error_code=0,
        error_message=None,
        group_id="g1",
        group_state="Stable",
        group_epoch=4,
        assignment_epoch=4,
        assignor_name="uniform",
        members=[member],
        authorized_operations=328,
    )
    missing = DescribedGroup(
        error_code=69, error_message="Group g2 not found.", group_id="g2", group_state="Dead"
    )
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[stable, missing])


def described_wire(member_type: str) -> bytes:
    """The bytes of described(): ``member_type`` is the MemberType field's hex, "" where absent."""
    return h(
        "00000000",  # ThrottleTimeMs 0
        "03",  # Groups: 2 elements
        # -- Groups[0]
        "0000",  # ErrorCode 0
        "00",  # ErrorMessage: null
        "03" + s("g1"),  # GroupId "g1"
        "07" + s("Stable"),  # GroupState "Stable"
        "00000004",  # GroupEpoch 4
        "00000004",  # AssignmentEpoch 4
        "08" + s("uniform"),  # AssignorName "uniform"
        "02",  # Members: 1 element
        "04" + s("m-1"),  # MemberId "m-1"
        "00",  # InstanceId: null
        "03" + s("r1"),  # RackId "r1"
        "00000004",  # MemberEpoch 4
        "02" + s("c"),  # ClientId "c"
        "0b" + s("/127.0.0.1"),  # ClientHost: 10 chars
        "02" + "07" + s("orders"),  # SubscribedTopicNames ["orders"]
        "00",  # SubscribedTopicRegex: null
        # Assignment: a plain (non-nullable) struct, no marker
        "02",  # Assignment.TopicPartitions: 1 element
        T1_HEX,  # TopicId
        "07" + s("orders"),  # TopicName "orders"
        "03 00000000 00000001",  # Partitions [0, 1]
        "00",  # TopicPartitions[0] tagged fields
        "00",  # Assignment's tagged fields
        "01",  # TargetAssignment.TopicPartitions: empty
        "00",  # TargetAssignment's tagged fields
        member_type,  # MemberType int8 (v1+)
        "00",  # Members[0] tagged fields
        "00000148",  # AuthorizedOperations 328 (bits 3, 6, 8)
        "00",  # Groups[0] tagged fields
        # -- Groups[1]
        "0045",  # ErrorCode 69 (GROUP_ID_NOT_FOUND)
        "14" + s("Group g2 not found."),  # ErrorMessage: 19 chars, uvarint(20)
        "03" + s("g2"),  # GroupId "g2"
        "05" + s("Dead"),  # GroupState "Dead"
        "00000000",  # GroupEpoch 0
        "00000000",  # AssignmentEpoch 0
        "01",  # AssignorName ""
        "01",  # Members: empty
        "80000000",  # AuthorizedOperations: default -2**31 (not requested)
        "00",  # Groups[1] tagged fields
        "00",  # tagged fields
    )


# ---- ShareGroupHeartbeat / ShareGroupDescribe (v1 only) ---------------------------------------

SHARE_HB_JOIN = ShareGroupHeartbeatRequest(
    group_id="grp", member_id="m-1", member_epoch=0, rack_id=None, subscribed_topic_names=["orders"]
)
SHARE_HB_JOIN_V1 = h(
    "04" + s("grp"),  # GroupId
    "04" + s("m-1"),  # MemberId "m-1" (generated by the client)
    "00000000",  # MemberEpoch 0 (join)
    "00",  # RackId: null
    "02",  # SubscribedTopicNames: 1 element
    "07" + s("orders"),
    "00",  # tagged fields
)
SHARE_HB_ASSIGNED = ShareGroupHeartbeatResponse(
    member_id="m-1",
    member_epoch=2,
    heartbeat_interval_ms=5000,
    assignment=ShareAssignment(topic_partitions=[ShareTopicPartitions(topic_id=T1, partitions=[0, 1])]),
)
SHARE_HB_ASSIGNED_WIRE = h(
    "00000000",  # ThrottleTimeMs
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "04" + s("m-1"),  # MemberId
    "00000002",  # MemberEpoch 2
    "00001388",  # HeartbeatIntervalMs 5000
    "01",  # Assignment: present
    "02",  # TopicPartitions: 1 element
    T1_HEX,  # TopicId
    "03 00000000 00000001",  # Partitions [0, 1]
    "00",  # TopicPartitions[0] tagged fields
    "00",  # Assignment tagged fields
    "00",  # tagged fields
)
SHARE_DESCRIBE_REQ = ShareGroupDescribeRequest(group_ids=["grp"], include_authorized_operations=True)
SHARE_DESCRIBE_REQ_WIRE = h("02", "04" + s("grp"), "01", "00")  # GroupIds ["grp"], true, no tags
SHARE_DESCRIBED = ShareGroupDescribeResponse(
    groups=[
        ShareDescribedGroup(
            group_id="grp",
            group_state="Stable",
            group_epoch=3,
            assignment_epoch=3,
            assignor_name="simple",
            members=[
                ShareDescribedMember(
                    member_id="m-1",
                    member_epoch=3,
                    client_id="c",
                    client_host="/h",
                    subscribed_topic_names=["orders"],
                    assignment=ShareDescribedAssignment(
                        topic_partitions=[
                            ShareDescribedPartitions(topic_id=T2, topic_name="orders", partitions=[0])
                        ]
                    ),
                )
            ],
        )
    ]
)
SHARE_DESCRIBED_WIRE = h(
    "00000000",  # ThrottleTimeMs
    "02",  # Groups: 1 element
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "04" + s("grp"),  # GroupId
    "07" + s("Stable"),  # GroupState
    "00000003",  # GroupEpoch
    "00000003",  # AssignmentEpoch
    "07" + s("simple"),  # AssignorName
    "02",  # Members: 1 element
    "04" + s("m-1"),  # MemberId
    "00",  # RackId: null
    "00000003",  # MemberEpoch
    "02" + s("c"),  # ClientId
    "03" + s("/h"),  # ClientHost
    "02",  # SubscribedTopicNames: 1 element
    "07" + s("orders"),
    "02",  # Assignment.TopicPartitions: 1 element
    T2_HEX,  # TopicId
    "07" + s("orders"),  # TopicName
    "02 00000000",  # Partitions [0]
    "00",  # TopicPartitions[0] tagged fields
    "00",  # Assignment tagged fields
    "00",  # Members[0] tagged fields
    "80000000",  # AuthorizedOperations: default
    "00",  # Groups[0] tagged fields
    "00",  # tagged fields
)


# ---- DescribeShareGroupOffsets v0-1, AlterShareGroupOffsets v0, DeleteShareGroupOffsets v0 ----

SHARE_OFFSETS_REQ = DescribeShareGroupOffsetsRequest(
    groups=[
        DescribeShareGroupOffsetsRequestGroup(
            group_id="grp",
            topics=[DescribeShareGroupOffsetsRequestTopic(topic_name="orders", partitions=[0, 2])],
        ),
        DescribeShareGroupOffsetsRequestGroup(group_id="all", topics=None),
    ]
)
SHARE_OFFSETS_REQ_WIRE = h(
    "03",  # Groups: 2 elements
    "04" + s("grp"),  # GroupId
    "02",  # Topics: 1 element
    "07" + s("orders"),  # TopicName
    "03 00000000 00000002",  # Partitions [0, 2]
    "00",  # Topics[0] tagged fields
    "00",  # Groups[0] tagged fields
    "04" + s("all"),  # GroupId
    "00",  # Topics: null (every partition with state)
    "00",  # Groups[1] tagged fields
    "00",  # tagged fields
)
SHARE_OFFSETS_DESCRIBED = DescribeShareGroupOffsetsResponse(
    groups=[
        DescribeShareGroupOffsetsResponseGroup(
            group_id="grp",
            topics=[
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name="orders",
                    topic_id=T1,
                    partitions=[
                        DescribeShareGroupOffsetsResponsePartition(
                            partition_index=0, start_offset=7, leader_epoch=0, lag=3
                        ),
                        DescribeShareGroupOffsetsResponsePartition(
                            partition_index=2, start_offset=-1, leader_epoch=-1, lag=-1,
                            error_code=3, error_message="gone",
                        ),
                    ],
                )
            ],
        )
    ]
)  # fmt: skip


def share_offsets_wire(version: int) -> bytes:
    lag = {0: ("", ""), 1: ("0000000000000003", "ffffffffffffffff")}[version]
    return h(
        "00000000",  # ThrottleTimeMs
        "02",  # Groups: 1 element
        "04" + s("grp"),  # GroupId
        "02",  # Topics: 1 element
        "07" + s("orders"),  # TopicName
        T1_HEX,  # TopicId
        "03",  # Partitions: 2 elements
        "00000000",  # PartitionIndex 0
        "0000000000000007",  # StartOffset 7
        "00000000",  # LeaderEpoch 0
        lag[0],  # Lag 3 (v1+)
        "0000",  # ErrorCode
        "00",  # ErrorMessage: null
        "00",  # Partitions[0] tagged fields
        "00000002",  # PartitionIndex 2
        "ffffffffffffffff",  # StartOffset -1
        "ffffffff",  # LeaderEpoch -1
        lag[1],  # Lag -1 (v1+)
        "0003",  # ErrorCode UNKNOWN_TOPIC_OR_PARTITION
        "05" + s("gone"),  # ErrorMessage
        "00",  # Partitions[1] tagged fields
        "00",  # Topics[0] tagged fields
        "0000",  # ErrorCode
        "00",  # ErrorMessage: null
        "00",  # Groups[0] tagged fields
        "00",  # tagged fields
    )


SHARE_ALTER_REQ = AlterShareGroupOffsetsRequest(
    group_id="grp",
    topics=[
        AlterShareGroupOffsetsRequestTopic(
            topic_name="orders",
            partitions=[AlterShareGroupOffsetsRequestPartition(partition_index=1, start_offset=42)],
        )
    ],
)
SHARE_ALTER_REQ_WIRE = h(
    "04" + s("grp"),  # GroupId
    "02",  # Topics: 1 element
    "07" + s("orders"),  # TopicName
    "02",  # Partitions: 1 element
    "00000001",  # PartitionIndex 1
    "000000000000002a",  # StartOffset 42
    "00",  # Partitions[0] tagged fields
    "00",  # Topics[0] tagged fields
    "00",  # tagged fields
)
SHARE_ALTERED = AlterShareGroupOffsetsResponse(
    responses=[
        AlterShareGroupOffsetsResponseTopic(
            topic_name="orders",
            topic_id=T2,
            partitions=[AlterShareGroupOffsetsResponsePartition(partition_index=1, error_code=0)],
        )
    ]
)
SHARE_ALTERED_WIRE = h(
    "00000000",  # ThrottleTimeMs
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "02",  # Responses: 1 element
    "07" + s("orders"),  # TopicName
    T2_HEX,  # TopicId
    "02",  # Partitions: 1 element
    "00000001",  # PartitionIndex
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "00",  # Partitions[0] tagged fields
    "00",  # Responses[0] tagged fields
    "00",  # tagged fields
)
SHARE_DELETE_REQ = DeleteShareGroupOffsetsRequest(
    group_id="grp", topics=[DeleteShareGroupOffsetsRequestTopic(topic_name="orders")]
)
SHARE_DELETE_REQ_WIRE = h("04" + s("grp"), "02", "07" + s("orders"), "00", "00")
SHARE_DELETED = DeleteShareGroupOffsetsResponse(
    error_code=68,
    error_message="non empty",
    responses=[DeleteShareGroupOffsetsResponseTopic(topic_name="orders", topic_id=T1, error_code=0)],
)
SHARE_DELETED_WIRE = h(
    "00000000",  # ThrottleTimeMs
    "0044",  # ErrorCode 68 NON_EMPTY_GROUP
    "0a" + s("non empty"),  # ErrorMessage
    "02",  # Responses: 1 element
    "07" + s("orders"),  # TopicName
    T1_HEX,  # TopicId
    "0000",  # ErrorCode
    "00",  # ErrorMessage: null
    "00",  # Responses[0] tagged fields
    "00",  # tagged fields
)


GOLDEN = [
    Golden("hb-join", HB, 0, True, HB_JOIN, HB_JOIN_V0),
    Golden("hb-join-regex", HB, 1, True, HB_JOIN_REGEX, HB_JOIN_REGEX_V1),
    Golden("hb-steady", HB, 0, True, HB_STEADY, HB_STEADY_V0),
    Golden("hb-steady", HB, 1, True, HB_STEADY, HB_STEADY_V1),
    Golden("hb-owned", HB, 0, True, HB_OWNED, HB_OWNED_V0),
    Golden("hb-owned", HB, 1, True, HB_OWNED, HB_OWNED_V1),
    Golden("hb-leave", HB, 1, True, HB_LEAVE, HB_LEAVE_V1),
    # The empty request: every field at its default.
    Golden(
        "hb-defaults",
        HB,
        0,
        True,
        ConsumerGroupHeartbeatRequest(),
        h("01 01 00000000 00 00 ffffffff 00 00 00 00"),
    ),
    Golden(
        "hb-defaults",
        HB,
        1,
        True,
        ConsumerGroupHeartbeatRequest(),
        h("01 01 00000000 00 00 ffffffff 00 00 00 00 00"),
    ),
    *(
        Golden(name, HB, v, False, value, data)
        for v in (0, 1)  # the response layout is the same in both versions
        for name, value, data in (
            ("hb-null-assignment", HB_NO_ASSIGNMENT, HB_NO_ASSIGNMENT_WIRE),
            ("hb-empty-assignment", HB_EMPTY_ASSIGNMENT, HB_EMPTY_ASSIGNMENT_WIRE),
            ("hb-assignment", HB_ASSIGNMENT, HB_ASSIGNMENT_WIRE),
            ("hb-fenced", HB_FENCED, HB_FENCED_WIRE),
            (
                "hb-response-defaults",
                ConsumerGroupHeartbeatResponse(),
                h("00000000 0000 00 00 00000000 00000000 ff 00"),
            ),
        )
    ),
    *(
        Golden(name, DESCRIBE, v, True, value, data)
        for v in (0, 1)  # v1 changed only the response
        for name, value, data in (
            ("describe-two", DESCRIBE_TWO, DESCRIBE_TWO_WIRE),
            ("describe-none", DESCRIBE_NONE, DESCRIBE_NONE_WIRE),
        )
    ),
    # MemberType is v1+ and ignorable: in v0 a consumer member's type 1 is dropped silently.
    Golden("describe-groups", DESCRIBE, 0, False, described(1), described_wire(""), decoded=described(-1)),
    Golden("describe-groups", DESCRIBE, 1, False, described(1), described_wire("01")),
    Golden("describe-groups-unknown-type", DESCRIBE, 1, False, described(-1), described_wire("ff")),
    Golden(
        "describe-response-defaults",
        DESCRIBE,
        1,
        False,
        ConsumerGroupDescribeResponse(),
        h("00000000 01 00"),  # ThrottleTimeMs 0, Groups empty, no tags
    ),
    Golden("share-hb-join", SHARE_HB, 1, True, SHARE_HB_JOIN, SHARE_HB_JOIN_V1),
    Golden("share-hb-assigned", SHARE_HB, 1, False, SHARE_HB_ASSIGNED, SHARE_HB_ASSIGNED_WIRE),
    Golden("share-describe", SHARE_DESCRIBE, 1, True, SHARE_DESCRIBE_REQ, SHARE_DESCRIBE_REQ_WIRE),
    Golden("share-described", SHARE_DESCRIBE, 1, False, SHARE_DESCRIBED, SHARE_DESCRIBED_WIRE),
    *(
        Golden("share-offsets", SHARE_OFFSETS_KEY, v, True, SHARE_OFFSETS_REQ, SHARE_OFFSETS_REQ_WIRE)
        for v in (0, 1)
    ),
    Golden("share-offsets", SHARE_OFFSETS_KEY, 1, False, SHARE_OFFSETS_DESCRIBED, share_offsets_wire(1)),
    # Lag is v1+ and ignorable: v0 drops it, and decodes it as its default -1.
    Golden(
        "share-offsets",
        SHARE_OFFSETS_KEY,
        0,
        False,
        SHARE_OFFSETS_DESCRIBED,
        share_offsets_wire(0),
        decoded=replace(
            SHARE_OFFSETS_DESCRIBED,
            groups=[
                replace(
                    SHARE_OFFSETS_DESCRIBED.groups[0],
                    topics=[
                        replace(
                            SHARE_OFFSETS_DESCRIBED.groups[0].topics[0],
                            partitions=[
                                replace(p, lag=-1)
                                for p in SHARE_OFFSETS_DESCRIBED.groups[0].topics[0].partitions
                            ],
                        )
                    ],
                )
            ],
        ),
    ),
    Golden("share-alter", SHARE_ALTER, 0, True, SHARE_ALTER_REQ, SHARE_ALTER_REQ_WIRE),
    Golden("share-altered", SHARE_ALTER, 0, False, SHARE_ALTERED, SHARE_ALTERED_WIRE),
    Golden("share-delete", SHARE_DELETE, 0, True, SHARE_DELETE_REQ, SHARE_DELETE_REQ_WIRE),
    Golden("share-deleted", SHARE_DELETE, 0, False, SHARE_DELETED, SHARE_DELETED_WIRE),
    *(
        Golden("share-fetch", SHARE_FETCH, v, True, share_fetch_request(v), share_fetch_request_wire(v))
        for v in (1, 2)
    ),
    *(Golden("share-fetched", SHARE_FETCH, v, False, SHARE_FETCHED, SHARE_FETCHED_WIRE) for v in (1, 2)),
    *(Golden("share-ack", SHARE_ACK, v, True, SHARE_ACK_REQ, share_ack_request_wire(v)) for v in (1, 2)),
    # AcquisitionLockTimeoutMs is v2+ and ignorable: v1 drops it.
    Golden(
        "share-acked",
        SHARE_ACK,
        1,
        False,
        SHARE_ACKED,
        share_acked_wire(1),
        decoded=replace(SHARE_ACKED, acquisition_lock_timeout_ms=0),
    ),
    Golden("share-acked", SHARE_ACK, 2, False, SHARE_ACKED, share_acked_wire(2)),
]


def golden_id(g: Golden) -> str:
    return f"{g.name}-{'request' if g.request else 'response'}-v{g.version}"


def codecs(g: Golden) -> tuple[Any, Any]:
    decode_request, encode_request, decode_response, encode_response = CODECS[(g.key, g.version)]
    return (decode_request, encode_request) if g.request else (decode_response, encode_response)


def test_golden_cases_cover_every_pair_without_kafka_python() -> None:
    """Every (API, version) without a kafka-python oracle has hand-computed requests and responses."""
    pairs = set(golden_pairs())
    assert pairs == {(ApiKey.CONSUMER_GROUP_HEARTBEAT, v) for v in (0, 1)} | {
        (ApiKey.CONSUMER_GROUP_DESCRIBE, v) for v in (0, 1)
    } | {
        (SHARE_HB, 1),
        (SHARE_DESCRIBE, 1),
        (SHARE_OFFSETS_KEY, 0),
        (SHARE_OFFSETS_KEY, 1),
        (SHARE_ALTER, 0),
        (SHARE_DELETE, 0),
    } | {(k, v) for k in (SHARE_FETCH, SHARE_ACK) for v in (1, 2)}
    for pair in pairs:
        assert pair in FLEXIBLE
        assert any((g.key, g.version) == pair and g.request for g in GOLDEN), pair
        assert any((g.key, g.version) == pair and not g.request for g in GOLDEN), pair


@pytest.mark.parametrize("g", GOLDEN, ids=golden_id)
def test_golden_body(g: Golden) -> None:
    decode, encode = codecs(g)
    out = bytearray()
    encode(g.value, out)
    assert bytes(out) == g.wire
    expected = g.value if g.decoded is None else g.decoded
    assert decode(g.wire, 0) == (expected, len(g.wire))
    assert decode(b"\x55\x55" + g.wire + b"\x66", 2) == (expected, 2 + len(g.wire))


@pytest.mark.parametrize("g", GOLDEN, ids=golden_id)
def test_golden_frame(g: Golden) -> None:
    expected = g.value if g.decoded is None else g.decoded
    if g.request:
        header = h(
            f"{int(g.key):04x}",  # request header v2: RequestApiKey 68 / 69
            f"{g.version:04x}",  # RequestApiVersion
            "0000002a",  # CorrelationId 42
            "0001" + s("c"),  # ClientId "c": int16 length (never compact), then the bytes
            "00",  # tagged fields
        )
        frame = wire.encode_request(g.key, g.version, 42, "c", g.value)
        assert frame == len(header + g.wire).to_bytes(4, "big") + header + g.wire
        request = wire.decode_request(frame[4:])
        assert (request.api_key, request.api_version, request.correlation_id) == (g.key, g.version, 42)
        assert (request.client_id, request.body) == ("c", expected)
    else:
        header = h("0000002a", "00")  # response header v1: CorrelationId 42, tagged fields
        frame = wire.encode_response(g.key, g.version, 42, g.value)
        assert frame == len(header + g.wire).to_bytes(4, "big") + header + g.wire
        assert wire.decode_response(g.key, g.version, frame[4:]) == (42, expected)


def test_subscribed_topic_regex_is_not_ignorable_in_v0() -> None:
    """SubscribedTopicRegex is v1+ and not ignorable: a v0 request cannot carry one (Kafka refuses too)."""
    encode = CODECS[(HB, 0)][1]
    with pytest.raises(ValueError, match="SubscribedTopicRegex at version 0"):
        encode(HB_JOIN_REGEX, bytearray())
    out = bytearray()
    encode(replace(HB_JOIN_REGEX, subscribed_topic_regex=None), out)  # null is its default
    assert bytes(out) == HB_JOIN_V0


@pytest.mark.parametrize("member_type", [-1, 0, 1, 127])
def test_member_type_is_dropped_in_v0(member_type: int) -> None:
    out = bytearray()
    CODECS[(DESCRIBE, 0)][3](described(member_type), out)
    assert bytes(out) == described_wire("")


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("marker", [0x00, 0x02, 0x7F, 0x80, 0xFE])
def test_nullable_struct_rejects_other_markers(version: int, marker: int) -> None:
    """Only -1 (null) and 1 (present) are valid presence markers."""
    decode = CODECS[(HB, version)][2]
    for valid in (HB_NO_ASSIGNMENT_WIRE, HB_EMPTY_ASSIGNMENT_WIRE):
        position = len(h(HB_RESPONSE_HEAD))
        bad = valid[:position] + bytes([marker]) + valid[position + 1 :]
        with pytest.raises(DecodeError, match="presence marker"):
            decode(bad, 0)


def test_unknown_tags_inside_the_nullable_struct_are_skipped() -> None:
    data = h(
        HB_RESPONSE_HEAD,
        "01",  # Assignment: present
        "01",  # Assignment.TopicPartitions: empty
        "02",  # Assignment's tagged fields: 2
        "05 02" + s("zz"),  # tag 5, 2 bytes
        "9003 01 ff",  # tag 400 (uvarint 0x90 0x03), 1 byte
        "00",  # tagged fields
    )
    for version in (0, 1):
        assert CODECS[(HB, version)][2](data, 0) == (HB_EMPTY_ASSIGNMENT, len(data))


def test_a_nullable_struct_cut_short_is_rejected() -> None:
    for version in (0, 1):
        for data in (HB_NO_ASSIGNMENT_WIRE, HB_ASSIGNMENT_WIRE):
            for n in range(len(data)):
                with pytest.raises(DecodeError):
                    wire.decode_response(HB, version, h("0000002a", "00") + data[:n])


def test_defaults() -> None:
    """Class defaults follow our spec table (what Kafka's generated classes start from)."""
    assert ConsumerGroupHeartbeatRequest() == ConsumerGroupHeartbeatRequest(
        group_id="",
        member_id="",
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=-1,
        subscribed_topic_names=None,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=None,
    )
    assert ConsumerGroupHeartbeatResponse() == ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        member_id=None,
        member_epoch=0,
        heartbeat_interval_ms=0,
        assignment=None,
    )
    assert Assignment() == Assignment(topic_partitions=[])
    assert TopicPartitions() == TopicPartitions(topic_id=bytes(16), partitions=[])
    assert ConsumerGroupDescribeRequest() == ConsumerGroupDescribeRequest(
        group_ids=[], include_authorized_operations=False
    )
    assert ConsumerGroupDescribeResponse() == ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[])
    assert DescribedGroup() == DescribedGroup(
        error_code=0,
        error_message=None,
        group_id="",
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
        authorized_operations=-(2**31),
    )
    assert Member() == Member(
        member_id="",
        instance_id=None,
        rack_id=None,
        member_epoch=0,
        client_id="",
        client_host="",
        subscribed_topic_names=[],
        subscribed_topic_regex=None,
        assignment=DescribeAssignment([]),
        target_assignment=DescribeAssignment([]),
        member_type=-1,
    )
    assert DescribeTopicPartitions() == DescribeTopicPartitions(
        topic_id=bytes(16), topic_name="", partitions=[]
    )
    # Fresh mutable defaults, not shared between instances.
    assert Member().assignment is not Member().assignment


@pytest.mark.parametrize("pair", golden_pairs(), ids=pair_id)
def test_golden_pairs_are_in_the_codec_table(pair: tuple[ApiKey, int]) -> None:
    assert pair in CODECS
