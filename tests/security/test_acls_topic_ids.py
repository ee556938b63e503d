"""ACLs on OffsetCommit/OffsetFetch v10: topics named by id are authorized by the name the id
resolves to (the ids are resolved before any check, docs/protocol.md#kafka-44s-group-api-versions)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from tests.security.test_acls import GROUP, PREFIXED, READ, SETTINGS, TOPIC, acl, grant, login
from tests.security.test_sasl import add_user
from tests.support.server import ServerProcess, running_server
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.integration


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[ServerProcess]:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    add_user(url, "admin", "admin-pw", "SCRAM-SHA-256")
    add_user(url, "alice", "alice-pw", "SCRAM-SHA-512")
    with running_server(url, SETTINGS) as proc:
        yield proc


def _ids(admin: WireClient, *names: str) -> dict[str, bytes]:
    topics = [MetadataRequestTopic(name=name) for name in names]
    answer = admin.request(
        ApiKey.METADATA, 12, MetadataRequest(topics=topics, allow_auto_topic_creation=True)
    )
    assert [t.error_code for t in answer.topics] == [0] * len(names)
    return {t.name: t.topic_id for t in answer.topics}


def _commit(client: WireClient, group: str, *topic_ids: bytes) -> dict[bytes, list[int]]:
    request = OffsetCommitRequest(
        group_id=group,
        topics=[
            OffsetCommitRequestTopic(topic_id=t, partitions=[OffsetCommitRequestPartition(0, 5)])
            for t in topic_ids
        ],
    )
    response = client.request(ApiKey.OFFSET_COMMIT, 10, request)
    return {t.topic_id: [p.error_code for p in t.partitions] for t in response.topics}


def test_v10_topic_ids_are_authorized_by_their_names(secured: ServerProcess) -> None:
    with login(secured, "admin", "admin-pw") as admin, login(secured, "alice", "alice-pw") as alice:
        ids = _ids(admin, "allowed-events", "secret-events")
        allowed, secret = ids["allowed-events"], ids["secret-events"]
        grant(
            admin,
            acl(GROUP, "g-ids", "User:alice", READ),
            acl(TOPIC, "allowed-", "User:alice", READ, pattern=PREFIXED),
        )
        assert _commit(alice, "g-ids", allowed, secret) == {
            allowed: [0],
            secret: [ErrorCode.TOPIC_AUTHORIZATION_FAILED],
        }
        assert _commit(admin, "g-ids", secret) == {secret: [0]}
        fetched = alice.request(
            ApiKey.OFFSET_FETCH,
            10,
            OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        "g-ids",
                        topics=[
                            OffsetFetchRequestTopics(topic_id=allowed, partition_indexes=[0]),
                            OffsetFetchRequestTopics(topic_id=secret, partition_indexes=[0]),
                        ],
                    )
                ]
            ),
        )
        codes = {
            t.topic_id: [(p.committed_offset, p.error_code) for p in t.partitions]
            for t in fetched.groups[0].topics
        }
        assert codes == {allowed: [(5, 0)], secret: [(-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]}
        everything = alice.request(
            ApiKey.OFFSET_FETCH,
            10,
            OffsetFetchRequest(groups=[OffsetFetchRequestGroup("g-ids", topics=None)]),
        )
        assert [t.topic_id for t in everything.groups[0].topics] == [allowed]
