"""Topics and partitions an offsets import needs and the cluster lacks, and creating them
(`--missing-topics create`): CreateTopics for missing topics (the broker's replication factor),
CreatePartitions for topics with too few partitions. Shared by the file and ZooKeeper imports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coordinator.cli.admin.client import TP, AdminClient
from coordinator.cli.admin.errors import KafkaError
from coordinator.cli.admin.output import note
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse

MISSING_POLICIES = ("fail", "skip", "create")


@dataclass
class TopicGap:
    """A topic the target cluster lacks (have == 0) or has too few partitions of."""

    topic: str
    have: int
    need: int

    def covers(self, tp: TP) -> bool:
        return tp.topic == self.topic and tp.partition >= self.have

    def text(self) -> str:
        return (
            f"{self.topic} (missing)"
            if self.have == 0
            else f"{self.topic} (has {self.have} partitions, needs {self.need})"
        )


def catalog_gaps(client: AdminClient, partitions: Iterable[TP]) -> list[TopicGap]:
    need: dict[str, int] = {}
    for tp in partitions:
        need[tp.topic] = max(need.get(tp.topic, 0), tp.partition + 1)
    if not need:
        return []
    meta = client.metadata(sorted(need))
    gaps = []
    for topic, count in sorted(need.items()):
        info = meta.topics.get(topic)
        have = len(info.leaders) if info is not None and info.error_code == ErrorCode.NONE else 0
        if have < count:
            gaps.append(TopicGap(topic, have, count))
    return gaps


def create_missing(client: AdminClient, gaps: list[TopicGap]) -> None:
    conn = client.bootstrap_connection()
    missing = [g for g in gaps if g.have == 0]
    if missing:
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(name=g.topic, num_partitions=g.need, replication_factor=-1) for g in missing
            ],
            timeout_ms=int(client.timeout * 1000),
        )
        created: CreateTopicsResponse = conn.request(ApiKey.CREATE_TOPICS, request)
        for result in created.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                raise KafkaError(
                    result.error_code, f"creating topic {result.name!r}: {result.error_message or ''}"
                )
    grow = [g for g in gaps if g.have > 0]
    if grow:
        request_p = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=g.topic, count=g.need, assignments=None) for g in grow],
            timeout_ms=int(client.timeout * 1000),
        )
        grown: CreatePartitionsResponse = conn.request(ApiKey.CREATE_PARTITIONS, request_p)
        for result_p in grown.results:
            if result_p.error_code != ErrorCode.NONE:
                raise KafkaError(
                    result_p.error_code,
                    f"adding partitions to {result_p.name!r}: {result_p.error_message or ''}",
                )


def settle_missing(
    client: AdminClient, partitions: list[TP], policy: str, *, dry_run: bool = False
) -> set[TP]:
    """Apply ``--missing-topics`` before an import; returns the partitions to leave out.

    fail: KafkaError naming what is missing (before anything is committed); create: the topics
    and partitions are created (a ``dry_run`` only names them); skip: their offsets are left out
    (and named on stderr).
    """
    gaps = catalog_gaps(client, partitions)
    if not gaps:
        return set()
    missing = ", ".join(g.text() for g in gaps)
    if policy == "create":
        if dry_run:
            note(f"would create: {missing}")
            return set()
        create_missing(client, gaps)
        note(f"created: {missing}")
        return set()
    if policy == "skip":
        skipped = {tp for tp in partitions if any(g.covers(tp) for g in gaps)}
        note(f"skipped {len(skipped)} partition(s) the cluster lacks: {missing}")
        return skipped
    raise KafkaError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        f"the cluster lacks {missing}; nothing was imported. Create them (coordinator topics create), "
        "or pass --missing-topics create (creates them) or --missing-topics skip",
        explain=False,
    )
