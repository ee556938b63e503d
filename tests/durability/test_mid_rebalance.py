"""A restart in the middle of a rebalance (docs/groups.md#loading: a rebalance in flight is lost).

Member A forms generation 1 (Stable, persisted with its assignment) and commits offsets. Then
member B joins: the group goes PreparingRebalance (A has not rejoined yet) or, once A rejoins,
CompletingRebalance at generation 2 with B's SyncGroup parked and the leader's SyncGroup never
sent. The server stops (SIGTERM or SIGKILL) and starts again on the same storage and port. The
group must come back Stable at generation 1 with A and A's assignment: generation 2 and B are
gone, A keeps heartbeating and committing at generation 1, and a new rebalance works.
"""

from __future__ import annotations

import signal
import struct
from pathlib import Path
from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartition,
    encode_consumer_protocol_assignment_v0,
    encode_consumer_protocol_subscription_v0,
)
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.durability.support import (
    ILLEGAL_GENERATION,
    MEMBER_ID_REQUIRED,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    PipelinedClient,
    Servers,
    commit,
    create_topics,
    describe,
    fetch,
)
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

GROUP, TOPIC = "mid-rebalance", "mr"
JOIN_V, SYNC_V, HEARTBEAT_V = 5, 5, 4


def subscription() -> bytes:
    out = bytearray(struct.pack(">h", 0))
    encode_consumer_protocol_subscription_v0(ConsumerProtocolSubscription(topics=[TOPIC]), out)
    return bytes(out)


def assignment(partitions: list[int]) -> bytes:
    out = bytearray(struct.pack(">h", 0))
    encode_consumer_protocol_assignment_v0(
        ConsumerProtocolAssignment(assigned_partitions=[TopicPartition(TOPIC, partitions)]), out
    )
    return bytes(out)


def join_request(member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=20_000,
        rebalance_timeout_ms=20_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", subscription())],
    )


def new_member_id(client: WireClient) -> str:
    """JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED hands one out."""
    response = client.request(ApiKey.JOIN_GROUP, JOIN_V, join_request(""))
    assert response.error_code == MEMBER_ID_REQUIRED, response
    return str(response.member_id)


def sync_request(
    member_id: str, generation: int, assignments: dict[str, bytes] | None = None
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=GROUP,
        generation_id=generation,
        member_id=member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
    )


def heartbeat(client: WireClient, member_id: str, generation: int) -> int:
    return int(
        client.request(
            ApiKey.HEARTBEAT, HEARTBEAT_V, HeartbeatRequest(GROUP, generation, member_id)
        ).error_code
    )


def answer_or_closed(client: PipelinedClient) -> Any:
    """The parked request's answer, or "closed" when the connection dropped without one."""
    try:
        return client.receive()
    except (ConnectionError, OSError):
        return "closed"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
