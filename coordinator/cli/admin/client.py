"""A small blocking Kafka admin client over our own codecs.

It bootstraps from one address, learns the brokers from Metadata, finds each group's
coordinator with FindCoordinator (in a real cluster that may be another node) and sends every
request at min(our highest version, the broker's highest version).

Groups are described as Kafka's AdminClient.describeConsumerGroups does: ConsumerGroupDescribe
(KIP-848) when the coordinator serves it, and DescribeGroups for the groups it answers
GROUP_ID_NOT_FOUND (classic groups) or when the coordinator does not serve it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypeVar

from coordinator.cli.admin.assignment import decode_assignment
from coordinator.cli.admin.command_config import Security
from coordinator.cli.admin.connection import BrokerConnection, parse_address
from coordinator.cli.admin.errors import KafkaError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.features import STANDALONE_COORDINATOR
from protocol.messages.consumer_group_describe import (
    Assignment,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)
from protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
    OffsetDeleteResponse,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from protocol.messages.share_group_describe import Assignment as ShareAssignment
from protocol.messages.share_group_describe import DescribedGroup as ShareDescribedGroup
from protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from protocol.messages.streams_group_describe import DescribedGroup as StreamsDescribedGroup
from protocol.messages.streams_group_describe import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
)
from protocol.messages.streams_group_describe import TaskIds as StreamsTaskIds

LATEST: Final = -1
EARLIEST: Final = -2

# Errors after which the group's coordinator is looked up again and the request retried.
_COORDINATOR_MOVED: Final = frozenset(
    {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}
)
_BACKOFF_S: Final = 0.2

CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"
STREAMS: Final = "streams"
SHARE: Final = "share"

# ConsumerGroupDescribe errors after which the group is described with DescribeGroups instead:
# the group is not a consumer group (or does not exist), or the coordinator cannot answer it.
_NOT_A_CONSUMER_GROUP: Final = frozenset({ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION})

T = TypeVar("T")


class TP(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port} ({self.node_id})"


@dataclass(slots=True)
class TopicInfo:
    error_code: int
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader node id


@dataclass(slots=True)
class ClusterMetadata:
    brokers: dict[int, Node]
    topics: dict[str, TopicInfo]


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str
    group_type: str
    protocol_type: str
    broker: int


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TP] | None  # None: not a consumer-protocol assignment
    # Consumer (KIP-848) group members only:
    member_epoch: int | None = None
    rack_id: str | None = None
    subscribed_topics: list[str] | None = None
    subscribed_topic_regex: str | None = None
    target_assignment: list[TP] | None = None
    # Streams (KIP-1071) group members only: their process and tasks, "subtopology:partition".
    process_id: str | None = None
    tasks: StreamsTasks | None = None


@dataclass(frozen=True, slots=True)
class StreamsTasks:
    """A streams member's tasks (each "subtopology:partition") and its target active tasks."""

    active: list[str]
    standby: list[str]
    warmup: list[str]
    target_active: list[str]


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor of a consumer group
    members: list[Member]
    coordinator: Node
    group_type: str = CLASSIC
    # Consumer (KIP-848) groups only:
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    # Streams groups only: each subtopology's input topics (source and repartition source topics),
    # whose partition p a task "subtopology:p" reads.
    task_inputs: dict[str, list[str]] | None = None

    @property
    def is_active(self) -> bool:
        return self.state not in ("Empty", "Dead")


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    metadata: str = ""
    leader_epoch: int = -1  # the leader epoch of the last record consumed; -1 when unknown


@dataclass(frozen=True, slots=True)
class LogOffset:
    offset: int | None
    error_code: int = ErrorCode.NONE


