"""ListConfigResources (API 74, KIP-1142) on the wire, against Kafka 4.4 for the same requests:
our standalone server and our gateway beside the session broker
(docs/group-configs.md#listing-config-resources)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from coordinator.server import app
from coordinator.server.app import start_server
from coordinator.server.config import Config
from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from protocol.messages.metadata import MetadataRequest
from storage.memory import MemoryData
from storage.records import GroupConfigRecord
from tests.api.test_dispatcher import Client
from tests.kafka.conftest import Sides
from tests.server.test_background_loading import LAST, GatedStore, prefill
from tests.support.kafka_broker import KafkaCluster
from tests.support.server import ServerProcess
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE = 0, 1
SESSION = "consumer.session.timeout.ms"
LIST = ApiKey.LIST_CONFIG_RESOURCES


def _request(bootstrap: str, api_key: int, version: int, body: object) -> object:
    with WireClient(bootstrap) as client:
        return client.request(api_key, version, body)


def _listing(bootstrap: str, version: int, *types: int) -> ListConfigResourcesResponse:
    response = _request(bootstrap, LIST, version, ListConfigResourcesRequest(list(types)))
    assert isinstance(response, ListConfigResourcesResponse)
    return response


def _mine(response: ListConfigResourcesResponse, prefix: str) -> list[ConfigResource]:
    """The resources this test made (the session broker has others), in a stable order: Kafka
    lists a type's resources in no particular order."""
    listed = [r for r in response.config_resources if r.resource_name.startswith(prefix)]
    return sorted(listed, key=lambda r: (r.resource_type, r.resource_name))


def _not_groups(response: ListConfigResourcesResponse) -> list[tuple[int, str]]:
    return sorted(
        (r.resource_type, r.resource_name) for r in response.config_resources if r.resource_type != GROUP
    )


def _alter_group(bootstrap: str, group: str, op: int) -> None:
    value = "50000" if op == SET else None
    request = IncrementalAlterConfigsRequest(
        [AlterConfigsResource(GROUP, group, [AlterableConfig(SESSION, op, value)])], False
    )
    response = _request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    assert [r.error_code for r in response.responses] == [0], response  # type: ignore[attr-defined]


def _node_ids(bootstrap: str) -> list[str]:
    response = _request(bootstrap, ApiKey.METADATA, 12, MetadataRequest(topics=[]))
    return sorted(str(b.node_id) for b in response.brokers)  # type: ignore[attr-defined]


@pytest.fixture(params=["standalone", "gateway"])
def beside(request: pytest.FixtureRequest, kafka_broker: KafkaCluster) -> Iterator[Sides]:
    fixture = "standalone_beside_kafka" if request.param == "standalone" else "gateway_on_kafka"
    ours: ServerProcess = request.getfixturevalue(fixture)
    yield Sides(kafka=kafka_broker.bootstrap, ours=ours.bootstrap)


def test_groups_with_dynamic_configs_are_listed_as_kafka_lists_them(beside: Sides, unique: str) -> None:
    answers = []
    for bootstrap in (beside.kafka, beside.ours):
        before = _mine(_listing(bootstrap, 1, GROUP), unique)
        _alter_group(bootstrap, f"{unique}-kept", SET)
        _alter_group(bootstrap, f"{unique}-emptied", SET)
        _alter_group(bootstrap, f"{unique}-emptied", DELETE)
        after = _listing(bootstrap, 1, GROUP)
        answers.append((before, after.error_code, _mine(after, unique)))
    kafka, ours = answers
    assert kafka == ([], 0, [ConfigResource(f"{unique}-kept", GROUP)])
    assert ours == kafka


@pytest.mark.parametrize(
    ("version", "types"),
    [(0, ()), (1, (CLIENT_METRICS,)), (1, (3,)), (1, (GROUP, 0)), (1, (TOPIC, 64))],
    ids=["v0", "client-metrics", "type-3", "group-and-unknown", "topic-and-unknown"],
)
def test_what_neither_lists_and_the_types_a_version_does_not_know(
    beside: Sides, version: int, types: tuple[int, ...]
) -> None:
    kafka, ours = (_listing(bootstrap, version, *types) for _, bootstrap in beside.items())
    assert kafka.config_resources == []  # no client metrics resources on the session broker
    assert ours == kafka