@pytest.mark.parametrize("stopped_in", ["PreparingRebalance", "CompletingRebalance"])
def test_group_comes_back_at_its_last_persisted_generation(
    coordinators: Servers, tmp_path: Path, stopped_in: str, sig: signal.Signals
) -> None:
    server = coordinators.start(f"sqlite:///{tmp_path / 'mid.db'}")
    create_topics(server.bootstrap, {TOPIC: 4})
    gen1_assignment = assignment([0, 1, 2, 3])
    with WireClient(server.bootstrap, "member-a") as a, PipelinedClient(server.bootstrap, "member-b") as b:
        a_id = new_member_id(a)
        joined = a.request(ApiKey.JOIN_GROUP, JOIN_V, join_request(a_id))
        assert (joined.error_code, joined.generation_id, joined.leader) == (NONE, 1, a_id)
        synced = a.request(ApiKey.SYNC_GROUP, SYNC_V, sync_request(a_id, 1, {a_id: gen1_assignment}))
        assert (synced.error_code, synced.assignment) == (NONE, gen1_assignment)
        assert commit(a, GROUP, {(TOPIC, p): 10 + p for p in range(4)}, generation=1, member_id=a_id) == {
            (TOPIC, p): NONE for p in range(4)
        }

        b_id = new_member_id(b)
        b.send(ApiKey.JOIN_GROUP, JOIN_V, join_request(b_id))  # parked: PreparingRebalance
        assert heartbeat(a, a_id, 1) == REBALANCE_IN_PROGRESS
        if stopped_in == "CompletingRebalance":
            rejoined = a.request(ApiKey.JOIN_GROUP, JOIN_V, join_request(a_id))
            b_joined = b.receive()
            assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (NONE, 2, a_id)
            assert {m.member_id for m in rejoined.members} == {a_id, b_id}
            assert (b_joined.error_code, b_joined.generation_id) == (NONE, 2)
            b.send(ApiKey.SYNC_GROUP, SYNC_V, sync_request(b_id, 2))  # parked until the leader syncs
            assert heartbeat(a, a_id, 2) == NONE  # Kafka accepts heartbeats in CompletingRebalance
        assert describe(a, GROUP).group_state == stopped_in

        server = coordinators.restart(server, sig)
        parked = answer_or_closed(b)
    if sig == signal.SIGTERM:
        # A clean shutdown answers the parked JoinGroup/SyncGroup NOT_COORDINATOR (T9).
        assert getattr(parked, "error_code", parked) == NOT_COORDINATOR, parked
    else:
        assert parked == "closed", parked

    with WireClient(server.bootstrap, "member-a") as a, WireClient(server.bootstrap, "member-b") as b:
        group = describe(a, GROUP)
        assert (group.error_code, group.group_state, group.protocol_data) == (NONE, "Stable", "range")
        assert {m.member_id: m.member_assignment for m in group.members} == {a_id: gen1_assignment}
        # Generation 1 is the group's; generation 2 and member B never happened.
        assert heartbeat(a, a_id, 1) == NONE
        assert heartbeat(a, a_id, 2) == ILLEGAL_GENERATION
        assert heartbeat(b, b_id, 2) == UNKNOWN_MEMBER_ID
        assert a.request(ApiKey.SYNC_GROUP, SYNC_V, sync_request(a_id, 2)).error_code == ILLEGAL_GENERATION
        resynced = a.request(ApiKey.SYNC_GROUP, SYNC_V, sync_request(a_id, 1))
        assert (resynced.error_code, resynced.assignment) == (NONE, gen1_assignment)
        assert fetch(a, GROUP, [(TOPIC, p) for p in range(4)]).offsets == {
            (TOPIC, p): 10 + p for p in range(4)
        }
        assert commit(a, GROUP, {(TOPIC, 0): 20}, generation=1, member_id=a_id) == {(TOPIC, 0): NONE}
        assert commit(a, GROUP, {(TOPIC, 0): 21}, generation=2, member_id=a_id) == {
            (TOPIC, 0): ILLEGAL_GENERATION
        }

    # Members rejoin and a normal rebalance follows, from generation 1.
    with WireClient(server.bootstrap, "member-a") as a, PipelinedClient(server.bootstrap, "member-b") as b:
        assert b.request(ApiKey.JOIN_GROUP, JOIN_V, join_request(b_id)).error_code == UNKNOWN_MEMBER_ID
        b2_id = new_member_id(b)
        b.send(ApiKey.JOIN_GROUP, JOIN_V, join_request(b2_id))
        rejoined = a.request(ApiKey.JOIN_GROUP, JOIN_V, join_request(a_id))
        b_joined = b.receive()
        assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (NONE, 2, a_id)
        assert (b_joined.error_code, b_joined.generation_id) == (NONE, 2)
        plan = {a_id: assignment([0, 1]), b2_id: assignment([2, 3])}
        b.send(ApiKey.SYNC_GROUP, SYNC_V, sync_request(b2_id, 2))
        assert a.request(ApiKey.SYNC_GROUP, SYNC_V, sync_request(a_id, 2, plan)).assignment == plan[a_id]
        assert b.receive().assignment == plan[b2_id]
        assert describe(a, GROUP).group_state == "Stable"
    server.stop()