class AdminClient:
    def __init__(
        self,
        bootstrap: str,
        timeout: float = 10.0,
        client_id: str = "coordinator-admin",
        security: Security | None = None,
    ) -> None:
        self.bootstrap = parse_address(bootstrap)
        self.timeout = timeout
        self.client_id = client_id
        self.security = security
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._coordinators: dict[str, Node] = {}
        # Groups ConsumerGroupDescribe said exist as another kind (classic or share).
        self._other_kind: set[str] = set()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def _connect(self, host: str, port: int) -> BrokerConnection:
        conn = self._connections.get((host, port))
        if conn is None:
            conn = BrokerConnection(host, port, self.timeout, self.client_id, self.security)
            self._connections[(host, port)] = conn
        return conn

    def bootstrap_connection(self) -> BrokerConnection:
        """The connection for cluster-level requests (CreateTopics, CreatePartitions)."""
        return self._connect(*self.bootstrap)

    def holds_records(self) -> bool:
        """False when the bootstrap broker says it is a standalone group coordinator without logs."""
        return STANDALONE_COORDINATOR not in self.bootstrap_connection().features

    def _node(self, node: Node) -> BrokerConnection:
        return self._connect(node.host, node.port)

    # -- cluster -------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Brokers and partition leaders; topics=None asks for every topic. Never creates topics."""
        conn = self._connect(*self.bootstrap)
        version = conn.version(ApiKey.METADATA)
        names = None if topics is None else set(topics)
        wanted: list[MetadataRequestTopic] | None
        if names is None:
            wanted = [] if version == 0 else None  # v0: an empty list means every topic
        else:
            wanted = [MetadataRequestTopic(name=t) for t in sorted(names)]
        # AllowAutoTopicCreation exists from v4; before, the broker's own setting decides.
        request = MetadataRequest(topics=wanted, allow_auto_topic_creation=version < 4)
        response: MetadataResponse = conn.request(ApiKey.METADATA, request, version)
        brokers = {b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers}
        infos = {
            t.name: TopicInfo(t.error_code, {p.partition_index: p.leader_id for p in t.partitions})
            for t in response.topics
            if t.name is not None and (names is None or t.name in names)
        }
        return ClusterMetadata(brokers, infos)

    def brokers(self) -> list[Node]:
        return sorted(self.metadata([]).brokers.values(), key=lambda n: n.node_id)

    def coordinator(self, group: str) -> Node:
        """The group's coordinator, waiting out COORDINATOR_NOT_AVAILABLE up to the timeout."""
        cached = self._coordinators.get(group)
        if cached is not None:
            return cached
        conn = self._connect(*self.bootstrap)
        version = conn.version(ApiKey.FIND_COORDINATOR)
        # v4+ (KIP-699) ask in CoordinatorKeys, older versions in Key; a field the version lacks
        # must keep its default.
        request = (
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
            if version >= 4
            else FindCoordinatorRequest(key=group)
        )
        deadline = time.monotonic() + self.timeout
        while True:
            response: FindCoordinatorResponse = conn.request(ApiKey.FIND_COORDINATOR, request, version)
            if version >= 4:
                if not response.coordinators:
                    raise KafkaError(
                        ErrorCode.UNKNOWN_SERVER_ERROR, f"empty FindCoordinator answer for {group!r}"
                    )
                entry = response.coordinators[0]
                code, node = entry.error_code, Node(entry.node_id, entry.host, entry.port)
            else:
                code, node = response.error_code, Node(response.node_id, response.host, response.port)
            if code == ErrorCode.NONE:
                self._coordinators[group] = node
                return node
            if code not in _COORDINATOR_MOVED or time.monotonic() > deadline:
                raise KafkaError(code, f"finding the coordinator of group {group!r}")
            time.sleep(_BACKOFF_S)

    def on_coordinator(
        self, group: str, send: Callable[[BrokerConnection], T], error_of: Callable[[T], int]
    ) -> T:
        """Send to the group's coordinator; look it up again if it moved, until the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            result = send(self._node(self.coordinator(group)))
            if error_of(result) not in _COORDINATOR_MOVED or time.monotonic() > deadline:
                return result
            self._coordinators.pop(group, None)
            time.sleep(_BACKOFF_S)

    # -- groups --------------------------------------------------------------------------

    def list_groups(self, states: list[str], types: list[str]) -> list[GroupListing]:
        """Groups of every broker in the cluster, filtered by state and type (case-insensitive)."""
        found: dict[str, GroupListing] = {}
        for node in self.brokers():
            conn = self._node(node)
            version = conn.version(ApiKey.LIST_GROUPS)
            request = ListGroupsRequest(
                states_filter=states if version >= 4 else [], types_filter=types if version >= 5 else []
            )
            response: ListGroupsResponse = conn.request(ApiKey.LIST_GROUPS, request, version)
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(response.error_code, f"ListGroups on broker {node}")
            for g in response.groups:
                # Brokers before ListGroups v5 (KIP-848) know only classic groups.
                group_type = g.group_type or ("classic" if version < 5 else "")
                found[g.group_id] = GroupListing(
                    g.group_id, g.group_state, group_type, g.protocol_type, node.node_id
                )
        listings = [self._with_state(g) for g in found.values()]
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return sorted(
            (
                g
                for g in listings
                if (not wanted_states or g.state.lower() in wanted_states)
                and (not wanted_types or g.group_type.lower() in wanted_types)
            ),
            key=lambda g: g.group_id,
        )

    def _with_state(self, listing: GroupListing) -> GroupListing:
        """Fill in a state ListGroups did not report (before v4; 'Unknown' from some brokers)."""
        if listing.state and listing.state != "Unknown":
            return listing
        state = self.describe_group(listing.group_id, must_exist=False).state
        return GroupListing(
            listing.group_id, state, listing.group_type, listing.protocol_type, listing.broker
        )

    def describe_group(self, group: str, must_exist: bool = True) -> GroupDescription:
        """The group's state and members; GROUP_ID_NOT_FOUND for a Dead group if must_exist.

        A consumer group is described with ConsumerGroupDescribe, a share group with
        ShareGroupDescribe, anything else with DescribeGroups.
        """
        described = self._describe_consumer_group(group) or self._describe_streams_group(group)
        if described is not None:
            if must_exist and described.state == "Dead":
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group!r} does not exist")
            return described
        try:
            classic = self._describe_classic_group(group, must_exist)
            if classic.state == "Dead" and group in self._other_kind:
                # DescribeGroups before v6 answers Dead for a group of another kind: a share group?
                return self._describe_share_group(group) or classic
            return classic
        except KafkaError as exc:
            # Held by another kind than classic and consumer: a share group (asked last, so that
            # classic groups cost the two requests they always did).
            if exc.code != ErrorCode.GROUP_ID_NOT_FOUND or group not in self._other_kind:
                raise
            shared = self._describe_share_group(group)
            if shared is None:
                raise
            return shared

    def _describe_consumer_group(self, group: str) -> GroupDescription | None:
        """ConsumerGroupDescribe; None when the coordinator lacks it or the group is not a consumer group."""

        def send(conn: BrokerConnection) -> DescribedGroup | None:
            if ApiKey.CONSUMER_GROUP_DESCRIBE not in conn.versions:
                return None
            try:
                version = conn.version(ApiKey.CONSUMER_GROUP_DESCRIBE)
            except KafkaError:  # no version both sides know
                return None
            response: ConsumerGroupDescribeResponse = conn.request(
                ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group]), version
            )
            for described in response.groups:
                if described.group_id == group:
                    return described
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"ConsumerGroupDescribe answer without group {group!r}"
            )

        g = self.on_coordinator(group, send, lambda r: ErrorCode.NONE if r is None else r.error_code)
        if g is not None and g.error_message == f"Group {group} is not a consumer group.":
            self._other_kind.add(group)  # it exists as another kind: classic, or share
        if g is None or g.error_code in _NOT_A_CONSUMER_GROUP:
            return None
        if g.error_code == ErrorCode.NONE and g.group_epoch < 0:
            # Not a group the broker runs as a consumer group: a KIP-848 group's epoch is never
            # negative. (Tansu advertises ConsumerGroupDescribe v0 and answers every group id,
            # classic or unknown, with NONE, epoch -1 and no members.)
            return None
        if g.error_code != ErrorCode.NONE:
            raise KafkaError(
                g.error_code, f"group {group!r}" + (f": {g.error_message}" if g.error_message else "")
            )
        members = [
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                _assigned(m.assignment),
                member_epoch=m.member_epoch,
                rack_id=m.rack_id,
                subscribed_topics=sorted(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex or None,  # Kafka sends "" for none
                target_assignment=_assigned(m.target_assignment),
            )
            for m in g.members
        ]
        members.sort(key=lambda m: (m.client_id, m.member_id))
        return GroupDescription(
            g.group_id or group,
            g.group_state,
            CONSUMER,
            g.assignor_name,
            members,
            self.coordinator(group),
            group_type=CONSUMER,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
        )

    def _describe_streams_group(self, group: str) -> GroupDescription | None:
        """StreamsGroupDescribe; None when the coordinator lacks it or the group is not a streams group."""

        def send(conn: BrokerConnection) -> StreamsDescribedGroup | None:
            if ApiKey.STREAMS_GROUP_DESCRIBE not in conn.versions:
                return None
            try:
                version = conn.version(ApiKey.STREAMS_GROUP_DESCRIBE)
            except KafkaError:
                return None
            response: StreamsGroupDescribeResponse = conn.request(
                ApiKey.STREAMS_GROUP_DESCRIBE, StreamsGroupDescribeRequest(group_ids=[group]), version
            )
            return next((g for g in response.groups if g.group_id == group), None)

        g = self.on_coordinator(group, send, lambda r: ErrorCode.NONE if r is None else r.error_code)
        if g is None or g.error_code != ErrorCode.NONE:
            return None

        def tasks(ids: list[StreamsTaskIds]) -> list[str]:
            return [
                f"{t.subtopology_id}:{p}"
                for t in sorted(ids, key=lambda t: t.subtopology_id)
                for p in t.partitions
            ]

        members = [
            Member(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                None,
                member_epoch=m.member_epoch,
                rack_id=m.rack_id,
                process_id=m.process_id,
                tasks=StreamsTasks(
                    tasks(m.assignment.active_tasks),
                    tasks(m.assignment.standby_tasks),
                    tasks(m.assignment.warmup_tasks),
                    tasks(m.target_assignment.active_tasks),
                ),
            )
            for m in g.members
        ]
        members.sort(key=lambda m: (m.process_id or "", m.member_id))
        return GroupDescription(
            g.group_id or group,
            g.group_state,
            STREAMS,
            g.assignor_name or "",
            members,
            self.coordinator(group),
            group_type=STREAMS,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            task_inputs={
                s.subtopology_id: [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
                for s in (g.topology.subtopologies or [] if g.topology is not None else [])
            },
        )

    def _describe_share_group(self, group: str) -> GroupDescription | None:
        """ShareGroupDescribe; None when the coordinator lacks it or the group is not a share group."""

        def send(conn: BrokerConnection) -> ShareDescribedGroup | None:
            if ApiKey.SHARE_GROUP_DESCRIBE not in conn.versions:
                return None
            try:
                version = conn.version(ApiKey.SHARE_GROUP_DESCRIBE)
            except KafkaError:  # no version both sides know
                return None
            response: ShareGroupDescribeResponse = conn.request(
                ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(group_ids=[group]), version
            )
            return next((g for g in response.groups if g.group_id == group), None)

        g = self.on_coordinator(group, send, lambda r: ErrorCode.NONE if r is None else r.error_code)
        if g is None or g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if g.error_code != ErrorCode.NONE:
            raise KafkaError(
                g.error_code, f"group {group!r}" + (f": {g.error_message}" if g.error_message else "")
            )
        members = [
            Member(
                m.member_id,
                None,
                m.client_id,
                m.client_host,
                _assigned(m.assignment),
                member_epoch=m.member_epoch,
                rack_id=m.rack_id,
                subscribed_topics=sorted(m.subscribed_topic_names),
                target_assignment=_assigned(m.assignment),  # no revocation: the target is the assignment
            )
            for m in g.members
        ]
        members.sort(key=lambda m: (m.client_id, m.member_id))
        return GroupDescription(
            g.group_id or group,
            g.group_state,
            SHARE,
            g.assignor_name,
            members,
            self.coordinator(group),
            group_type=SHARE,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
        )

    def _describe_classic_group(self, group: str, must_exist: bool) -> GroupDescription:
        def send(conn: BrokerConnection) -> DescribeGroupsResponse:
            response: DescribeGroupsResponse = conn.request(
                ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group])
            )
            return response

        response = self.on_coordinator(
            group, send, lambda r: r.groups[0].error_code if r.groups else ErrorCode.NONE
        )
        if not response.groups:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"empty DescribeGroups answer for {group!r}")
        g = response.groups[0]
        if g.error_code != ErrorCode.NONE:
            raise KafkaError(g.error_code, f"group {group!r}")
        if must_exist and g.group_state == "Dead":
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group!r} does not exist")
        consumer = g.protocol_type in ("consumer", "")
        members = [
            Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                _tps(decode_assignment(m.member_assignment)) if consumer else None,
            )
            for m in g.members
        ]
        members.sort(key=lambda m: (m.client_id, m.member_id))
        return GroupDescription(
            g.group_id or group,
            g.group_state,
            g.protocol_type,
            g.protocol_data,
            members,
            self.coordinator(group),
        )

    def delete_group(self, group: str) -> int:
        """DeleteGroups for one group: its error code (NONE when deleted)."""

        def send(conn: BrokerConnection) -> int:
            response: DeleteGroupsResponse = conn.request(
                ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[group])
            )
            for result in response.results:
                if result.group_id == group:
                    return result.error_code
            return ErrorCode.UNKNOWN_SERVER_ERROR

        return self.on_coordinator(group, send, lambda code: code)

    # -- offsets -------------------------------------------------------------------------

    def committed_offsets(
        self, group: str, topics: dict[str, list[int]] | None = None
    ) -> dict[TP, Committed]:
        """OffsetFetch: the group's committed offsets (all of them when topics is None)."""

        def send(conn: BrokerConnection) -> tuple[int, dict[TP, Committed]]:
            version = conn.version(ApiKey.OFFSET_FETCH)
            wanted = topics
            if wanted is None and version < 2:  # v0-1 cannot ask for "all": name every partition
                meta = self.metadata()
                wanted = {name: sorted(info.leaders) for name, info in meta.topics.items()}
            return _fetch_offsets(conn, version, group, wanted)

        code, offsets = self.on_coordinator(group, send, lambda r: r[0])
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"fetching the offsets of group {group!r}")
        return offsets

    def commit_offsets(self, group: str, offsets: dict[TP, Committed]) -> dict[TP, int]:
        """OffsetCommit as a simple (non-member) consumer: generation -1, empty member id."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, committed in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        request = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

        def send(conn: BrokerConnection) -> dict[TP, int]:
            response: OffsetCommitResponse = conn.request(ApiKey.OFFSET_COMMIT, request)
            return {
                TP(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
            }

        return self.on_coordinator(group, send, _first_error)

    def delete_offsets(self, group: str, partitions: Iterable[TP]) -> tuple[int, dict[TP, int]]:
        """OffsetDelete: (group-level error, per-partition errors)."""
        by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(OffsetDeleteRequestPartition(tp.partition))
        request = OffsetDeleteRequest(
            group_id=group,
            topics=[OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

        def send(conn: BrokerConnection) -> tuple[int, dict[TP, int]]:
            response: OffsetDeleteResponse = conn.request(ApiKey.OFFSET_DELETE, request)
            errors = {
                TP(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
            }
            return response.error_code, errors

        return self.on_coordinator(group, send, lambda r: r[0])

    def log_offsets(self, partitions: Iterable[TP], timestamp: int) -> dict[TP, LogOffset]:
        """ListOffsets on each partition's leader: LATEST, EARLIEST or the first offset at a time (ms)."""
        wanted = sorted(set(partitions))
        meta = self.metadata(sorted({tp.topic for tp in wanted}))
        results: dict[TP, LogOffset] = {}
        by_leader: dict[int, list[TP]] = {}
        for tp in wanted:
            info = meta.topics.get(tp.topic)
            if info is None or info.error_code != ErrorCode.NONE or tp.partition not in info.leaders:
                code = info.error_code if info and info.error_code else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                results[tp] = LogOffset(None, code)
            elif info.leaders[tp.partition] not in meta.brokers:
                results[tp] = LogOffset(None, ErrorCode.LEADER_NOT_AVAILABLE)
            else:
                by_leader.setdefault(info.leaders[tp.partition], []).append(tp)
        for leader, tps in by_leader.items():
            results.update(self._list_offsets(self._node(meta.brokers[leader]), tps, timestamp))
        for tp in wanted:  # a partition the leader left out of its answer
            results.setdefault(tp, LogOffset(None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return {tp: results[tp] for tp in wanted}

    def _list_offsets(self, conn: BrokerConnection, tps: list[TP], timestamp: int) -> dict[TP, LogOffset]:
        version = conn.version(ApiKey.LIST_OFFSETS)
        by_topic: dict[str, list[ListOffsetsPartition]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(
                ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamp, max_num_offsets=1)
            )
        request = ListOffsetsRequest(
            replica_id=-1, topics=[ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        )
        response: ListOffsetsResponse = conn.request(ApiKey.LIST_OFFSETS, request, version)
        results: dict[TP, LogOffset] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TP(topic.name, p.partition_index)
                if p.error_code != ErrorCode.NONE:
                    results[tp] = LogOffset(None, p.error_code)
                elif version == 0:
                    results[tp] = LogOffset(p.old_style_offsets[0] if p.old_style_offsets else None)
                else:
                    results[tp] = LogOffset(p.offset if p.offset >= 0 else None)
        return results


def _fetch_offsets(
    conn: BrokerConnection, version: int, group: str, topics: dict[str, list[int]] | None
) -> tuple[int, dict[TP, Committed]]:
    """One OffsetFetch: (group error, committed offsets); partitions without one are left out."""
    if version >= 8:
        request = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=group,
                    topics=None
                    if topics is None
                    else [OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()],
                )
            ]
        )
    else:
        request = OffsetFetchRequest(
            group_id=group,
            topics=None
            if topics is None
            else [OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
        )
    response: OffsetFetchResponse = conn.request(ApiKey.OFFSET_FETCH, request, version)
    offsets: dict[TP, Committed] = {}
    rows: list[tuple[str, Any]]
    if version >= 8:
        if not response.groups:
            return ErrorCode.UNKNOWN_SERVER_ERROR, offsets
        code = response.groups[0].error_code
        rows = [(t.name, p) for t in response.groups[0].topics for p in t.partitions]
    else:
        code = response.error_code
        rows = [(t.name, p) for t in response.topics for p in t.partitions]
    for name, p in rows:
        if p.error_code != ErrorCode.NONE:
            if code == ErrorCode.NONE and p.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                code = p.error_code
            continue
        if p.committed_offset >= 0:
            offsets[TP(name, p.partition_index)] = Committed(
                p.committed_offset, p.metadata or "", p.committed_leader_epoch
            )
    return code, offsets


def _first_error(errors: dict[TP, int]) -> int:
    return next((code for code in errors.values() if code != ErrorCode.NONE), ErrorCode.NONE)


def _tps(pairs: list[tuple[str, int]] | None) -> list[TP] | None:
    return None if pairs is None else [TP(t, p) for t, p in pairs]


def _assigned(assignment: Assignment | ShareAssignment) -> list[TP]:
    """A ConsumerGroupDescribe (or ShareGroupDescribe) assignment as sorted partitions (a topic unknown by name: its id)."""
    return sorted(
        TP(tps.topic_name or str(uuid.UUID(bytes=tps.topic_id)), p)
        for tps in assignment.topic_partitions
        for p in tps.partitions
    )
