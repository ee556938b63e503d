"""`coordinator topics ...` through the gateway: the topics are the upstream cluster's (Tansu, Kafka)."""

from __future__ import annotations

import time

import pytest

from tests.admin.support import cli, table_rows
from tests.gateway.conftest import Upstream
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration


def test_topics_through_the_gateway_are_upstream_topics(gateway: ServerProcess, upstream: Upstream) -> None:
    direct_bootstrap = upstream.bootstrap
    created = cli(
        gateway.bootstrap, "topics", "create", "gw_topics", "--partitions", "2", "--replication-factor", "1"
    )
    assert created.code == 0, created
    # Upstream itself has the topic: the gateway forwarded CreateTopics.
    direct = cli(direct_bootstrap, "topics", "describe", "gw_topics", "--format", "json")
    assert direct.code == 0 and [p["partition"] for p in direct.json()[0]["partitions"]] == [0, 1], direct

    deadline = time.monotonic() + 10  # the gateway's catalog follows upstream metadata
    while ["gw_topics", "2", "1"] not in table_rows(cli(gateway.bootstrap, "topics", "list").out):
        assert time.monotonic() < deadline, "the gateway never listed the new topic"
        time.sleep(0.2)
    described = cli(gateway.bootstrap, "topics", "describe", "gw_topics")
    assert [r[:2] for r in table_rows(described.out)[1:]] == [["gw_topics", "0"], ["gw_topics", "1"]]

    deleted = cli(gateway.bootstrap, "topics", "delete", "gw_topics")
    assert deleted.code == 0, deleted
    deadline = time.monotonic() + 10  # Kafka's brokers learn a deletion from the controller
    while (gone := cli(direct_bootstrap, "topics", "describe", "gw_topics")).code == 0:
        assert time.monotonic() < deadline, "the topic is still upstream"
        time.sleep(0.2)
    assert gone.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.err, gone
