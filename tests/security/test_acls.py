"""Authorization end to end (issue 9): ACLs through the Kafka admin API, enforced on the group
and offset APIs, persisted, and applied to running clients without a restart."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from protocol.messages.describe_acls import DescribeAclsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from protocol.messages.list_config_resources import ConfigResource as ListedResource
from protocol.messages.list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.messages.share_group_describe import ShareGroupDescribeRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.security.test_sasl import add_user
from tests.support.server import REPO, ServerProcess, running_server, start_server
from tests.support.wire_client import WireClient

GROUP, TOPIC, CLUSTER = 3, 2, 4
LITERAL, PREFIXED = 3, 4
READ, DESCRIBE, DELETE = 3, 8, 6
ALLOW, DENY = 3, 2


def login(server: ServerProcess, user: str, password: str) -> WireClient:
    client = WireClient(server.bootstrap)
    try:
        assert client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest("PLAIN")).error_code == 0
        token = f"\0{user}\0{password}".encode()
        assert client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(token)).error_code == 0
    except BaseException:
        client.close()
        raise
    return client


def grant(admin: WireClient, *creations: AclCreation) -> None:
    response = admin.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(list(creations)))
    assert [r.error_code for r in response.results] == [0] * len(creations)


def acl(resource_type: int, name: str, principal: str, operation: int, *, pattern: int = LITERAL,
        permission: int = ALLOW) -> AclCreation:  # fmt: skip
    return AclCreation(resource_type, name, pattern, principal, "*", operation, permission)


@pytest.fixture
def storage(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    add_user(url, "admin", "admin-pw", "SCRAM-SHA-256")
    add_user(url, "alice", "alice-pw", "SCRAM-SHA-512")
    return url


SETTINGS = {
    "security-protocol": "SASL_PLAINTEXT",
    "authorizer-enabled": "true",
    "super-users": "User:admin",
}


@pytest.fixture
def server(storage: str) -> Iterator[ServerProcess]:
    with running_server(storage, SETTINGS) as proc:
        yield proc


def _join(client: WireClient, group: str) -> Any:
    protocols = [JoinGroupRequestProtocol("range", b"")]
    return client.request(
        ApiKey.JOIN_GROUP, 5, JoinGroupRequest(group, 6000, 6000, "", None, "consumer", protocols)
    )


def _commit(client: WireClient, group: str, topic: str) -> list[int]:
    partitions = [OffsetCommitRequestPartition(0, 5, -1, -1, "")]
    request = OffsetCommitRequest(
        group, -1, "", None, -1, [OffsetCommitRequestTopic(topic, bytes(16), partitions)]
    )
    response = client.request(ApiKey.OFFSET_COMMIT, 7, request)
    return [p.error_code for t in response.topics for p in t.partitions]


@pytest.mark.integration
def test_group_and_offset_apis_are_authorized(server: ServerProcess) -> None:
    with login(server, "admin", "admin-pw") as admin, login(server, "alice", "alice-pw") as alice:
        topics = [MetadataRequestTopic(name=name) for name in ("t1", "t2", "t3")]
        admin.request(ApiKey.METADATA, 9, MetadataRequest(topics=topics, allow_auto_topic_creation=True))
        assert _commit(admin, "g1", "t1") == [0]  # a super user may do anything
        # Nothing granted: every group API is refused.
        assert _join(alice, "g1").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        hb = alice.request(ApiKey.HEARTBEAT, 3, HeartbeatRequest("g1", 1, "m"))
        assert hb.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        found = alice.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g1"))
        assert found.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert _commit(alice, "g1", "t1") == [ErrorCode.GROUP_AUTHORIZATION_FAILED]
        fetched = alice.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest("g1", None))
        assert fetched.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        described = alice.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(["g1"], True))
        assert described.groups[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert alice.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest()).groups == []
        # ACL management needs ALTER on the cluster.
        refused = alice.request(
            ApiKey.CREATE_ACLS, 3, CreateAclsRequest([acl(GROUP, "g1", "User:alice", READ)])
        )
        assert refused.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # READ on the group and on t1 (prefixed), DESCRIBE-only on t2.
        grant(
            admin,
            acl(GROUP, "g1", "User:alice", READ),
            acl(TOPIC, "t1", "User:alice", READ, pattern=PREFIXED),
            acl(TOPIC, "t2", "User:alice", DESCRIBE),
        )
        assert _commit(alice, "g1", "t1") == [0]
        assert _commit(alice, "g1", "t2") == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        assert _commit(admin, "g1", "t3") == [0]
        # Explicit fetch: t3 is refused per partition; "all partitions" silently omits it.
        explicit = alice.request(
            ApiKey.OFFSET_FETCH,
            7,
            OffsetFetchRequest(
                "g1", [OffsetFetchRequestTopic("t1", [0]), OffsetFetchRequestTopic("t3", [0])]
            ),
        )
        codes = {t.name: [p.error_code for p in t.partitions] for t in explicit.topics}
        assert codes == {"t1": [0], "t3": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
        everything = alice.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest("g1", None))
        assert "t3" not in {t.name for t in everything.topics}
        described = alice.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(["g1"], True))
        assert described.groups[0].error_code == 0
        assert described.groups[0].authorized_operations == (1 << READ) | (1 << DESCRIBE)
        assert [g.group_id for g in alice.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest()).groups] == [
            "g1"
        ]
        # Deny wins over allow.
        grant(admin, acl(GROUP, "g1", "User:alice", READ, permission=DENY))
        assert _join(alice, "g1").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        # DescribeAcls / DeleteAcls.
        listed = admin.request(
            ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(1, None, 1, "User:alice", None, 1, 1)
        )
        assert sum(len(r.acls) for r in listed.resources) == 4
        deleted = admin.request(
            ApiKey.DELETE_ACLS,
            3,
            DeleteAclsRequest([DeleteAclsFilter(GROUP, "g1", LITERAL, None, None, READ, DENY)]),
        )
        assert len(deleted.filter_results[0].matching_acls) == 1
        assert (
            _join(alice, "g1").error_code == 0
            or _join(alice, "g1").error_code == ErrorCode.MEMBER_ID_REQUIRED
        )


@pytest.mark.integration
def test_acls_persist_across_restart(storage: str) -> None:
    first = start_server(storage, SETTINGS)
    try:
        with login(first, "admin", "admin-pw") as admin:
            grant(admin, acl(GROUP, "kept", "User:alice", READ))
    finally:
        first.stop()
    with running_server(storage, SETTINGS) as second, login(second, "alice", "alice-pw") as alice:
        assert _join(alice, "kept").error_code in (0, ErrorCode.MEMBER_ID_REQUIRED)
        assert _join(alice, "other").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


@pytest.mark.integration
def test_acl_apis_without_authorizer_are_security_disabled(tmp_path: Path) -> None:
    with running_server(f"sqlite:///{tmp_path / 'p.db'}") as server, WireClient(server.bootstrap) as client:
        response = client.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest([acl(GROUP, "g", "User:a", READ)]))
        assert response.results[0].error_code == ErrorCode.SECURITY_DISABLED


@pytest.mark.integration
def test_kafka_python_consumer_gets_group_authorization_failed_until_an_acl_is_added(
    server: ServerProcess,
) -> None:
    from kafka import KafkaConsumer
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        NewTopic,
        ResourcePattern,
        ResourceType,
    )
    from kafka.errors import GroupAuthorizationFailedError

    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512"}
    admin = KafkaAdminClient(
        bootstrap_servers=server.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="admin",
        sasl_plain_password="admin-pw",
    )
    consumer = KafkaConsumer(
        "acl-topic",
        bootstrap_servers=server.bootstrap,
        group_id="acl-group",
        sasl_plain_username="alice",
        sasl_plain_password="alice-pw",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        **sasl,
    )
    try:
        # Metadata no longer auto-creates a topic for a principal without CREATE (as in Kafka).
        admin.create_topics([NewTopic("acl-topic", 1, 1)])
        admin.create_acls([ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, "acl-topic"))])  # fmt: skip
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(timeout_ms=250)
        admin.create_acls([ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.GROUP, "acl-group"))])  # fmt: skip
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            try:
                consumer.poll(timeout_ms=250)
            except GroupAuthorizationFailedError:
                pytest.fail("still refused after the ACL was added")
        assert {tp.topic for tp in consumer.assignment()} == {"acl-topic"}
    finally:
        consumer.close()
        admin.close()


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *argv], cwd=REPO, capture_output=True, text=True, timeout=60
    )


@pytest.mark.integration
def test_acls_and_users_cli(server: ServerProcess, storage: str) -> None:
    auth = ["--bootstrap", server.bootstrap, "--username", "admin", "--password", "admin-pw"]
    added = _cli("acls", "add", *auth, "--group", "cli-", "--pattern", "prefixed", "--principal", "User:alice",
                 "--operation", "read", "--operation", "DESCRIBE")  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = _cli("acls", "list", *auth, "--group", "cli-")
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split("\t")[5] for line in listed.stdout.splitlines()) == ["DESCRIBE", "READ"]
    with login(server, "alice", "alice-pw") as alice:
        assert _join(alice, "cli-group").error_code in (0, ErrorCode.MEMBER_ID_REQUIRED)
        refused = _cli("acls", "add", "--bootstrap", server.bootstrap, "--username", "alice", "--password",
                       "alice-pw", "--group", "x", "--principal", "User:alice", "--operation", "READ")  # fmt: skip
        assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
        deleted = _cli(
            "acls", "delete", *auth, "--group", "cli-", "--pattern", "prefixed", "--operation", "READ"
        )
        assert deleted.returncode == 0 and "deleted 1" in deleted.stdout, deleted.stderr
        assert _join(alice, "cli-other").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    wrong = _cli("acls", "list", "--bootstrap", server.bootstrap, "--username", "admin", "--password", "nope")
    assert wrong.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in wrong.stderr
    # users: list shows mechanisms, never keys; delete removes the login at once.
    users = _cli("users", "list", "--storage", storage)
    assert users.returncode == 0 and "alice\tSCRAM-SHA-512" in users.stdout
    assert _cli("users", "delete", "alice", "--storage", storage).returncode == 0
    # The server caches credentials for a second (a login flood must not reach the storage).
    time.sleep(1.5)
    with pytest.raises(AssertionError):
        login(server, "alice", "alice-pw")
    assert _cli("users", "delete", "alice", "--storage", storage).returncode == 1


@pytest.mark.integration
def test_consumer_group_apis_are_authorized(server: ServerProcess) -> None:
    with login(server, "admin", "admin-pw") as admin, login(server, "alice", "alice-pw") as alice:
        topics = [MetadataRequestTopic(name=name) for name in ("k1", "k2")]
        admin.request(ApiKey.METADATA, 9, MetadataRequest(topics=topics, allow_auto_topic_creation=True))

        def join(topic: str) -> Any:
            request = ConsumerGroupHeartbeatRequest(
                "cg1",
                "m1",
                0,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=[topic],
                topic_partitions=[],
            )
            return alice.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)

        def describe() -> Any:
            request = ConsumerGroupDescribeRequest(["cg1"], True)
            return alice.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, request).groups[0]

        assert join("k1").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert describe().error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(admin, acl(GROUP, "cg1", "User:alice", READ), acl(TOPIC, "k1", "User:alice", DESCRIBE))
        refused = join("k2")  # no DESCRIBE on k2
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and "k2" in refused.error_message
        assert join("k1").error_code == 0
        described = describe()  # READ implies DESCRIBE
        assert described.error_code == 0 and described.members[0].member_id == "m1"
        assert described.authorized_operations == (1 << READ) | (1 << DESCRIBE)


@pytest.mark.integration
def test_config_apis_check_describe_configs_and_alter_configs(server: ServerProcess) -> None:
    describe_configs, alter_configs = 10, 11  # Kafka's AclOperation codes
    session = "consumer.session.timeout.ms"

    def alter(client: WireClient, group: str) -> int:
        change = AlterConfigsResource(32, group, [AlterableConfig(session, 0, "50000")])
        response = client.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest([change])
        )
        return int(response.responses[0].error_code)

    def describe(client: WireClient) -> list[tuple[int, str, int]]:
        resources = [DescribeConfigsResource(32, "cfg", None), DescribeConfigsResource(32, "other", None),
                     DescribeConfigsResource(2, "cfg-topic", None), DescribeConfigsResource(4, "", None)]  # fmt: skip
        response = client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources))
        return [(r.resource_type, r.resource_name, r.error_code) for r in response.results]

    with login(server, "admin", "admin-pw") as admin, login(server, "alice", "alice-pw") as alice:
        topics = [MetadataRequestTopic(name="cfg-topic")]
        admin.request(ApiKey.METADATA, 9, MetadataRequest(topics=topics, allow_auto_topic_creation=True))
        assert alter(alice, "cfg") == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert describe(alice) == [
            (32, "cfg", ErrorCode.GROUP_AUTHORIZATION_FAILED),
            (32, "other", ErrorCode.GROUP_AUTHORIZATION_FAILED),
            (2, "cfg-topic", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            (4, "", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ]
        grant(
            admin,
            acl(GROUP, "cfg", "User:alice", alter_configs),
            acl(TOPIC, "cfg-topic", "User:alice", describe_configs),
        )
        assert alter(alice, "cfg") == 0
        assert alter(alice, "other") == ErrorCode.GROUP_AUTHORIZATION_FAILED
        # ALTER_CONFIGS implies DESCRIBE_CONFIGS; the allowed resources are served, in request order.
        assert describe(alice) == [
            (32, "cfg", 0),
            (32, "other", ErrorCode.GROUP_AUTHORIZATION_FAILED),
            (2, "cfg-topic", 0),
            (4, "", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ]
        assert describe(admin) == [(32, "cfg", 0), (32, "other", 0), (2, "cfg-topic", 0), (4, "", 0)]
        # ListConfigResources: DESCRIBE_CONFIGS on the cluster, as Kafka's KafkaApis checks it.
        listing = ListConfigResourcesRequest([32])
        refused = alice.request(ApiKey.LIST_CONFIG_RESOURCES, 1, listing)
        assert refused == ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        grant(admin, acl(CLUSTER, "kafka-cluster", "User:alice", describe_configs))
        assert alice.request(ApiKey.LIST_CONFIG_RESOURCES, 1, listing) == ListConfigResourcesResponse(
            config_resources=[ListedResource("cfg", 32)]
        )


def test_denials_are_logged_once_per_principal_and_resource(server: ServerProcess) -> None:
    with login(server, "alice", "alice-pw") as alice:
        for _ in range(3):
            assert _join(alice, "g9").error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert alice.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest()).groups == []  # filtered, not logged
        fetched = alice.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest("g9", None))
        assert fetched.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        line = "Principal = User:alice is Denied Operation = Read from host = 127.0.0.1 on resource = Group:LITERAL:g9"
        deadline = time.monotonic() + 5
        while line not in server.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    denials = [text for text in server.log_lines if "coordinator.authorizer" in text]
    assert len(denials) == 1 and denials[0].rstrip().endswith(line), denials


@pytest.mark.integration
def test_share_group_apis_are_authorized(server: ServerProcess) -> None:
    """Kafka 4.4's checks: READ group + DESCRIBE topics to join, DESCRIBE group (+ topics) to
    describe and describe offsets, READ group + READ topics to alter offsets, DELETE group + READ
    topics to delete them (docs/share-groups.md, "ACLs")."""
    with login(server, "admin", "admin-pw") as admin, login(server, "alice", "alice-pw") as alice:
        topics = [MetadataRequestTopic(name=name) for name in ("s1", "s2")]
        admin.request(ApiKey.METADATA, 9, MetadataRequest(topics=topics, allow_auto_topic_creation=True))

        def join(topic: str, epoch: int = 0) -> Any:
            request = ShareGroupHeartbeatRequest(
                "sg", "m1", epoch, subscribed_topic_names=[topic] if epoch == 0 else None
            )
            return alice.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, request)

        def describe() -> Any:
            return alice.request(
                ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(["sg"], True)
            ).groups[0]

        def offsets(*names: str) -> Any:
            wanted = [DescribeShareGroupOffsetsRequestTopic(n, [0]) for n in names] if names else None
            request = DescribeShareGroupOffsetsRequest([DescribeShareGroupOffsetsRequestGroup("sg", wanted)])
            return alice.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, request).groups[0]

        def alter(*names: str) -> Any:
            parts = [AlterShareGroupOffsetsRequestPartition(0, 0)]
            request = AlterShareGroupOffsetsRequest(
                "sg", [AlterShareGroupOffsetsRequestTopic(n, parts) for n in names]
            )
            return alice.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, request)

        def delete(*names: str) -> Any:
            request = DeleteShareGroupOffsetsRequest(
                "sg", [DeleteShareGroupOffsetsRequestTopic(n) for n in names]
            )
            return alice.request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, request)

        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert join("s1").error_code == denied
        assert describe().error_code == denied
        assert offsets("s1").error_code == denied
        assert alter("s1").error_code == denied
        assert delete("s1").error_code == denied
        grant(admin, acl(GROUP, "sg", "User:alice", READ), acl(TOPIC, "s1", "User:alice", READ))
        # READ on the group and the topic allows altering (an empty group)...
        altered = alter("s1", "s2")
        results = {t.topic_name: [p.error_code for p in t.partitions] for t in altered.responses}
        assert altered.error_code == 0
        assert results == {"s1": [0], "s2": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}
        # ... READ implies DESCRIBE: the offsets of s1 are described, s2's are refused by name and
        # left out of "every topic".
        described = {t.topic_name: t.partitions[0] for t in offsets("s1", "s2").topics}
        assert (described["s1"].error_code, described["s1"].start_offset) == (0, 0)
        assert described["s2"].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert [t.topic_name for t in offsets().topics] == ["s1"]
        refused = join("s2")
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and "s2" in refused.error_message
        joined = join("s1")
        assert joined.error_code == 0
        assert describe().error_code == 0
        # Deleting takes DELETE on the group.
        assert delete("s1").error_code == denied
        assert (
            alice.request(
                ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest("sg", "m1", -1)
            ).error_code
            == 0
        )
        grant(admin, acl(GROUP, "sg", "User:alice", DELETE))
        deleted = {t.topic_name: t.error_code for t in delete("s1", "s2").responses}
        assert deleted == {"s1": 0, "s2": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
