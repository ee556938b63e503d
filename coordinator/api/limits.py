"""Per-request limits: how large a request may be before any work is done for it.

One client must not be able to stall the server or poison shared state with a single request.
Every request is measured here before it reaches the core: its frame size per API (before
decoding), the number of elements in its arrays, the lengths of the identifiers it would make
the server store and answer, and the partition counts of topic requests. What is over a limit
is refused: with the API's error where Kafka has one, else by closing the connection with a
log line, as Kafka does for a frame over ``socket.request.max.bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from protocol.apis import ApiKey

# Requests whose payload grows with a group's size (member metadata, assignments, offsets):
# bounded by socket.request.max.bytes only. Every other request carries names and ids and is
# bounded by control_request_max_bytes, so decoding one can never take long.
PAYLOAD_APIS: Final = frozenset(
    {
        ApiKey.PRODUCE,
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.STREAMS_GROUP_HEARTBEAT,
    }
)


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The limits, named after their settings (``request_max_items`` is ``request.max.items``);
    their defaults are the settings table's (``Config().request_limits()``, server/config.py)."""

    # Frame of a request outside PAYLOAD_APIS; over it the connection is closed before decoding.
    control_request_max_bytes: int
    # Array elements of one request, all levels together (groups, topics, partitions, members...).
    request_max_items: int
    # Groups named in one DescribeGroups, ConsumerGroupDescribe, DeleteGroups or OffsetFetch.
    request_max_groups: int
    # Characters of a group id, group instance id, client id or rack id a member brings.
    group_id_max_chars: int
    # Bytes of one JoinGroup protocol's metadata, and of all of a member's protocols together.
    group_member_metadata_max_bytes: int
    # Partitions of one topic (CreateTopics, CreatePartitions), and created by one request.
    topic_max_partitions: int
    request_max_partitions: int

    @property
    def member_id_max_chars(self) -> int:
        # Member ids are "<client id or instance id>-<uuid>": room for the suffix.
        return self.group_id_max_chars + 64

    def frame_limit(self, api_key: int, socket_request_max_bytes: int) -> int:
        if api_key in PAYLOAD_APIS:
            return socket_request_max_bytes
        return min(self.control_request_max_bytes, socket_request_max_bytes)
