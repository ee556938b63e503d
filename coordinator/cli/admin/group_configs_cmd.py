"""`coordinator groups configure` and `groups describe --configs`: a group's configs (KIP-848's
``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``) through DescribeConfigs and
IncrementalAlterConfigs on GROUP resources, as ``kafka-configs.sh --entity-type groups`` does."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from coordinator.cli.admin.client import AdminClient
from coordinator.cli.admin.connection import BrokerConnection
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.output import print_json, print_table
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

GROUP_RESOURCE = 32
SET, DELETE = 0, 1
# Kafka's DescribeConfigsResponse.ConfigSource, by code.
SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroupConfigValue:
    group: str
    name: str
    value: str | None
    source: str


def describe_group_configs(conn: BrokerConnection, groups: list[str]) -> list[GroupConfigValue]:
    request = DescribeConfigsRequest([DescribeConfigsResource(GROUP_RESOURCE, g, None) for g in groups])
    response: DescribeConfigsResponse = conn.request(ApiKey.DESCRIBE_CONFIGS, request)
    values = []
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(
                result.error_code, result.error_message or f"configs of group {result.resource_name!r}"
            )
        for c in result.configs:
            source = SOURCES.get(c.config_source, str(c.config_source))
            values.append(GroupConfigValue(result.resource_name, c.name, c.value, source))
    return values


def alter_group_configs(conn: BrokerConnection, group: str, changes: list[AlterableConfig]) -> None:
    request = IncrementalAlterConfigsRequest([AlterConfigsResource(GROUP_RESOURCE, group, changes)])
    response: IncrementalAlterConfigsResponse = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    for result in response.responses:
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(
                result.error_code, result.error_message or f"configs of group {group!r}", explain=False
            )


def parse_changes(settings: list[str] | None, deletions: list[str] | None) -> list[AlterableConfig]:
    """--set NAME=VALUE and --delete NAME as IncrementalAlterConfigs operations."""
    changes: list[AlterableConfig] = []
    for item in settings or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"--set takes NAME=VALUE, not {item!r}")
        changes.append(AlterableConfig(name.strip(), SET, value.strip()))
    changes += [AlterableConfig(name.strip(), DELETE, None) for name in deletions or []]
    if not changes:
        raise UsageError("nothing to change: give --set NAME=VALUE or --delete NAME")
    names = [c.name for c in changes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{', '.join(twice)} given more than once")
    return changes


def print_group_configs(values: list[GroupConfigValue], output_format: str | None) -> None:
    if output_format == "json":
        print_json([{"group": v.group, "name": v.name, "value": v.value, "source": v.source} for v in values])
        return
    print_table(
        ["GROUP", "CONFIG", "VALUE", "SOURCE"], [[v.group, v.name, v.value, v.source] for v in values]
    )


def groups_configure(client: AdminClient, args: argparse.Namespace) -> int:
    changes = parse_changes(args.set, args.delete)
    conn = client.bootstrap_connection()
    alter_group_configs(conn, args.group, changes)
    print_group_configs(describe_group_configs(conn, [args.group]), args.format)
    return 0
