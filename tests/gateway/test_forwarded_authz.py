"""Forwarded requests are authorized with the client's principal (issue 30, part 1), against Tansu:
a principal without ACLs, one with an explicit DENY on `secret`, one with a prefixed ALLOW and a
super user, on every forwarded API Tansu and the gateway both speak."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loadtest.records import decode_batches, encode_batch
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import (
    add_partitions_to_txn,
    alter_configs,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_configs,
    describe_producers,
    describe_transactions,
    end_txn,
    fetch,
    find_coordinator,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    list_transactions,
    metadata,
    offset_for_leader_epoch,
    produce,
)
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from tests.gateway.authz_client import ForwardingClient, scram_login
from tests.gateway.conftest import running_gateway
from tests.security.test_sasl import add_user
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration

TOPIC, CLUSTER, TXN = 2, 4, 5
LITERAL, PREFIXED = 3, 4
ALL = 2
ALLOW, DENY = 3, 2
AUTHZ_ERRORS = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
SECRET_VALUE = b"written straight upstream"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, tansu_port: int) -> Iterator[ServerProcess]:
    storage = f"sqlite:///{tmp_path_factory.mktemp('authz') / 'gateway.db'}"
    for user, password in USERS.items():
        add_user(storage, user, password, "SCRAM-SHA-256")
    upstream = f"127.0.0.1:{tansu_port}"
    with WireClient(upstream) as direct:
        names = ["secret", "pub-a", "other", "doomed", "pub-doomed"]
        topics = [create_topics.CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names]
        direct.request(
            ApiKey.CREATE_TOPICS, 4, create_topics.CreateTopicsRequest(topics=topics, timeout_ms=5000)
        )
        batch = encode_batch([(None, SECRET_VALUE)], int(time.time() * 1000))
        data = [produce.TopicProduceData("secret", partition_data=[produce.PartitionProduceData(0, batch)])]
        answer = direct.request(ApiKey.PRODUCE, 8, produce.ProduceRequest(None, -1, 5000, data))
        assert answer.responses[0].partition_responses[0].error_code == 0, answer
    settings = {
        "security-protocol": "SASL_PLAINTEXT",
        "authorizer-enabled": "true",
        "super-users": "User:admin",
    }
    with running_gateway(upstream, storage, **settings) as gateway:
        with scram_login(gateway.bootstrap, "admin", USERS["admin"]) as admin:
            creations = [
                AclCreation(TOPIC, "*", LITERAL, "User:bob", "*", ALL, ALLOW),
                AclCreation(TOPIC, "secret", LITERAL, "User:bob", "*", ALL, DENY),
                AclCreation(TXN, "*", LITERAL, "User:bob", "*", ALL, ALLOW),
                AclCreation(TOPIC, "pub-", PREFIXED, "User:carol", "*", ALL, ALLOW),
            ]
            answer = admin.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations))
            assert [r.error_code for r in answer.results] == [0] * len(creations)
        yield gateway


@pytest.fixture(scope="module")
def topic_ids(secured: ServerProcess) -> dict[str, bytes]:
    with scram_login(secured.bootstrap, "admin", USERS["admin"]) as admin:
        deadline = time.monotonic() + 20
        while True:
            answer = admin.call(ApiKey.METADATA, metadata.MetadataRequest(topics=None))
            ids = {t.name: t.topic_id for t in answer.topics if t.error_code == 0}
            if {"secret", "pub-a", "other"} <= set(ids) or time.monotonic() > deadline:
                return ids
            time.sleep(0.2)


def login(gateway: ServerProcess, user: str) -> ForwardingClient:
    return scram_login(gateway.bootstrap, user, USERS[user])


# ---- one request per forwarded API, naming one topic; each returns the error codes it got ----
def _produce(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    batch = encode_batch([(None, b"through the gateway")], int(time.time() * 1000))
    version = c.version_of(ApiKey.PRODUCE) or 0
    data = produce.TopicProduceData(
        topic, ids.get(topic, bytes(16)), [produce.PartitionProduceData(0, batch)]
    )
    if version < 13:
        data.topic_id = bytes(16)
    answer = c.call(ApiKey.PRODUCE, produce.ProduceRequest(None, -1, 5000, [data]))
    return [p.error_code for t in answer.responses for p in t.partition_responses]


def _fetch(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    return [p.error_code for t in _fetched(c, topic, ids).responses for p in t.partitions]


def _fetched(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> Any:
    version = c.version_of(ApiKey.FETCH) or 0
    partition = fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    entry = fetch.FetchTopic(topic=topic, partitions=[partition])
    if version >= 13:
        entry = fetch.FetchTopic(topic_id=ids[topic], partitions=[partition])
    request = fetch.FetchRequest(
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=[entry]
    )
    request.session_epoch = -1
    return c.call(ApiKey.FETCH, request)


def _list_offsets(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    partitions = [list_offsets.ListOffsetsPartition(0, -1, -1)]
    request = list_offsets.ListOffsetsRequest(-1, 0, [list_offsets.ListOffsetsTopic(topic, partitions)])
    answer = c.call(ApiKey.LIST_OFFSETS, request)
    return [p.error_code for t in answer.topics for p in t.partitions]


def _metadata(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    request = metadata.MetadataRequest([metadata.MetadataRequestTopic(name=topic)], False)
    return [t.error_code for t in c.call(ApiKey.METADATA, request).topics]


def _create_topics(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    request = create_topics.CreateTopicsRequest([create_topics.CreatableTopic(topic, 1, 1)], 5000, True)
    return [t.error_code for t in c.call(ApiKey.CREATE_TOPICS, request).topics]


def _create_partitions(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    request = create_partitions.CreatePartitionsRequest(
        [create_partitions.CreatePartitionsTopic(topic, 1, None)], 5000, True
    )
    return [t.error_code for t in c.call(ApiKey.CREATE_PARTITIONS, request).results]


def _delete_records(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    partitions = [delete_records.DeleteRecordsPartition(0, 0)]
    request = delete_records.DeleteRecordsRequest(
        [delete_records.DeleteRecordsTopic(topic, partitions)], 5000
    )
    return [p.error_code for t in c.call(21, request).topics for p in t.partitions]


def _offset_for_leader_epoch(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    partitions = [offset_for_leader_epoch.OffsetForLeaderPartition(0, -1, 0)]
    topics = [offset_for_leader_epoch.OffsetForLeaderTopic(topic, partitions)]
    request = offset_for_leader_epoch.OffsetForLeaderEpochRequest(-1, topics)
    return [p.error_code for t in c.call(23, request).topics for p in t.partitions]


def _describe_configs(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    request = describe_configs.DescribeConfigsRequest(
        [describe_configs.DescribeConfigsResource(TOPIC, topic, None)]
    )
    return [r.error_code for r in c.call(32, request).results]


def _alter_configs(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    configs = [alter_configs.AlterableConfig("retention.ms", "100000")]
    request = alter_configs.AlterConfigsRequest(
        [alter_configs.AlterConfigsResource(TOPIC, topic, configs)], True
    )
    return [r.error_code for r in c.call(33, request).responses]


def _incremental_alter_configs(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    configs = [incremental_alter_configs.AlterableConfig("retention.ms", 0, "100000")]
    resource = incremental_alter_configs.AlterConfigsResource(TOPIC, topic, configs)
    request = incremental_alter_configs.IncrementalAlterConfigsRequest([resource], True)
    return [r.error_code for r in c.call(44, request).responses]


def _describe_producers(c: ForwardingClient, topic: str, ids: dict[str, bytes]) -> list[int]:
    request = describe_producers.DescribeProducersRequest([describe_producers.TopicRequest(topic, [0])])
    return [p.error_code for t in c.call(61, request).topics for p in t.partitions]


TOPIC_APIS: dict[int, Callable[[ForwardingClient, str, dict[str, bytes]], list[int]]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    21: _delete_records,
    23: _offset_for_leader_epoch,
    32: _describe_configs,
    33: _alter_configs,
    44: _incremental_alter_configs,
    61: _describe_producers,
}


def _transactional_codes(c: ForwardingClient) -> dict[str, list[int]]:
    """The transactional APIs with transactional id `tx` (those the gateway advertises)."""
    codes: dict[str, list[int]] = {}
    if c.version_of(22) is not None:
        codes["InitProducerId"] = [c.call(22, init_producer_id.InitProducerIdRequest("tx", 60000)).error_code]
    if c.version_of(24) is not None:
        topics = [add_partitions_to_txn.AddPartitionsToTxnTopic("pub-a", [0])]
        request = add_partitions_to_txn.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx", v3_and_below_producer_id=1, v3_and_below_topics=topics
        )
        answer = c.call(24, request, version=min(3, c.version_of(24) or 0))
        codes["AddPartitionsToTxn"] = [
            p.partition_error_code
            for t in answer.results_by_topic_v3_and_below
            for p in t.results_by_partition
        ]
    if c.version_of(26) is not None:
        codes["EndTxn"] = [c.call(26, end_txn.EndTxnRequest("tx", 1, 0, True)).error_code]
    if c.version_of(ApiKey.FIND_COORDINATOR) is not None:
        version = c.version_of(ApiKey.FIND_COORDINATOR) or 0
        lookup = find_coordinator.FindCoordinatorRequest(key_type=1)
        if version >= 4:
            lookup.coordinator_keys = ["tx"]
        else:
            lookup.key = "tx"
        answer = c.call(ApiKey.FIND_COORDINATOR, lookup)
        codes["FindCoordinator"] = (
            [k.error_code for k in answer.coordinators] if version >= 4 else [answer.error_code]
        )
    if c.version_of(65) is not None:
        answer = c.call(65, describe_transactions.DescribeTransactionsRequest(["tx"]))
        codes["DescribeTransactions"] = [s.error_code for s in answer.transaction_states]
    return codes


def test_a_principal_without_acls_is_refused_everywhere(
    secured: ServerProcess, topic_ids: dict[str, bytes]
) -> None:
    """The attack from the issue, rerun: nothing is listed, produced, fetched, created or deleted."""
    with login(secured, "alice") as alice:
        listed = alice.call(ApiKey.METADATA, metadata.MetadataRequest(topics=None))
        assert listed.topics == []
        for api_key, call in TOPIC_APIS.items():
            if alice.version_of(api_key) is None:
                continue
            codes = call(alice, "secret", topic_ids)
            assert codes and set(codes) <= AUTHZ_ERRORS, (api_key, codes)
        for name, codes in _transactional_codes(alice).items():
            assert codes and set(codes) <= AUTHZ_ERRORS, (name, codes)
        idempotent = alice.call(22, init_producer_id.InitProducerIdRequest(None, 60000))
        assert idempotent.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        request = delete_topics.DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000)
        answer = alice.call(
            ApiKey.DELETE_TOPICS, request, version=min(5, alice.version_of(ApiKey.DELETE_TOPICS) or 0)
        )
        assert [r.error_code for r in answer.responses] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        if alice.version_of(66) is not None:
            assert alice.call(66, list_transactions.ListTransactionsRequest()).transaction_states == []
    with login(secured, "admin") as admin:  # the topic alice tried to delete is still there
        answer = admin.call(
            ApiKey.METADATA, metadata.MetadataRequest([metadata.MetadataRequestTopic(name="doomed")])
        )
        assert [t.error_code for t in answer.topics] == [0]


def test_the_record_written_upstream_is_read_only_by_who_may(
    secured: ServerProcess, topic_ids: dict[str, bytes]
) -> None:
    for user in ("alice", "bob", "carol"):
        with login(secured, user) as client:
            answer = _fetched(client, "secret", topic_ids)
            assert [p.error_code for t in answer.responses for p in t.partitions] == [
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
            ]
            assert all(not p.records for t in answer.responses for p in t.partitions)
    with login(secured, "admin") as admin:
        answer = _fetched(admin, "secret", topic_ids)
        values = [r.value for t in answer.responses for p in t.partitions for r in decode_batches(p.records)]
        assert SECRET_VALUE in values


@pytest.mark.parametrize(
    ("user", "allowed", "refused"),
    [("bob", "pub-a", "secret"), ("carol", "pub-a", "other"), ("admin", "secret", None)],
)
def test_deny_prefixed_allow_and_super_user_on_every_topic_api(
    secured: ServerProcess, topic_ids: dict[str, bytes], user: str, allowed: str, refused: str | None
) -> None:
    upstream_closed = []
    for api_key, call in TOPIC_APIS.items():
        with login(secured, user) as client:
            if client.version_of(api_key) is None:
                continue
            if refused is not None:  # answered by the gateway, never forwarded
                codes = call(client, refused, topic_ids)
                assert codes and set(codes) <= AUTHZ_ERRORS, (api_key, refused, codes)
            try:
                codes = call(client, allowed, topic_ids)
            except ConnectionError:
                upstream_closed.append(api_key)  # forwarded: Tansu advertises it but drops the request
                continue
            assert not set(codes) & AUTHZ_ERRORS, (api_key, allowed, codes)
    assert len(upstream_closed) <= 2, upstream_closed


def test_a_request_refused_in_part_is_forwarded_in_part(
    secured: ServerProcess, topic_ids: dict[str, bytes]
) -> None:
    with login(secured, "carol") as carol:
        names = ["other", "pub-a", "secret"]
        request = metadata.MetadataRequest([metadata.MetadataRequestTopic(name=n) for n in names], False)
        answer = carol.call(ApiKey.METADATA, request)
        assert [(t.name, t.error_code) for t in answer.topics] == [
            ("other", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("pub-a", 0),
            ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ]
        listed = carol.call(ApiKey.METADATA, metadata.MetadataRequest(topics=None))
        assert {t.name for t in listed.topics} and all(t.name.startswith("pub-") for t in listed.topics)
        partitions = [list_offsets.ListOffsetsPartition(0, -1, -1)]
        topics = [list_offsets.ListOffsetsTopic(n, partitions) for n in names]
        answer = carol.call(ApiKey.LIST_OFFSETS, list_offsets.ListOffsetsRequest(-1, 0, topics))
        assert [(t.name, t.partitions[0].error_code) for t in answer.topics] == [
            ("other", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("pub-a", 0),
            ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ]


def test_delete_topics_follows_the_acls(secured: ServerProcess) -> None:
    with login(secured, "carol") as carol:
        version = min(5, carol.version_of(ApiKey.DELETE_TOPICS) or 0)
        request = delete_topics.DeleteTopicsRequest(topic_names=["doomed", "pub-doomed"], timeout_ms=5000)
        answer = carol.call(ApiKey.DELETE_TOPICS, request, version=version)
        assert [(r.name, r.error_code) for r in answer.responses] == [
            ("doomed", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            ("pub-doomed", 0),
        ]


def test_transactional_ids_follow_the_acls(secured: ServerProcess) -> None:
    with login(secured, "bob") as bob:
        assert not {c for codes in _transactional_codes(bob).values() for c in codes} & {
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        }
    with login(secured, "carol") as carol:
        for name, codes in _transactional_codes(carol).items():
            assert ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED in codes, (name, codes)


def test_acl_changes_apply_to_open_connections(secured: ServerProcess, topic_ids: dict[str, bytes]) -> None:
    with login(secured, "alice") as alice, login(secured, "admin") as admin:
        assert _list_offsets(alice, "other", topic_ids) == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        grant = AclCreation(TOPIC, "other", LITERAL, "User:alice", "*", 8, ALLOW)  # DESCRIBE
        assert admin.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest([grant])).results[0].error_code == 0
        assert _list_offsets(alice, "other", topic_ids) == [0]


def test_no_data_plane_without_authentication(secured: ServerProcess, tmp_path: Path) -> None:
    with WireClient(secured.bootstrap) as anonymous:
        from tests.gateway.authz_client import frame_of

        frame = frame_of(ApiKey.METADATA, 12, metadata.MetadataRequest(topics=None))
        anonymous.send_raw(len(frame).to_bytes(4, "big") + frame)
        assert anonymous.is_closed_by_peer()


# ---- 2018-era clients: Produce v0-2 and Fetch v0-3, converted by the gateway (old_formats.py) ----
def _old_call(client: ForwardingClient, api_key: int, version: int, body: Any) -> Any:
    from protocol.wire import decode_response, encode_request

    client.correlation_id += 1
    client.send_raw(encode_request(api_key, version, client.correlation_id, "old-client", body))
    correlation_id, answer = decode_response(api_key, version, client.read_frame())
    assert correlation_id == client.correlation_id
    return answer


def _old_produce(client: ForwardingClient, version: int, topics: list[str]) -> list[int]:
    from tests.gateway.test_old_formats import legacy

    records = legacy(1 if version == 2 else 0, [(int(time.time() * 1000), None, b"from 2018")])
    data = [
        produce.TopicProduceData(name=t, partition_data=[produce.PartitionProduceData(0, records)])
        for t in topics
    ]
    answer = _old_call(client, ApiKey.PRODUCE, version, produce.ProduceRequest(None, 1, 5000, data))
    return [p.error_code for t in answer.responses for p in t.partition_responses]


def _old_fetch(client: ForwardingClient, version: int, topics: list[str]) -> list[tuple[int, bool]]:
    entries = [
        fetch.FetchTopic(topic=t, partitions=[fetch.FetchPartition(partition=0, partition_max_bytes=1 << 20)])
        for t in topics
    ]
    request = fetch.FetchRequest(
        replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=entries
    )
    answer = _old_call(client, ApiKey.FETCH, version, request)
    return [(p.error_code, bool(p.records)) for t in answer.responses for p in t.partitions]


@pytest.mark.parametrize("version", [0, 2])
def test_old_produce_is_authorized_as_current_versions(secured: ServerProcess, version: int) -> None:
    with login(secured, "bob") as bob:  # DENY on secret, ALLOW on the rest
        assert _old_produce(bob, version, ["secret"]) == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        assert _old_produce(bob, version, ["pub-a"]) == [ErrorCode.NONE]  # the connection stays open
    with login(secured, "alice") as alice:  # no ACL
        assert _old_produce(alice, version, ["pub-a"]) == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    with login(secured, "carol") as carol:  # prefixed ALLOW on pub-: refused in part, forwarded in part
        assert _old_produce(carol, version, ["other", "pub-a"]) == [
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ErrorCode.NONE,
        ]


@pytest.mark.parametrize("version", [0, 3])
def test_old_fetch_is_authorized_as_current_versions(secured: ServerProcess, version: int) -> None:
    with login(secured, "bob") as bob:
        assert _old_fetch(bob, version, ["secret"]) == [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, False)]
    with login(secured, "alice") as alice:
        assert _old_fetch(alice, version, ["secret"]) == [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, False)]
    with login(secured, "carol") as carol:
        codes = _old_fetch(carol, version, ["other", "pub-a"])
        assert [code for code, _ in codes] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.NONE]
    with login(secured, "admin") as admin:  # the record written straight upstream, as messages
        assert _old_fetch(admin, version, ["secret"]) == [(ErrorCode.NONE, True)]
