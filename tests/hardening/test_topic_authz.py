"""Topic APIs under the authorizer: CreateTopics, DeleteTopics, CreatePartitions and Metadata."""

from __future__ import annotations

from typing import Any

from coordinator.api.routes import Routes
from coordinator.api.topic_authz import TopicAcls
from coordinator.core.cluster import Cluster, NodeIdentity
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.security.acl import Authorizer, Operation, PatternType, Permission, ResourceType
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from storage.records import AclRecord, TopicRecord

DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class _Capture:
    def __init__(self) -> None:
        self.responses: list[Any] = []

    def send(self, response: Any) -> None:
        self.responses.append(response)


def _acl(name: str, operation: int, resource: int = ResourceType.TOPIC) -> AclRecord:
    return AclRecord(resource, name, PatternType.LITERAL, "User:alice", "*", operation, Permission.ALLOW)


def _setup() -> tuple[Cluster, dict[int, Any]]:
    cluster = Cluster(NodeIdentity(0, "127.0.0.1", 9092, "c"), auto_create_topics=True, num_partitions=1)
    cluster.load(
        [
            TopicRecord("mine", bytes(range(16)), 2, 1, ()),
            TopicRecord("theirs", bytes(range(1, 17)), 2, 1, ()),
        ]
    )
    authorizer = Authorizer()
    authorizer.load(
        [
            _acl("mine", Operation.ALL),
            _acl("new-mine", Operation.CREATE),
            _acl("new-mine", Operation.DESCRIBE),
            _acl("unknown-described", Operation.DESCRIBE),
            _acl("theirs", Operation.READ),  # READ implies DESCRIBE, nothing more
        ]
    )
    routes = Routes()
    routes.add(ApiKey.CREATE_TOPICS, CreateTopicsRequest, cluster.create_topics)
    routes.add(ApiKey.DELETE_TOPICS, DeleteTopicsRequest, lambda ctx, req: cluster.delete_topics(ctx, req)[0])
    routes.add(ApiKey.CREATE_PARTITIONS, CreatePartitionsRequest, cluster.create_partitions)
    routes.add(ApiKey.METADATA, MetadataRequest, cluster.metadata)
    TopicAcls(authorizer, cluster).install(routes)
    return cluster, {route.api_key: route.handle for route in routes}


def _call(handlers: dict[int, Any], api: int, version: int, body: Any, principal: str = "User:alice") -> Any:
    capture = _Capture()
    ctx = RequestContext(0, 0, version, "c", "127.0.0.1", capture, principal=principal)
    result: Result = handlers[api](ctx, body)
    for reply_to, response in result.replies:
        reply_to.send(response)
    if result.on_durable is not None:
        for reply_to, response in result.on_durable(0).replies:
            reply_to.send(response)
    assert len(capture.responses) == 1
    return capture.responses[0]


def test_delete_topics_needs_delete_on_the_topic() -> None:
    cluster, handlers = _setup()
    response = _call(handlers, ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=["theirs", "mine"]))
    assert {r.name: r.error_code for r in response.responses} == {"theirs": DENIED, "mine": 0}
    assert cluster.partitions_of("theirs") == 2 and cluster.partitions_of("mine") is None
    anonymous = _call(
        handlers, ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=["theirs"]), "User:ANONYMOUS"
    )
    assert anonymous.responses[0].error_code == DENIED


def test_delete_topics_by_id_checks_the_resolved_name() -> None:
    cluster, handlers = _setup()
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=bytes(range(1, 17)))])
    response = _call(handlers, ApiKey.DELETE_TOPICS, 6, request)
    assert response.responses[0].error_code == DENIED
    assert cluster.partitions_of("theirs") == 2


def test_create_topics_needs_create() -> None:
    cluster, handlers = _setup()
    request = CreateTopicsRequest(
        topics=[CreatableTopic("new-mine", 3, 1), CreatableTopic("new-other", 3, 1)], timeout_ms=1000
    )
    response = _call(handlers, ApiKey.CREATE_TOPICS, 5, request)
    assert {t.name: t.error_code for t in response.topics} == {"new-mine": 0, "new-other": DENIED}
    assert cluster.partitions_of("new-other") is None


def test_create_partitions_needs_alter() -> None:
    cluster, handlers = _setup()
    request = CreatePartitionsRequest(
        topics=[CreatePartitionsTopic("theirs", 4, None), CreatePartitionsTopic("mine", 4, None)],
        timeout_ms=1000,
    )
    response = _call(handlers, ApiKey.CREATE_PARTITIONS, 3, request)
    assert {r.name: r.error_code for r in response.results} == {"theirs": DENIED, "mine": 0}
    assert cluster.partitions_of("theirs") == 2


def test_metadata_describe_and_auto_create() -> None:
    cluster, handlers = _setup()
    everything = _call(handlers, ApiKey.METADATA, 12, MetadataRequest(topics=None))
    assert sorted(t.name for t in everything.topics) == ["mine", "theirs"]
    hidden = _call(handlers, ApiKey.METADATA, 12, MetadataRequest(topics=None), principal="User:eve")
    assert hidden.topics == []
    topics = [MetadataRequestTopic(name=n) for n in ("theirs", "secret", "new-mine", "unknown-described")]
    response = _call(handlers, ApiKey.METADATA, 12, MetadataRequest(topics=topics))
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {"theirs": 0, "secret": DENIED, "new-mine": 0, "unknown-described": DENIED}
    assert cluster.partitions_of("new-mine") == 1  # auto-created: CREATE was granted
    assert cluster.partitions_of("unknown-described") is None
