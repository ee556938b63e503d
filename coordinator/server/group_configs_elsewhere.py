"""GROUP config resources of groups whose shard another node holds (docs/multinode.md#group-configs).

As in Kafka, where group configs live in the cluster metadata, every node answers them: a node
that does not hold the group's shard reads the group's stored overrides (one query) and answers
DescribeConfigs with the values and sources the owner would give; IncrementalAlterConfigs is
validated as the owner validates it, against the stored overrides, written in one transaction
that bumps the group configs' change counter (the owner's next poll reloads them) and answered
once durable. The request's other resources go on to the usual handlers. ListConfigResources lists the GROUP
resources of every shard from storage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from typing import Any

from coordinator.api.amend import amend
from coordinator.api.config_listing import asked_types
from coordinator.api.config_resources import GROUP, ConfigResources, answer_alter, answer_describe
from coordinator.api.routes import Handler, Routes
from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import DynamicGroupConfigs
from coordinator.core.result import Result
from coordinator.core.shard_map import ShardMap
from coordinator.server.runtime import Runtime
from coordinator.server.tasks import StorageAnswers
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResult
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
)
from protocol.messages.list_config_resources import (
    ConfigResource,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from storage.base import StoreError
from storage.ownership import LeaseTable
from storage.records import TopicRecord

log = logging.getLogger(__name__)

UNREADABLE = "the group configs could not be read from storage, try again later"
UNSTORED = "the group config could not be stored"


class GroupConfigsElsewhere:
    def __init__(
        self,
        runtime: Runtime,
        leases: LeaseTable,
        shard_map: ShardMap,
        node_id: Callable[[], int],
        topic: Callable[[str], TopicRecord | None],
    ) -> None:
        self.runtime = runtime
        self.leases = leases
        self.shard_map = shard_map
        self.node_id = node_id
        self.topic = topic
        self.answers = StorageAnswers(runtime.apply)

    def install(self, routes: Routes) -> None:
        routes.wrap(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest, self._describe)
        routes.wrap(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, self._alter)
        routes.wrap(ApiKey.LIST_CONFIG_RESOURCES, ListConfigResourcesRequest, self._list)

    def _elsewhere(self, ctx: RequestContext, resources: list[Any]) -> list[Any]:
        """The GROUP resources of groups no shard served or loading here holds (an empty name
        is refused as invalid by the usual handler)."""
        return [
            r
            for r in resources
            if r.resource_type == GROUP
            and r.resource_name
            and self.shard_map.status(r.resource_name, ctx.now_ms) is None
        ]

    async def _stored(self, group_ids: Collection[str]) -> ConfigResources:
        """The config resources as the groups' owner sees them: their stored overrides."""
        coordinator = self.runtime.coordinator
        group_configs = DynamicGroupConfigs(coordinator.config)
        group_configs.load(await self.leases.group_configs(group_ids))
        return ConfigResources(coordinator.config, group_configs, self.node_id, self.topic)

    def _describe(self, inner: Handler[DescribeConfigsRequest]) -> Handler[DescribeConfigsRequest]:
        def handle(ctx: RequestContext, req: DescribeConfigsRequest) -> Result:
            elsewhere = self._elsewhere(ctx, req.resources)
            if not elsewhere:
                return inner(ctx, req)
            names = {r.resource_name for r in elsewhere}

            async def answer() -> Result:
                answers: Iterator[DescribeConfigsResult]
                try:
                    configs = await self._stored(names)
                except StoreError as exc:
                    log.error("cannot read the group configs of %s: %s", sorted(names), exc)
                    answers = iter([_unreadable(DescribeConfigsResult, r) for r in elsewhere])
                else:
                    sub = DescribeConfigsRequest(elsewhere, req.include_synonyms, req.include_documentation)
                    answers = iter(configs.describe_response(sub).results)
                return answer_describe(_in_order(names, answers))(inner)(ctx, req)

            self.answers.spawn(answer)
            return Result()

        return handle

    def _alter(
        self, inner: Handler[IncrementalAlterConfigsRequest]
    ) -> Handler[IncrementalAlterConfigsRequest]:
        def handle(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> Result:
            elsewhere = self._elsewhere(ctx, req.resources)
            if not elsewhere:
                return inner(ctx, req)
            names = {r.resource_name for r in elsewhere}

            async def answer() -> Result:
                answers: Iterator[AlterConfigsResourceResponse]
                try:
                    configs = await self._stored(names)
                except StoreError as exc:
                    log.error("cannot read the group configs of %s: %s", sorted(names), exc)
                    answers = iter([_unreadable(AlterConfigsResourceResponse, r) for r in elsewhere])
                else:
                    sub = IncrementalAlterConfigsRequest(elsewhere, req.validate_only)
                    response, writes, _ = configs.plan_alter(sub)
                    if writes:
                        try:
                            await self.leases.change_group_configs(writes)
                        except StoreError as exc:
                            log.error("cannot store the group configs of %s: %s", sorted(names), exc)
                            for result in response.responses:
                                if not result.error_code:
                                    result.error_code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                                    result.error_message = UNSTORED
                    answers = iter(response.responses)
                return answer_alter(_in_order(names, answers))(inner)(ctx, req)

            self.answers.spawn(answer)
            return Result()

        return handle

    def _list(self, inner: Handler[ListConfigResourcesRequest]) -> Handler[ListConfigResourcesRequest]:
        """GROUP resources are listed from storage: the groups of every shard, held here or not."""

        def handle(ctx: RequestContext, req: ListConfigResourcesRequest) -> Result:
            asked = asked_types(ctx.api_version, req)
            if asked is None or GROUP not in asked:
                return inner(ctx, req)

            async def answer() -> Result:
                try:
                    stored = await self.leases.group_configs()
                except StoreError as exc:
                    log.error("cannot read the group configs: %s", exc)
                    amend(ctx, _unlisted)
                else:
                    amend(ctx, _listing({r.group_id for r in stored}))
                return inner(ctx, req)

            self.answers.spawn(answer)
            return Result()

        return handle

    async def close(self) -> None:
        await self.answers.close()


def _in_order(names: set[str], answers: Iterator[Any]) -> Callable[[RequestContext, int, str], Any]:
    """Hands out the answers of the resources answered here, in request order."""

    def answer(_ctx: RequestContext, resource_type: int, name: str) -> Any:
        return next(answers) if resource_type == GROUP and name in names else None

    return answer


def _unreadable(result_type: Any, resource: Any) -> Any:
    return result_type(
        int(ErrorCode.UNKNOWN_SERVER_ERROR), UNREADABLE, resource.resource_type, resource.resource_name
    )


def _listing(group_ids: set[str]) -> Callable[[ListConfigResourcesResponse], None]:
    """The GROUP resources of a listing replaced by the groups with stored configs (they come
    first, in Kafka's order of types)."""

    def edit(response: ListConfigResourcesResponse) -> None:
        if not response.error_code:
            others = [r for r in response.config_resources if r.resource_type != GROUP]
            response.config_resources = [ConfigResource(g, GROUP) for g in sorted(group_ids)] + others

    return edit


def _unlisted(response: ListConfigResourcesResponse) -> None:
    if not response.error_code:
        response.error_code, response.config_resources = int(ErrorCode.UNKNOWN_SERVER_ERROR), []
