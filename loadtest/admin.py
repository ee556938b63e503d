"""Driver-side preparation of a target: negotiate versions, create the topics, check them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from loadtest.client import Connection
from loadtest.scenario import (
    CONSUMER_MIN_VERSIONS,
    CONSUMER_PREFERRED_VERSIONS,
    PIPELINE_MIN_VERSIONS,
    PIPELINE_PREFERRED_VERSIONS,
    PREFERRED_VERSIONS,
    is_loopback_host,
    parse_hostport,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import CODECS
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

_TIMEOUT = 30.0


class TargetError(Exception):
    """The target cannot run the scenario (unreachable, too old, refuses the topics...)."""


@dataclass(frozen=True, slots=True)
class PreparedTarget:
    versions: dict[int, int]
    partitions: dict[str, int]
    coordinator: str
    data_broker: str = ""  # pipeline mode: the broker leading every partition of the topics


def prepare_target(
    bootstrap: str,
    topics: list[str],
    partitions: int,
    loopback_only: bool,
    probe_group: str,
    group_protocol: str = "classic",
    pipeline: bool = False,
) -> PreparedTarget:
    return asyncio.run(
        _prepare(bootstrap, topics, partitions, loopback_only, probe_group, group_protocol, pipeline)
    )


async def _prepare(
    bootstrap: str,
    topics: list[str],
    partitions: int,
    loopback_only: bool,
    probe_group: str,
    group_protocol: str,
    pipeline: bool = False,
) -> PreparedTarget:
    consumer = group_protocol == "consumer"
    host, port = parse_hostport(bootstrap)
    try:
        conn = await Connection.open(host, port, "loadtest-admin", _TIMEOUT)
    except Exception as exc:
        raise TargetError(f"cannot connect to {bootstrap}: {exc}") from exc
    try:
        versions = await _negotiate(conn, consumer, pipeline)
        await _create_topics(conn, versions, topics, partitions)
        found = await _topic_partitions(conn, versions, topics, consumer)
        coordinator = await _find_coordinator(conn, versions, probe_group)
        data_broker = await _data_broker(conn, versions, topics) if pipeline else ""
    finally:
        conn.close()
    if data_broker and loopback_only and not is_loopback_host(parse_hostport(data_broker)[0]):
        raise TargetError(
            f"{bootstrap} names partition leader {data_broker}, which is not a loopback address "
            "(local masters only load loopback targets)"
        )
    coordinator_host, _ = parse_hostport(coordinator)
    if loopback_only and not is_loopback_host(coordinator_host):
        raise TargetError(
            f"{bootstrap} names coordinator {coordinator}, which is not a loopback address "
            "(local masters only load loopback targets)"
        )
    return PreparedTarget(versions, found, coordinator, data_broker)


async def _negotiate(conn: Connection, consumer: bool = False, pipeline: bool = False) -> dict[int, int]:
    response: ApiVersionsResponse
    response, _, _ = await conn.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("loadtest", "1"), _TIMEOUT)
    if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
        response, _, _ = await conn.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest(), _TIMEOUT)
    if response.error_code:
        raise TargetError(f"ApiVersions failed: {ErrorCode(response.error_code).name}")
    served = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
    versions: dict[int, int] = {}
    preferred_versions = dict(PREFERRED_VERSIONS)
    if consumer:
        preferred_versions.update(CONSUMER_PREFERRED_VERSIONS)
    if pipeline:
        preferred_versions.update(PIPELINE_PREFERRED_VERSIONS)
    for api_key, preferred in preferred_versions.items():
        if api_key not in served:
            raise TargetError(f"the target does not serve {ApiKey(api_key).name}")
        low, high = served[api_key]
        version = min(preferred, high)
        while version >= low and (api_key, version) not in CODECS:
            version -= 1
        if version < low:
            raise TargetError(f"no common version of {ApiKey(api_key).name} (target {low}..{high})")
        versions[api_key] = version
    needs = [("--group-protocol consumer", CONSUMER_MIN_VERSIONS)] if consumer else []
    needs += [("the pipeline mode", PIPELINE_MIN_VERSIONS)] if pipeline else []
    for mode, minimums in needs:
        for api_key, needed in minimums.items():
            if versions[api_key] < needed:
                raise TargetError(
                    f"{mode} needs {ApiKey(api_key).name} v{needed}+, "
                    f"the target serves up to v{served[api_key][1]}"
                )
    return versions


async def _create_topics(
    conn: Connection, versions: dict[int, int], topics: list[str], partitions: int
) -> None:
    version = versions[ApiKey.CREATE_TOPICS]
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name, partitions, 1) for name in topics], timeout_ms=int(_TIMEOUT * 1000)
    )
    response: CreateTopicsResponse
    response, _, _ = await conn.request(ApiKey.CREATE_TOPICS, version, request, _TIMEOUT)
    for result in response.topics:
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise TargetError(
                f"CreateTopics {result.name}: {ErrorCode(result.error_code).name} {result.error_message or ''}"
            )


async def _topic_partitions(
    conn: Connection, versions: dict[int, int], topics: list[str], consumer: bool = False
) -> dict[str, int]:
    version = versions[ApiKey.METADATA]
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name) for name in topics], allow_auto_topic_creation=False
    )
    found: dict[str, int] = {}
    for _ in range(50):  # topic creation may take a moment to show in metadata
        response: MetadataResponse
        response, _, _ = await conn.request(ApiKey.METADATA, version, request, _TIMEOUT)
        found = {t.name or "": len(t.partitions) for t in response.topics if t.error_code == 0}
        if all(found.get(name, 0) > 0 for name in topics):
            if consumer and any(t.topic_id == bytes(16) for t in response.topics if t.name in topics):
                raise TargetError("Metadata names no topic ids (KIP-848 assignments need them)")
            return found
        await asyncio.sleep(0.1)
    raise TargetError(f"topics not visible in metadata after creation: {sorted(set(topics) - set(found))}")


async def _data_broker(conn: Connection, versions: dict[int, int], topics: list[str]) -> str:
    """The one broker leading every partition of the topics (the pipeline mode's data path)."""
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name) for name in topics], allow_auto_topic_creation=False
    )
    for _ in range(50):  # leaders may be elected a moment after creation
        response: MetadataResponse
        response, _, _ = await conn.request(ApiKey.METADATA, versions[ApiKey.METADATA], request, _TIMEOUT)
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        leaders = {p.leader_id for t in response.topics if t.name in topics for p in t.partitions}
        if leaders and all(leader in brokers for leader in leaders):
            if len(leaders) > 1:
                raise TargetError(
                    f"the pipeline mode needs one broker leading every partition (a single broker "
                    f"or a gateway); the topics are led by {sorted(brokers[n] for n in leaders)}"
                )
            return brokers[leaders.pop()]
        await asyncio.sleep(0.1)
    raise TargetError("no leader for the topics' partitions in metadata")


async def _find_coordinator(conn: Connection, versions: dict[int, int], group: str) -> str:
    version = versions[ApiKey.FIND_COORDINATOR]
    request = (
        FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
        if version >= 4
        else FindCoordinatorRequest(key=group, key_type=0)
    )
    response: FindCoordinatorResponse
    response, _, _ = await conn.request(ApiKey.FIND_COORDINATOR, version, request, _TIMEOUT)
    if version >= 4:
        if not response.coordinators:
            raise TargetError("FindCoordinator answered no coordinator")
        entry = response.coordinators[0]
        code, host, port = entry.error_code, entry.host, entry.port
    else:
        code, host, port = response.error_code, response.host, response.port
    if code:
        raise TargetError(f"FindCoordinator: {ErrorCode(code).name}")
    return f"{host}:{port}"
