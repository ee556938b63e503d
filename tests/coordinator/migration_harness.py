"""A classic consumer on the pure core, for mixed-group tests (docs/migration.md).

It speaks JoinGroup / SyncGroup / Heartbeat like a Java or librdkafka consumer with real
ConsumerProtocol bytes: eager clients give up everything before rejoining, cooperative ones report
what they own and give up only what the new assignment leaves out (then rejoin). As a classic
group's leader it assigns partitions round-robin itself.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from coordinator.core.consumer_protocol import decode_assignment, encode_assignment
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol import (
    ConsumerProtocolSubscription,
    TopicPartition,
    encode_consumer_protocol_subscription_v1,
)
from tests.coordinator.harness import Harness, Reply

REBALANCE_IN_PROGRESS = int(ErrorCode.REBALANCE_IN_PROGRESS)


def subscription_v1(topics: Sequence[str], owned: dict[str, set[int]]) -> bytes:
    out = bytearray(struct.pack(">h", 1))
    message = ConsumerProtocolSubscription(
        topics=list(topics),
        user_data=None,
        owned_partitions=[TopicPartition(t, sorted(ps)) for t, ps in sorted(owned.items()) if ps],
    )
    encode_consumer_protocol_subscription_v1(message, out)
    return bytes(out)


@dataclass
class ClassicClient:
    h: Harness
    name: str
    group: str = "g"
    topics: Sequence[str] = ("t",)
    cooperative: bool = False
    instance_id: str | None = None
    session_timeout_ms: int = 10_000
    member_id: str = ""
    generation: int = -1
    owned: dict[str, set[int]] = field(default_factory=dict)
    partitions_count: int = 6
    last_join: Reply | None = None

    @property
    def protocol(self) -> str:
        return "cooperative-sticky" if self.cooperative else "range"

    def send_join(self) -> Reply:
        """One JoinGroup (v5); the reply may be parked in a classic group's join phase."""
        if not self.cooperative:
            self.owned = {}  # eager: revoke everything before rejoining
        metadata = subscription_v1(self.topics, self.owned if self.cooperative else {})
        reply = self.h.join(
            self.group,
            self.member_id,
            version=5,
            instance_id=self.instance_id,
            session_timeout_ms=self.session_timeout_ms,
            # Cooperative clients also offer range, as a rolling switch of assignor does.
            protocols=[(self.protocol, metadata), *([("range", metadata)] if self.cooperative else [])],
            client_id=self.name,
        )
        if reply.answered and reply.error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = reply.wire.member_id
            return self.send_join()
        self.last_join = reply
        return reply

    def after_join(self, members: Sequence[ClassicClient] = ()) -> Reply:
        """SyncGroup after an answered JoinGroup (as leader, assigning round-robin to ``members``)."""
        reply = self.last_join
        assert reply is not None and reply.answered
        assert reply.error == 0, reply.wire
        wire = reply.wire
        self.member_id, self.generation = wire.member_id, wire.generation_id
        assignments: dict[str, bytes] = {}
        if wire.leader == self.member_id and wire.members:
            ids = sorted(m.member_id for m in wire.members)
            shares: dict[str, dict[str, frozenset[int]]] = {m: {} for m in ids}
            for p in range(self.partitions_count):
                owner = ids[p % len(ids)]
                shares[owner]["t"] = shares[owner].get("t", frozenset()) | {p}
            metadata = subscription_v1(self.topics, {})
            assignments = {m: encode_assignment(shares[m], metadata) for m in ids}
        sync = self.h.sync(
            self.group,
            self.member_id,
            self.generation,
            version=5,
            assignments=assignments,
            instance_id=self.instance_id,
            protocol_name=self.protocol,
        )
        if sync.answered and sync.error == 0:
            assigned = {t: set(ps) for t, ps in decode_assignment(sync.wire.assignment).items()}
            revoked = any(self.owned.get(t, set()) - assigned.get(t, set()) for t in self.owned)
            self.owned = assigned
            if self.cooperative and revoked:
                self.rejoin()  # cooperative: revoked partitions mean another round at once
        return sync

    def rejoin(self) -> None:
        reply = self.send_join()
        if reply.answered:
            self.after_join()

    def beat(self) -> Reply:
        reply = self.h.heartbeat(self.group, self.member_id, self.generation, instance_id=self.instance_id)
        if reply.error == REBALANCE_IN_PROGRESS:
            self.rejoin()
        return reply

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}
