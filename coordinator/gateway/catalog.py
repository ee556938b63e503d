"""The topic catalog in gateway mode: a view of upstream metadata.

Consumer groups assign from it (KIP-848 assignment, regex subscriptions, partition growth), and
OffsetCommit checks partitions against it. It is fed by the periodic metadata refresh and by
every Metadata response forwarded to a client, so a topic a client has just seen is known to
the groups at once. The version changes only when a topic's id or partition count changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataResponseTopic
from storage.records import TopicRecord


class UpstreamCatalog:
    def __init__(self) -> None:
        self._topics: dict[str, TopicRecord] = {}
        self._by_id: dict[bytes, TopicRecord] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.version = 0

    # ---- TopicCatalog (read by the group core) and the API layer --------------------------
    @property
    def topics(self) -> Mapping[str, TopicRecord]:
        return self._topics

    def topic_by_id(self, topic_id: bytes) -> TopicRecord | None:
        return self._by_id.get(topic_id)

    def partitions_of(self, topic: str) -> int | None:
        record = self._topics.get(topic)
        return record.num_partitions if record is not None else None

    def has_partition(self, topic: str, partition: int) -> bool:
        record = self._topics.get(topic)
        return record is not None and 0 <= partition < record.num_partitions

    # ---- updates ---------------------------------------------------------------------------
    def replace_all(self, topics: Iterable[MetadataResponseTopic]) -> None:
        """A full metadata answer (all topics): topics missing from it are gone upstream."""
        seen = self.observe(topics)
        for name in [name for name in self._topics if name not in seen]:
            self._remove(name)

    def observe(self, topics: Iterable[MetadataResponseTopic]) -> set[str]:
        """Topics of any metadata answer: known ones are updated, unknown ones removed."""
        seen: set[str] = set()
        for topic in topics:
            name = topic.name
            if not name:
                continue
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                self._remove(name)
                continue
            if topic.error_code != ErrorCode.NONE or topic.is_internal or not topic.partitions:
                continue  # e.g. LEADER_NOT_AVAILABLE while being created: keep what we knew
            seen.add(name)
            for partition in topic.partitions:
                self.leaders[(name, partition.partition_index)] = partition.leader_id
            count = max(p.partition_index for p in topic.partitions) + 1
            old = self._topics.get(name)
            if old is not None and old.topic_id == topic.topic_id and old.num_partitions >= count:
                continue
            if old is not None:
                self._by_id.pop(old.topic_id, None)
            record = TopicRecord(name, topic.topic_id, count, len(topic.partitions[0].replica_nodes), ())
            self._topics[name] = record
            if any(topic.topic_id):
                self._by_id[topic.topic_id] = record
            self.version += 1
        return seen

    def _remove(self, name: str) -> None:
        old = self._topics.pop(name, None)
        if old is None:
            return
        self._by_id.pop(old.topic_id, None)
        for key in [key for key in self.leaders if key[0] == name]:
            del self.leaders[key]
        self.version += 1
