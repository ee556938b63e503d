"""Golden byte vectors for the Go load generator's hand-written codecs.

Encodes fixed requests and responses with the project's generated codecs
(``protocol.wire``) and writes them to ``bench/loadgen/testdata/golden.json``; ``go test`` in
``bench/loadgen`` encodes the same requests by hand and compares bytes, and decodes the
responses and compares fields. The inputs here and in ``proto_test.go`` must agree.

    .venv/bin/python bench/golden.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol.messages import (  # noqa: E402
    api_versions as av,
)
from protocol.messages import (  # noqa: E402
    create_topics as ct,
)
from protocol.messages import (  # noqa: E402
    find_coordinator as fc,
)
from protocol.messages import (  # noqa: E402
    heartbeat as hb,
)
from protocol.messages import (  # noqa: E402
    join_group as jg,
)
from protocol.messages import (  # noqa: E402
    leave_group as lg,
)
from protocol.messages import (  # noqa: E402
    offset_commit as oc,
)
from protocol.messages import (  # noqa: E402
    offset_fetch as of,
)
from protocol.messages import (  # noqa: E402
    sync_group as sg,
)
from protocol.wire import encode_request, encode_response  # noqa: E402

OUT = Path(__file__).resolve().parent / "loadgen" / "testdata" / "golden.json"

CLIENT = "bench-client"
GROUP = "group-1"
MEMBER = "member-1-0123456789abcdef"
OTHER = "member-2-fedcba9876543210"
TOPIC = "topic-a"
METADATA = bytes(range(20))
ASSIGNMENT = bytes(range(7, 19))


def requests() -> dict[str, bytes]:
    protocols = [jg.JoinGroupRequestProtocol("range", METADATA), jg.JoinGroupRequestProtocol("sticky", b"")]
    assignments = [
        sg.SyncGroupRequestAssignment(MEMBER, ASSIGNMENT),
        sg.SyncGroupRequestAssignment(OTHER, b""),
    ]
    commit_topics = [
        oc.OffsetCommitRequestTopic(
            name=TOPIC,
            partitions=[oc.OffsetCommitRequestPartition(p, 1000 + p, -1, -1, "") for p in (0, 1, 2)],
        )
    ]
    out = {
        "api_versions_v3": encode_request(18, 3, 7, CLIENT, av.ApiVersionsRequest("kgbench-loadgen", "0.1")),
        "find_coordinator_v3": encode_request(
            10, 3, 8, CLIENT, fc.FindCoordinatorRequest(key=GROUP, key_type=0)
        ),
        "find_coordinator_v4": encode_request(
            10, 4, 9, CLIENT, fc.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP])
        ),
    }
    for version in (5, 9):
        for member in ("", MEMBER):
            name = f"join_group_v{version}_{'new' if not member else 'known'}"
            out[name] = encode_request(
                11,
                version,
                10,
                CLIENT,
                jg.JoinGroupRequest(GROUP, 45000, 60000, member, None, "consumer", protocols, None),
            )
    for version in (3, 5):
        extra: dict[str, Any] = {}
        if version >= 5:
            extra = {"protocol_type": "consumer", "protocol_name": "range"}
        out[f"sync_group_v{version}"] = encode_request(
            14,
            version,
            11,
            CLIENT,
            sg.SyncGroupRequest(GROUP, 3, MEMBER, None, assignments=assignments, **extra),
        )
    for version in (3, 4):
        out[f"heartbeat_v{version}"] = encode_request(
            12, version, 12, CLIENT, hb.HeartbeatRequest(GROUP, 3, MEMBER, None)
        )
    out["leave_group_v3"] = encode_request(
        13,
        3,
        13,
        CLIENT,
        lg.LeaveGroupRequest(
            GROUP, members=[lg.MemberIdentity(MEMBER, None), lg.MemberIdentity(OTHER, None)]
        ),
    )
    out["offset_commit_v8"] = encode_request(
        8, 8, 14, CLIENT, oc.OffsetCommitRequest(GROUP, 3, MEMBER, None, topics=commit_topics)
    )
    out["offset_commit_v8_simple"] = encode_request(
        8, 8, 15, CLIENT, oc.OffsetCommitRequest(GROUP, -1, "", None, topics=commit_topics)
    )
    out["offset_fetch_v8"] = encode_request(
        9,
        8,
        16,
        CLIENT,
        of.OffsetFetchRequest(
            groups=[
                of.OffsetFetchRequestGroup(
                    GROUP, topics=[of.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0, 1, 2])]
                )
            ],
            require_stable=False,
        ),
    )
    out["create_topics_v5"] = encode_request(
        19, 5, 17, CLIENT, ct.CreateTopicsRequest([ct.CreatableTopic(TOPIC, 100, 1, [], [])], 30000, False)
    )
    return out


def responses() -> dict[str, bytes]:
    members = [
        jg.JoinGroupResponseMember(MEMBER, None, METADATA),
        jg.JoinGroupResponseMember(OTHER, None, b""),
    ]
    out = {
        "api_versions_v3": encode_response(
            18, 3, 7, av.ApiVersionsResponse(0, [av.ApiVersion(11, 0, 9), av.ApiVersion(12, 0, 4)], 0)
        ),
        "find_coordinator_v3": encode_response(
            10, 3, 8, fc.FindCoordinatorResponse(0, 0, None, 5, "127.0.0.1", 9092)
        ),
        "find_coordinator_v4": encode_response(
            10,
            4,
            9,
            fc.FindCoordinatorResponse(
                coordinators=[fc.Coordinator(GROUP, 5, "127.0.0.1", 9092, 0, None)],
            ),
        ),
        "join_group_v5_leader": encode_response(
            11, 5, 10, jg.JoinGroupResponse(0, 0, 3, None, "range", MEMBER, False, MEMBER, members)
        ),
        "join_group_v9_leader": encode_response(
            11, 9, 10, jg.JoinGroupResponse(0, 0, 3, "consumer", "range", MEMBER, False, MEMBER, members)
        ),
        "join_group_v9_required": encode_response(
            11, 9, 10, jg.JoinGroupResponse(0, 79, -1, None, None, "", False, MEMBER, [])
        ),
        "sync_group_v3": encode_response(14, 3, 11, sg.SyncGroupResponse(0, 0, None, None, ASSIGNMENT)),
        "sync_group_v5": encode_response(
            14, 5, 11, sg.SyncGroupResponse(0, 0, "consumer", "range", ASSIGNMENT)
        ),
        "heartbeat_v3": encode_response(12, 3, 12, hb.HeartbeatResponse(0, 27)),
        "heartbeat_v4": encode_response(12, 4, 12, hb.HeartbeatResponse(0, 27)),
        "leave_group_v3": encode_response(
            13,
            3,
            13,
            lg.LeaveGroupResponse(
                0, 0, [lg.MemberResponse(MEMBER, None, 0), lg.MemberResponse(OTHER, None, 25)]
            ),
        ),
        "offset_commit_v8": encode_response(
            8,
            8,
            14,
            oc.OffsetCommitResponse(
                0,
                [
                    oc.OffsetCommitResponseTopic(
                        name=TOPIC,
                        partitions=[
                            oc.OffsetCommitResponsePartition(p, 3 if p == 2 else 0) for p in (0, 1, 2)
                        ],
                    )
                ],
            ),
        ),
        "offset_fetch_v8": encode_response(
            9,
            8,
            16,
            of.OffsetFetchResponse(
                groups=[
                    of.OffsetFetchResponseGroup(
                        GROUP,
                        [
                            of.OffsetFetchResponseTopics(
                                name=TOPIC,
                                partitions=[
                                    of.OffsetFetchResponsePartitions(p, 1000 + p, -1, "", 0)
                                    for p in (0, 1, 2)
                                ],
                            )
                        ],
                        0,
                    )
                ]
            ),
        ),
        "create_topics_v5": encode_response(
            19,
            5,
            17,
            ct.CreateTopicsResponse(
                0, [ct.CreatableTopicResult(name=TOPIC, error_code=36, error_message="exists", configs=None)]
            ),
        ),
    }
    return out


def main() -> None:
    data = {
        "requests": {name: frame.hex() for name, frame in requests().items()},
        "responses": {name: frame.hex() for name, frame in responses().items()},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(data['requests'])} requests and {len(data['responses'])} responses to {OUT}")


if __name__ == "__main__":
    main()
