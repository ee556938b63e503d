"""What consumer groups answer: ConsumerGroupHeartbeat responses and the refusals that become them."""

from __future__ import annotations

from coordinator.core.errors import NONE
from protocol.messages import consumer_group_heartbeat as cgh


class Rejected(Exception):
    """A request refused with a Kafka error code (and a message where the API carries one)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(code: int, message: str | None = None) -> cgh.ConsumerGroupHeartbeatResponse:
    return cgh.ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)


def heartbeat_response(
    member_id: str, epoch: int, interval_ms: int, assignment: list[tuple[bytes, list[int]]] | None
) -> cgh.ConsumerGroupHeartbeatResponse:
    return cgh.ConsumerGroupHeartbeatResponse(
        error_code=NONE,
        member_id=member_id,
        member_epoch=epoch,
        heartbeat_interval_ms=interval_ms,
        assignment=None
        if assignment is None
        else cgh.Assignment(
            topic_partitions=[
                cgh.TopicPartitions(topic_id=tid, partitions=parts) for tid, parts in assignment
            ]
        ),
    )
