"""`coordinator topics list|describe|create|alter|delete` over the Kafka protocol.

The verbs of kafka-topics.sh (and `rpk topic`): Metadata, CreateTopics, CreatePartitions and
DeleteTopics sent to the bootstrap broker, which is this coordinator's topic catalog in
standalone mode, the upstream cluster in gateway mode (it forwards them), or any Kafka broker
(they forward to the controller). An operator never needs the database for topics.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from coordinator.cli.admin.client import AdminClient
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.output import note, print_json, print_table
from protocol.apis import ApiKey
from protocol.errors import ErrorCode, error_name
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
)
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse, DeleteTopicState
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]
    error_code: int


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: str | None
    internal: bool
    error_code: int
    partitions: list[PartitionView]

    @property
    def replication_factor(self) -> int | None:
        return len(self.partitions[0].replicas) if self.partitions else None


def parse_config(text: str) -> tuple[str, str]:
    """--config name=value (a topic config of CreateTopics)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value


def describe_topics(client: AdminClient, names: list[str] | None) -> list[TopicView]:
    """Metadata for the topics named (None: every topic); never creates one."""
    conn = client.bootstrap_connection()
    version = conn.version(ApiKey.METADATA)
    wanted: list[MetadataRequestTopic] | None
    if names is None:
        wanted = [] if version == 0 else None
    else:
        wanted = [MetadataRequestTopic(name=n) for n in names]
    request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
    response: MetadataResponse = conn.request(ApiKey.METADATA, request, version)
    views = []
    for t in response.topics:
        if t.name is None:
            continue
        partitions = sorted(
            (
                PartitionView(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    list(p.replica_nodes),
                    list(p.isr_nodes),
                    list(p.offline_replicas),
                    p.error_code,
                )
                for p in t.partitions
            ),
            key=lambda p: p.partition,
        )
        topic_id = t.topic_id.hex() if any(t.topic_id) else None
        views.append(TopicView(t.name, topic_id, t.is_internal, t.error_code, partitions))
    return sorted(views, key=lambda v: v.name)


def topics_list(client: AdminClient, args: argparse.Namespace) -> int:
    topics = [t for t in describe_topics(client, None) if args.internal or not t.internal]
    if args.format == "json":
        print_json([_topic_json(t, partitions=False) for t in topics])
    elif topics:
        print_table(
            ["TOPIC", "PARTITIONS", "REPLICAS"],
            [[t.name, len(t.partitions), t.replication_factor] for t in topics],
        )
    else:
        note("no topics")
    return 0


def topics_describe(client: AdminClient, args: argparse.Namespace) -> int:
    if not args.topics and not args.all_topics:
        raise UsageError("give TOPIC names or --all-topics")
    if args.topics and args.all_topics:
        raise UsageError("give TOPIC names or --all-topics, not both")
    views = describe_topics(client, None if args.all_topics else list(dict.fromkeys(args.topics)))
    found = [v for v in views if v.error_code == ErrorCode.NONE]
    failures = [
        KafkaError(
            v.error_code,
            f"topic {v.name!r}"
            + (" does not exist" if v.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else ""),
        )
        for v in views
        if v.error_code != ErrorCode.NONE
    ]
    if args.format == "json":
        print_json([_topic_json(t, partitions=True) for t in found])
    elif found:
        print_table(
            ["TOPIC", "PARTITION", "LEADER", "LEADER-EPOCH", "REPLICAS", "ISR", "OFFLINE"],
            [
                [
                    t.name,
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    _ids(p.replicas),
                    _ids(p.isr),
                    _ids(p.offline) if p.offline else None,
                ]
                for t in found
                for p in t.partitions
            ],
        )
    for failure in failures:
        note(str(failure))
    return 1 if failures else 0