def test_standalone_lists_its_topics_and_itself_as_kafka_does(
    kafka_broker: KafkaCluster, standalone_beside_kafka: ServerProcess, unique: str
) -> None:
    sides = Sides(kafka=kafka_broker.bootstrap, ours=standalone_beside_kafka.bootstrap)
    answers = []
    for bootstrap in (sides.kafka, sides.ours):
        created = _request(
            bootstrap,
            ApiKey.CREATE_TOPICS,
            7,
            CreateTopicsRequest([CreatableTopic(f"{unique}-topic", 1, 1)], timeout_ms=30000),
        )
        assert [t.error_code for t in created.topics] == [0], created  # type: ignore[attr-defined]
        topics = _mine(_listing(bootstrap, 1, TOPIC), unique)
        brokers = _listing(bootstrap, 1, BROKER)
        everything = _listing(bootstrap, 1)
        types_in_order = list(dict.fromkeys(r.resource_type for r in everything.config_resources))
        answers.append(
            (
                topics,
                [r.resource_type for r in brokers.config_resources] == [BROKER],
                [r.resource_name for r in brokers.config_resources] == _node_ids(bootstrap),
                [r for r in types_in_order if r in (BROKER, TOPIC)],
            )
        )
    kafka, ours = answers
    assert kafka == ([ConfigResource(f"{unique}-topic", TOPIC)], True, True, [BROKER, TOPIC])
    assert ours == kafka


def test_gateway_forwards_what_it_does_not_own_and_splits_a_mix(
    kafka_broker: KafkaCluster, gateway_on_kafka: ServerProcess, unique: str
) -> None:
    """Topics, brokers and client metrics are upstream's: a request without GROUP is forwarded;
    GROUP with other types goes upstream for the others, and our GROUP resources come first in
    upstream's answer (docs/group-configs.md#gateway-mode)."""
    kafka, gateway = kafka_broker.bootstrap, gateway_on_kafka.bootstrap
    for version, types in [(0, ()), (1, (TOPIC,)), (1, (BROKER, CLIENT_METRICS))]:
        assert _listing(gateway, version, *types) == _listing(kafka, version, *types)
    created = _request(
        kafka,
        ApiKey.CREATE_TOPICS,
        7,
        CreateTopicsRequest([CreatableTopic(f"{unique}-topic", 1, 1)], timeout_ms=30000),
    )
    assert [t.error_code for t in created.topics] == [0], created  # type: ignore[attr-defined]
    _alter_group(gateway, f"{unique}-ours", SET)
    _alter_group(kafka, f"{unique}-kafkas", SET)
    topic = ConfigResource(f"{unique}-topic", TOPIC)
    for types in [(), (GROUP, TOPIC), (TOPIC, BROKER, GROUP)]:
        theirs, ours = _listing(kafka, 1, *types), _listing(gateway, 1, *types)
        assert (theirs.error_code, ours.error_code) == (0, 0)
        assert _mine(theirs, unique) == [topic, ConfigResource(f"{unique}-kafkas", GROUP)]
        assert _mine(ours, unique) == [topic, ConfigResource(f"{unique}-ours", GROUP)]
        assert _not_groups(ours) == _not_groups(theirs)
        types_in_order = list(dict.fromkeys(r.resource_type for r in ours.config_resources))
        assert types_in_order == list(dict.fromkeys(r.resource_type for r in theirs.config_resources))
        assert types_in_order[0] == GROUP
    # the same request as Kafka's Admin.listConfigResources() without a filter sends
    everything = _listing(gateway, 1)
    assert {r.resource_type for r in everything.config_resources} >= {GROUP, BROKER, TOPIC}


@pytest.mark.asyncio
async def test_a_split_listing_waits_for_the_gateways_shards(
    kafka_broker: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a single gateway node loads its shards, a listing of every type is held, as one
    of GROUP alone is, and then lists the groups of the last shard with upstream's resources."""
    store = GatedStore(MemoryData())
    await prefill(store)
    await store.write([GroupConfigRecord(LAST, SESSION, "40000")])
    monkeypatch.setattr(app, "open_store", lambda url, **options: store)
    config = Config(
        host="127.0.0.1", port=0, storage="memory://", upstream_bootstrap_servers=kafka_broker.bootstrap
    )
    server = await start_server(config)
    client = await Client.connect(server.port, "split")
    try:
        listing = client.send(LIST, 1, ListConfigResourcesRequest([]))
        await asyncio.sleep(0.05)
        for gate in store.gates.values():
            gate.set()
        received, response = await client.receive(LIST, 1)
        assert received == listing
        assert response.error_code == 0
        assert response.config_resources[0] == ConfigResource(LAST, GROUP)
        assert {r.resource_type for r in response.config_resources} >= {GROUP, BROKER}
    finally:
        for gate in store.gates.values():
            gate.set()
        await client.close()
        await server.shutdown()
