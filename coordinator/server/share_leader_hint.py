"""The answer of a node that does not hold a share group's shard to ShareFetch and
ShareAcknowledge: NOT_LEADER_OR_FOLLOWER on every partition, with the holder as the partition's
current leader and its endpoint, the way Kafka sends share consumers to a partition's new leader
(docs/share-groups.md, "Several nodes").

The leader epoch is the shard's lease epoch: it grows with every change of owner, and Kafka's
share consumer replaces the leader it fetches a partition from only with a hint of a higher epoch
than the one it knows (Metadata answers epoch 0, the first lease is epoch 1).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from coordinator.core.shard_map import NodeAddress
from coordinator.server.share_sessions import TopicIdPartition
from protocol.errors import ErrorCode
from protocol.messages import share_acknowledge as sak
from protocol.messages import share_fetch as sf

NO_LEADER: Final = -1


@dataclass(frozen=True, slots=True)
class LeaderHint:
    """The node holding the group's shard (None while nobody does) and the shard's lease epoch."""

    owner: NodeAddress | None
    epoch: int

    @property
    def message(self) -> str:
        if self.owner is None:
            return "the share group's coordinator shard has no live owner yet"
        return f"the share group's share-partitions are led by node {self.owner.node_id}"

    def _leader(self) -> tuple[int, int]:
        if self.owner is None:  # the client falls back to Metadata and tries again
            return NO_LEADER, NO_LEADER
        return self.owner.node_id, self.epoch

    def share_fetch(
        self, partitions: Sequence[TopicIdPartition], acknowledged: Collection[TopicIdPartition]
    ) -> sf.ShareFetchResponse:
        """The session's partitions and those with acknowledgements (not applied here)."""
        leader_id, epoch = self._leader()
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        by_topic: dict[bytes, list[sf.PartitionData]] = {}
        for tp in partitions:
            by_topic.setdefault(tp[0], []).append(
                sf.PartitionData(
                    partition_index=tp[1],
                    error_code=code,
                    error_message=self.message,
                    acknowledge_error_code=code if tp in acknowledged else ErrorCode.NONE,
                    current_leader=sf.LeaderIdAndEpoch(leader_id, epoch),
                )
            )
        endpoints = (
            [sf.NodeEndpoint(self.owner.node_id, self.owner.host, self.owner.port, None)]
            if self.owner is not None
            else []
        )
        return sf.ShareFetchResponse(
            responses=[sf.ShareFetchableTopicResponse(t, parts) for t, parts in by_topic.items()],
            node_endpoints=endpoints,
        )

    def share_acknowledge(self, req: sak.ShareAcknowledgeRequest) -> sak.ShareAcknowledgeResponse:
        leader_id, epoch = self._leader()
        topics = [
            sak.ShareAcknowledgeTopicResponse(
                topic_id=topic.topic_id,
                partitions=[
                    sak.PartitionData(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        error_message=self.message,
                        current_leader=sak.LeaderIdAndEpoch(leader_id, epoch),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in req.topics
        ]
        endpoints = (
            [sak.NodeEndpoint(self.owner.node_id, self.owner.host, self.owner.port, None)]
            if self.owner is not None
            else []
        )
        return sak.ShareAcknowledgeResponse(responses=topics, node_endpoints=endpoints)


def leader_hint(owner: NodeAddress | None, epoch: int) -> LeaderHint:
    return LeaderHint(owner, epoch)