def topics_create(client: AdminClient, args: argparse.Namespace) -> int:
    if args.partitions is not None and args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, got {args.partitions}")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise UsageError(f"--replication-factor must be at least 1, got {args.replication_factor}")
    configs = [CreatableTopicConfig(name=n, value=v) for n, v in (args.config or [])]
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=-1 if args.partitions is None else args.partitions,
                replication_factor=-1 if args.replication_factor is None else args.replication_factor,
                configs=configs,
            )
            for name in dict.fromkeys(args.topics)
        ],
        timeout_ms=int(client.timeout * 1000),
    )
    response: CreateTopicsResponse = client.bootstrap_connection().request(ApiKey.CREATE_TOPICS, request)
    ignored = {ErrorCode.TOPIC_ALREADY_EXISTS} if args.if_not_exists else set()
    results = [(r.name, r.error_code, r.error_message) for r in response.topics]
    return _report(args, results, "created", ignored, "creating topic")


def topics_alter(client: AdminClient, args: argparse.Namespace) -> int:
    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, got {args.partitions}")
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic(name=name, count=args.partitions, assignments=None) for name in args.topics
        ],
        timeout_ms=int(client.timeout * 1000),
    )
    conn = client.bootstrap_connection()
    response: CreatePartitionsResponse = conn.request(ApiKey.CREATE_PARTITIONS, request)
    results = [(r.name, r.error_code, r.error_message) for r in response.results]
    return _report(args, results, "altered", set[int](), "adding partitions to")


def topics_delete(client: AdminClient, args: argparse.Namespace) -> int:
    conn = client.bootstrap_connection()
    version = conn.version(ApiKey.DELETE_TOPICS)
    names = list(dict.fromkeys(args.topics))
    # v6 names topics in `topics` (name or id); before, in `topic_names`.
    request = (
        DeleteTopicsRequest(
            topics=[DeleteTopicState(name=n) for n in names], timeout_ms=int(client.timeout * 1000)
        )
        if version >= 6
        else DeleteTopicsRequest(topic_names=names, timeout_ms=int(client.timeout * 1000))
    )
    response: DeleteTopicsResponse = conn.request(ApiKey.DELETE_TOPICS, request, version)
    ignored = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION} if args.if_exists else set()
    results = [(r.name or "", r.error_code, r.error_message) for r in response.responses]
    return _report(args, results, "deleted", ignored, "deleting topic")


def _report(
    args: argparse.Namespace,
    results: list[tuple[str, int, str | None]],
    done: str,
    ignored: set[int] | set[ErrorCode],
    action: str,
) -> int:
    """One row per topic; errors named (rc 1) unless --if-exists / --if-not-exists covers them."""

    def status(code: int) -> str:
        if code == ErrorCode.NONE:
            return done
        return f"{error_name(code)} (ignored)" if code in ignored else error_name(code)

    if args.format == "json":
        print_json(
            [
                {
                    "topic": name,
                    "status": done if code == ErrorCode.NONE else None,
                    "error": None if code == ErrorCode.NONE else error_name(code),
                    "error_message": message,
                    "ignored": code in ignored,
                }
                for name, code, message in results
            ]
        )
    else:
        print_table(["TOPIC", "STATUS"], [[name, status(code)] for name, code, _message in results])
    failures = [
        (name, code, message)
        for name, code, message in results
        if code != ErrorCode.NONE and code not in ignored
    ]
    for name, code, message in failures:
        note(str(KafkaError(code, f"{action} {name!r}" + (f": {message}" if message else ""))))
    return 1 if failures else 0


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def _topic_json(t: TopicView, partitions: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "topic": t.name,
        "topic_id": t.topic_id,
        "internal": t.internal,
        "partitions": len(t.partitions),
        "replication_factor": t.replication_factor,
    }
    if partitions:
        doc["partitions"] = [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": p.replicas,
                "isr": p.isr,
                "offline_replicas": p.offline,
                "error": None if p.error_code == ErrorCode.NONE else error_name(p.error_code),
            }
            for p in t.partitions
        ]
    return doc
