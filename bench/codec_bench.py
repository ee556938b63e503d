"""Codec micro-benchmark: our generated codecs against kafka-python 3.x's classes.

Server-side work per operation: decode a request frame (header + body) and build + encode the
response (header + body + length prefix). Both libraries run interleaved in one process,
several rounds; we report the median operations per second and the ratio ours / kafka-python.

    .venv/bin/python bench/codec_bench.py [--rounds 7] [--seconds 0.5]

With ``--baseline REV`` it compares instead our codecs as generated at git revision REV with the
ones in the working tree (the same operations on body bytes, interleaved, median of --rounds):
how a regeneration (e.g. a new Kafka spec set) changed their speed.

    .venv/bin/python bench/codec_bench.py --baseline a80e9e0~1 --rounds 3
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka.protocol.consumer.group import (
    HeartbeatRequest as KpHeartbeatRequest,
)
from kafka.protocol.consumer.group import (
    HeartbeatResponse as KpHeartbeatResponse,
)
from kafka.protocol.consumer.group import (
    JoinGroupRequest as KpJoinGroupRequest,
)
from kafka.protocol.consumer.group import (
    JoinGroupResponse as KpJoinGroupResponse,
)
from kafka.protocol.consumer.group import (
    OffsetCommitRequest as KpOffsetCommitRequest,
)
from kafka.protocol.consumer.group import (
    OffsetCommitResponse as KpOffsetCommitResponse,
)

from protocol.apis import ApiKey
from protocol.messages.heartbeat import HeartbeatResponse
from protocol.messages.join_group import JoinGroupResponse, JoinGroupResponseMember
from protocol.messages.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from protocol.wire import decode_request, encode_response

CLIENT_ID = "consumer-billing-1234"
MEMBER_ID = "consumer-billing-1234-5f0c3a8e-8d0b-4f1e-9d7a-2f6a7c1b9e55"
METADATA = bytes(range(90))


def _kp_nested(cls: Any, name: str) -> Any:
    return cls.__dict__[name]


def join_group_frames() -> tuple[bytes, Callable[[], bytes], Callable[[bytes], bytes]]:
    protocol = _kp_nested(KpJoinGroupRequest, "JoinGroupRequestProtocol")
    request = KpJoinGroupRequest[9](
        group_id="billing",
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id=MEMBER_ID,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[
            protocol(name="range", metadata=METADATA),
            protocol(name="cooperative-sticky", metadata=METADATA),
        ],
        reason="",
    )
    request.with_header(correlation_id=7, client_id=CLIENT_ID)
    frame = bytes(request.encode(header=True))

    def ours() -> bytes:
        req = decode_request(frame)
        body = req.body
        response = JoinGroupResponse(
            generation_id=3,
            protocol_type="consumer",
            protocol_name=body.protocols[0].name,
            leader=body.member_id,
            member_id=body.member_id,
            members=[JoinGroupResponseMember(body.member_id, None, body.protocols[0].metadata)],
        )
        return encode_response(ApiKey.JOIN_GROUP, 9, req.correlation_id, response)

    member = _kp_nested(KpJoinGroupResponse, "JoinGroupResponseMember")

    def theirs(data: bytes) -> bytes:
        req = KpJoinGroupRequest[9].decode(data, header=True)
        response = KpJoinGroupResponse[9](
            throttle_time_ms=0,
            error_code=0,
            generation_id=3,
            protocol_type="consumer",
            protocol_name=req.protocols[0].name,
            leader=req.member_id,
            skip_assignment=False,
            member_id=req.member_id,
            members=[
                member(member_id=req.member_id, group_instance_id=None, metadata=req.protocols[0].metadata)
            ],
        )
        response.with_header(correlation_id=req.header.correlation_id)
        return bytes(response.encode(header=True, framed=True))

    return frame, ours, lambda: theirs(frame)


def offset_commit_frames() -> tuple[bytes, Callable[[], bytes], Callable[[], bytes]]:
    topic_cls = _kp_nested(KpOffsetCommitRequest, "OffsetCommitRequestTopic")
    partition_cls = topic_cls.__dict__["OffsetCommitRequestPartition"]
    topics = [
        topic_cls(
            name=f"topic-{t}",
            partitions=[
                partition_cls(
                    partition_index=p,
                    committed_offset=1000 + p,
                    committed_leader_epoch=5,
                    committed_metadata="",
                )
                for p in range(20)
            ],
        )
        for t in range(5)
    ]
    request = KpOffsetCommitRequest[9](
        group_id="billing",
        generation_id_or_member_epoch=3,
        member_id=MEMBER_ID,
        group_instance_id=None,
        topics=topics,
    )
    request.with_header(correlation_id=7, client_id=CLIENT_ID)
    frame = bytes(request.encode(header=True))

    def ours() -> bytes:
        req = decode_request(frame)
        response = OffsetCommitResponse(
            topics=[
                OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=[OffsetCommitResponsePartition(p.partition_index, 0) for p in t.partitions],
                )
                for t in req.body.topics
            ]
        )
        return encode_response(ApiKey.OFFSET_COMMIT, 9, req.correlation_id, response)

    rtopic = _kp_nested(KpOffsetCommitResponse, "OffsetCommitResponseTopic")
    rpartition = rtopic.__dict__["OffsetCommitResponsePartition"]

    def theirs() -> bytes:
        req = KpOffsetCommitRequest[9].decode(frame, header=True)
        response = KpOffsetCommitResponse[9](
            throttle_time_ms=0,
            topics=[
                rtopic(
                    name=t.name,
                    partitions=[
                        rpartition(partition_index=p.partition_index, error_code=0) for p in t.partitions
                    ],
                )
                for t in req.topics
            ],
        )
        response.with_header(correlation_id=req.header.correlation_id)
        return bytes(response.encode(header=True, framed=True))

    return frame, ours, theirs


def heartbeat_frames() -> tuple[bytes, Callable[[], bytes], Callable[[], bytes]]:
    request = KpHeartbeatRequest[4](
        group_id="billing", generation_id=3, member_id=MEMBER_ID, group_instance_id=None
    )
    request.with_header(correlation_id=7, client_id=CLIENT_ID)
    frame = bytes(request.encode(header=True))

    def ours() -> bytes:
        req = decode_request(frame)
        return encode_response(ApiKey.HEARTBEAT, 4, req.correlation_id, HeartbeatResponse())

    def theirs() -> bytes:
        req = KpHeartbeatRequest[4].decode(frame, header=True)
        response = KpHeartbeatResponse[4](throttle_time_ms=0, error_code=0)
        response.with_header(correlation_id=req.header.correlation_id)
        return bytes(response.encode(header=True, framed=True))

    return frame, ours, theirs


def rate(operation: Callable[[], bytes], seconds: float) -> float:
    count = 0
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        for _ in range(50):
            operation()
        count += 50
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - started)


# ---- one generated codec set against another ---------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def _generated_at(revision: str, module: str) -> types.ModuleType:
    """protocol/messages/<module>.py as committed at ``revision``, loaded as a fresh module."""
    source = subprocess.run(
        ["git", "show", f"{revision}:protocol/messages/{module}.py"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    loaded = types.ModuleType(f"baseline_{module}")
    sys.modules[loaded.__name__] = loaded  # dataclasses look their module up there
    exec(compile(source, f"{revision}:{module}.py", "exec"), loaded.__dict__)
    return loaded


def _request_body(module: types.ModuleType, name: str, version: int, request: Any) -> bytes:
    out = bytearray()
    getattr(module, f"encode_{name}_request_v{version}")(request, out)
    return bytes(out)


def _codec_op(
    module: types.ModuleType,
    name: str,
    version: int,
    body: bytes,
    respond: Callable[[types.ModuleType, Any], Any],
) -> Callable[[], bytes]:
    decode = getattr(module, f"decode_{name}_request_v{version}")
    encode = getattr(module, f"encode_{name}_response_v{version}")

    def op() -> bytes:
        request, _ = decode(body, 0)
        out = bytearray()
        encode(respond(module, request), out)
        return bytes(out)

    return op


def _commit_request(m: types.ModuleType) -> Any:
    topics = [
        m.OffsetCommitRequestTopic(
            name=f"topic-{t}",
            partitions=[
                m.OffsetCommitRequestPartition(
                    partition_index=p,
                    committed_offset=1000 + p,
                    committed_leader_epoch=5,
                    committed_metadata="",
                )
                for p in range(20)
            ],
        )
        for t in range(5)
    ]
    return m.OffsetCommitRequest(
        group_id="billing", generation_id_or_member_epoch=3, member_id=MEMBER_ID, topics=topics
    )


def _commit_response(m: types.ModuleType, req: Any) -> Any:
    return m.OffsetCommitResponse(
        topics=[
            m.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[m.OffsetCommitResponsePartition(p.partition_index, 0) for p in t.partitions],
            )
            for t in req.topics
        ]
    )


def _fetch_request(m: types.ModuleType) -> Any:
    topics = [
        m.OffsetFetchRequestTopics(name=f"topic-{t}", partition_indexes=list(range(20))) for t in range(5)
    ]
    return m.OffsetFetchRequest(groups=[m.OffsetFetchRequestGroup(group_id="billing", topics=topics)])


def _fetch_response(m: types.ModuleType, req: Any) -> Any:
    groups = [
        m.OffsetFetchResponseGroup(
            group_id=g.group_id,
            topics=[
                m.OffsetFetchResponseTopics(
                    name=t.name,
                    partitions=[
                        m.OffsetFetchResponsePartitions(p, 1000 + p, 5, "", 0) for p in t.partition_indexes
                    ],
                )
                for t in g.topics
            ],
        )
        for g in req.groups
    ]
    return m.OffsetFetchResponse(groups=groups)


def _join_request(m: types.ModuleType) -> Any:
    protocols = [m.JoinGroupRequestProtocol(n, METADATA) for n in ("range", "cooperative-sticky")]
    return m.JoinGroupRequest("billing", 45000, 300000, MEMBER_ID, None, "consumer", protocols, "")


def _join_response(m: types.ModuleType, req: Any) -> Any:
    first = req.protocols[0]
    member = m.JoinGroupResponseMember(req.member_id, None, first.metadata)
    return m.JoinGroupResponse(
        generation_id=3, protocol_type="consumer", protocol_name=first.name, leader=req.member_id,
        member_id=req.member_id, members=[member],
    )  # fmt: skip


def _api_versions_response(m: types.ModuleType, _req: Any) -> Any:
    return m.ApiVersionsResponse(api_keys=[m.ApiVersion(k, 0, 9) for k in range(40)])


# label -> (module, message name, version, request builder, response builder)
REGENERATED_CASES: dict[str, tuple[str, str, int, Callable[..., Any], Callable[..., Any]]] = {
    "Heartbeat v4": (
        "heartbeat", "heartbeat", 4,
        lambda m: m.HeartbeatRequest("billing", 3, MEMBER_ID, None),
        lambda m, _req: m.HeartbeatResponse(),
    ),
    "JoinGroup v9 (2 protocols, leader reply)": ("join_group", "join_group", 9, _join_request, _join_response),
    "OffsetCommit v9 (5 topics x 20 partitions)": (
        "offset_commit", "offset_commit", 9, _commit_request, _commit_response,
    ),
    "OffsetFetch v8 (5 topics x 20 partitions)": ("offset_fetch", "offset_fetch", 8, _fetch_request, _fetch_response),
    "ApiVersions v3 (40 APIs)": (
        "api_versions", "api_versions", 3,
        lambda m: m.ApiVersionsRequest("bench", "1"),
        _api_versions_response,
    ),
}  # fmt: skip


def compare_with_revision(revision: str, rounds: int, seconds: float) -> None:
    print(
        f"codecs generated at {revision} against the working tree (decode request body + encode response body)"
    )
    print(f"{'operation':46} {'before/s':>10} {'after/s':>10} {'after/before':>13}")
    for label, (module_name, name, version, build_request, respond) in REGENERATED_CASES.items():
        before = _generated_at(revision, module_name)
        after = importlib.import_module(f"protocol.messages.{module_name}")
        body = _request_body(after, name, version, build_request(after))
        assert body == _request_body(before, name, version, build_request(before)), label
        old, new = (
            _codec_op(before, name, version, body, respond),
            _codec_op(after, name, version, body, respond),
        )
        assert old() == new(), f"{label}: the two code sets disagree on the response bytes"
        old_rates, new_rates, ratios = [], [], []
        for _ in range(rounds):  # interleaved, so machine noise hits both
            a, b = rate(old, seconds), rate(new, seconds)
            old_rates.append(a)
            new_rates.append(b)
            ratios.append(b / a)
        print(
            f"{label:46} {statistics.median(old_rates):10.0f} {statistics.median(new_rates):10.0f} "
            f"{statistics.median(ratios):12.2f}x  (min {min(ratios):.2f} max {max(ratios):.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.5, help="per measurement")
    parser.add_argument("--baseline", metavar="REV", help="compare our codecs generated at git revision REV")
    args = parser.parse_args()
    if args.baseline:
        compare_with_revision(args.baseline, args.rounds, args.seconds)
        return
    cases = {
        "Heartbeat v4": heartbeat_frames(),
        "JoinGroup v9 (2 protocols, leader reply)": join_group_frames(),
        "OffsetCommit v9 (5 topics x 20 partitions)": offset_commit_frames(),
    }
    print(
        f"{'operation (decode request + encode response)':46} {'ours/s':>10} {'kafka-python/s':>15} {'ratio':>7}"
    )
    for name, (_frame, ours, theirs) in cases.items():
        assert ours() == theirs(), f"{name}: the two libraries disagree on the response bytes"
        ours_rates, theirs_rates, ratios = [], [], []
        for _ in range(args.rounds):  # interleaved, so machine noise hits both
            a = rate(ours, args.seconds)
            b = rate(theirs, args.seconds)
            ours_rates.append(a)
            theirs_rates.append(b)
            ratios.append(a / b)
        print(
            f"{name:46} {statistics.median(ours_rates):10.0f} {statistics.median(theirs_rates):15.0f} "
            f"{statistics.median(ratios):6.1f}x  (ratio min {min(ratios):.1f} max {max(ratios):.1f})"
        )


if __name__ == "__main__":
    main()
