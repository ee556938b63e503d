"""Kafka 4.4 as the oracle for the gateway's authorization of forwarded requests (issue 30, part 1):
the same principals and ACLs (no ACL, explicit DENY, prefixed ALLOW, super user) on a Kafka broker
with the StandardAuthorizer and on a gateway in front of that broker, and the same requests sent
both ways: the error codes per topic and partition must be the same, or the difference is one
docs/kafka-differences.md explains."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from loadtest.records import encode_batch
from protocol.apis import ApiKey
from protocol.messages import create_topics, delete_topics, init_producer_id, metadata, produce
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.conftest import KAFKA_SASL_USERS
from tests.gateway.authz_client import ForwardingClient, scram_login, with_versions
from tests.gateway.conftest import running_gateway
from tests.gateway.test_forwarded_authz import (
    ALL,
    ALLOW,
    DENY,
    LITERAL,
    PREFIXED,
    TOPIC,
    TOPIC_APIS,
    TXN,
    _transactional_codes,
)
from tests.security.test_sasl import add_user
from tests.support.kafka_broker import KafkaCluster, KafkaNode
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

TOPICS = ["oracle-secret", "pub-oracle", "oracle-other", "oracle-doomed", "pub-oracle-doomed"]
GROUP = 3  # the ACL resource type
CREATIONS = [
    AclCreation(TOPIC, "*", LITERAL, "User:bob", "*", ALL, ALLOW),
    AclCreation(TOPIC, "oracle-secret", LITERAL, "User:bob", "*", ALL, DENY),
    AclCreation(TXN, "*", LITERAL, "User:bob", "*", ALL, ALLOW),
    AclCreation(TOPIC, "pub-", PREFIXED, "User:carol", "*", ALL, ALLOW),
    AclCreation(GROUP, "pub-", PREFIXED, "User:carol", "*", ALL, ALLOW),
]
USERS = ("alice", "bob", "carol", "admin")


def _poll(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def plain_login(bootstrap: str, user: str) -> ForwardingClient:
    client = ForwardingClient(bootstrap)
    try:
        assert client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == 0
        token = f"\0{user}\0{KAFKA_SASL_USERS[user]}".encode()
        answer = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(token))
        assert answer.error_code == 0, answer
        return with_versions(client)
    except BaseException:
        client.close()
        raise


@pytest.fixture(scope="module")
def both(
    kafka_authorizer_broker: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, KafkaNode]]:
    node = kafka_authorizer_broker.nodes[0]
    with WireClient(node.bootstrap) as direct:  # the PLAINTEXT listener: a super user
        topics = [
            create_topics.CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in TOPICS
        ]
        direct.request(
            ApiKey.CREATE_TOPICS, 4, create_topics.CreateTopicsRequest(topics=topics, timeout_ms=5000)
        )
        batch = encode_batch([(None, b"written straight to Kafka")], int(time.time() * 1000))
        data = [produce.TopicProduceData(TOPICS[0], partition_data=[produce.PartitionProduceData(0, batch)])]
        produced = produce.ProduceRequest(None, -1, 5000, data)
        _poll(  # until the new topic has its leader
            lambda: (
                direct.request(ApiKey.PRODUCE, 8, produced).responses[0].partition_responses[0].error_code
                == 0
            ),
            "the first record in oracle-secret",
        )
        created = direct.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(CREATIONS))
        assert [r.error_code for r in created.results] == [0] * len(CREATIONS)
    storage = f"sqlite:///{tmp_path_factory.mktemp('oracle') / 'gateway.db'}"
    for user, password in KAFKA_SASL_USERS.items():
        add_user(storage, user, password, "SCRAM-SHA-256")
    settings = {
        "security-protocol": "SASL_PLAINTEXT",
        "authorizer-enabled": "true",
        "super-users": "User:admin",
    }
    with running_gateway(node.bootstrap, storage, **settings) as gateway:
        with scram_login(gateway.bootstrap, "admin", KAFKA_SASL_USERS["admin"]) as admin:
            created = admin.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(CREATIONS))
            assert [r.error_code for r in created.results] == [0] * len(CREATIONS)
        with plain_login(node.sasl_bootstrap, "bob") as bob:  # Kafka's ACLs are in its metadata log
            request = metadata.MetadataRequest([metadata.MetadataRequestTopic(name="pub-oracle")], False)
            _poll(
                lambda: [t.error_code for t in bob.call(ApiKey.METADATA, request).topics] == [0],
                "Kafka's ACLs",
            )
        yield gateway, node


@pytest.fixture(scope="module")
def topic_ids(both: tuple[ServerProcess, KafkaNode]) -> dict[str, bytes]:
    _gateway, node = both
    with plain_login(node.sasl_bootstrap, "admin") as admin:
        answer = admin.call(ApiKey.METADATA, metadata.MetadataRequest(topics=None))
        return {t.name: t.topic_id for t in answer.topics if t.error_code == 0}


def _pair(both: tuple[ServerProcess, KafkaNode], user: str) -> tuple[ForwardingClient, ForwardingClient]:
    gateway, node = both
    return scram_login(gateway.bootstrap, user, KAFKA_SASL_USERS[user]), plain_login(
        node.sasl_bootstrap, user
    )


@pytest.mark.parametrize("user", USERS)
def test_every_topic_api_gets_kafkas_error_codes(
    both: tuple[ServerProcess, KafkaNode], topic_ids: dict[str, bytes], user: str
) -> None:
    differences = []
    compared = 0
    for api_key, call in TOPIC_APIS.items():
        for topic in ("oracle-secret", "pub-oracle", "oracle-other"):
            through, straight = _pair(both, user)
            with through, straight:
                if through.version_of(api_key) is None or straight.version_of(api_key) is None:
                    continue
                gateway_codes, kafka_codes = call(through, topic, topic_ids), call(straight, topic, topic_ids)
                compared += 1
                if gateway_codes != kafka_codes:
                    differences.append((api_key, topic, gateway_codes, kafka_codes))
    assert compared >= 30
    assert differences == []


@pytest.mark.parametrize("user", USERS)
def test_transactional_apis_get_kafkas_error_codes(both: tuple[ServerProcess, KafkaNode], user: str) -> None:
    through, straight = _pair(both, user)
    with through, straight:
        gateway_codes, kafka_codes = _transactional_codes(through), _transactional_codes(straight)
        shared = set(gateway_codes) & set(kafka_codes)
        assert shared
        assert {k: gateway_codes[k] for k in shared} == {k: kafka_codes[k] for k in shared}
        idempotent = init_producer_id.InitProducerIdRequest(None, 60000)
        assert through.call(22, idempotent).error_code == straight.call(22, idempotent).error_code


@pytest.mark.parametrize("user", USERS)
def test_metadata_for_all_topics_lists_what_kafka_lists(
    both: tuple[ServerProcess, KafkaNode], user: str
) -> None:
    through, straight = _pair(both, user)
    with through, straight:
        request = metadata.MetadataRequest(topics=None)
        listed_here = {t.name for t in through.call(ApiKey.METADATA, request).topics} & set(TOPICS)
        listed_there = {t.name for t in straight.call(ApiKey.METADATA, request).topics} & set(TOPICS)
        assert listed_here == listed_there


def test_delete_topics_gets_kafkas_error_codes(both: tuple[ServerProcess, KafkaNode]) -> None:
    """carol may delete pub-oracle-doomed only; the gateway's request runs first, so Kafka answers
    the deleted topic as unknown: only the refusal of the other is compared, and the deletion's
    success."""
    through, straight = _pair(both, "carol")
    with through, straight:
        request = delete_topics.DeleteTopicsRequest(topic_names=["oracle-doomed"], timeout_ms=5000)
        version = min(
            5, through.version_of(ApiKey.DELETE_TOPICS) or 0, straight.version_of(ApiKey.DELETE_TOPICS) or 0
        )
        here = [r.error_code for r in through.call(ApiKey.DELETE_TOPICS, request, version=version).responses]
        there = [
            r.error_code for r in straight.call(ApiKey.DELETE_TOPICS, request, version=version).responses
        ]
        assert here == there
        request = delete_topics.DeleteTopicsRequest(topic_names=["pub-oracle-doomed"], timeout_ms=5000)
        assert [
            r.error_code for r in through.call(ApiKey.DELETE_TOPICS, request, version=version).responses
        ] == [0]


@pytest.mark.parametrize("user", USERS)
def test_group_apis_get_kafkas_error_codes(both: tuple[ServerProcess, KafkaNode], user: str) -> None:
    """Groups are served by the gateway, not forwarded: its group ACLs against Kafka's."""
    from protocol.messages.describe_groups import DescribeGroupsRequest
    from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestGroup

    through, straight = _pair(both, user)
    with through, straight:
        for group in ("oracle-group", "pub-oracle-group"):
            fetch = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=None)])
            described = DescribeGroupsRequest(groups=[group])
            codes = [
                (
                    [g.error_code for g in client.request(ApiKey.OFFSET_FETCH, 8, fetch).groups],
                    [g.error_code for g in client.request(ApiKey.DESCRIBE_GROUPS, 5, described).groups],
                )
                for client in (through, straight)
            ]
            assert codes[0] == codes[1], (group, codes)


@pytest.mark.parametrize("user", USERS)
def test_list_config_resources_gets_kafkas_error_code(
    both: tuple[ServerProcess, KafkaNode], user: str
) -> None:
    """DESCRIBE_CONFIGS on the cluster, for the listing the gateway serves (GROUP), for the one
    it forwards (TOPIC) and for the ones it splits (GROUP with TOPIC, every type): nobody but the
    super user has it here."""
    from protocol.messages.list_config_resources import ListConfigResourcesRequest

    through, straight = _pair(both, user)
    with through, straight:
        for types in ([32], [2], [32, 2], []):
            request = ListConfigResourcesRequest(types)
            codes = [
                client.request(ApiKey.LIST_CONFIG_RESOURCES, 1, request).error_code
                for client in (through, straight)
            ]
            assert codes[0] == codes[1], (types, codes)
            assert codes[1] == (0 if user == "admin" else 31), (types, codes)
