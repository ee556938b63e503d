"""DescribeConfigs and IncrementalAlterConfigs: the config resources this coordinator has.

* GROUP (32): the per-group configs of ``dynamic_configs.py``, described with their value in
  force (DYNAMIC_GROUP_CONFIG when overridden, else the broker setting's source) and altered with SET
  and DELETE; a change is stored (one row per group and name) before it is answered and applied.
* BROKER (4), our node id or the empty name: the group coordinator's broker-level settings
  (``group.*``, ``offsets.*``), read-only (they are start-up settings).
* TOPIC (2): a catalog topic's configs as given at creation (read-only here; an unknown topic is
  UNKNOWN_TOPIC_OR_PARTITION).

Anything else is INVALID_REQUEST with a message. Rules and choices: docs/group-configs.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from coordinator.api.amend import amend, reply
from coordinator.api.routes import Handler, Wrapper
from coordinator.core.admin_write import admin_write
from coordinator.core.context import RequestContext
from coordinator.core.dynamic_configs import BY_NAME, GROUP_CONFIGS, DynamicGroupConfigs, InvalidGroupConfig
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.result import Result
from coordinator.core.settings import settings_of
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from storage.records import GroupConfigRecord, GroupConfigTombstone, TopicRecord

# Kafka's ConfigResource.Type
TOPIC: Final = 2
BROKER: Final = 4
GROUP: Final = 32
RESOURCE_TYPE_NAMES: Final[Mapping[int, str]] = {TOPIC: "TOPIC", BROKER: "BROKER", 8: "BROKER_LOGGER",
                                                 16: "CLIENT_METRICS", GROUP: "GROUP"}  # fmt: skip
# Kafka's DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG: Final = 1
STATIC_BROKER_CONFIG: Final = 4
DEFAULT_CONFIG: Final = 5
DYNAMIC_GROUP_CONFIG: Final = 8
# Kafka's ConfigDef.Type as DescribeConfigs v3+ carries it
UNKNOWN_TYPE, BOOLEAN, STRING, INT, LONG, LIST = 0, 1, 2, 3, 5, 7
_GROUP_CONFIG_TYPES: Final[Mapping[str, int]] = {"int": INT, "boolean": BOOLEAN, "string": STRING}
# Kafka's AlterConfigOp.OpType
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

INVALID_REQUEST: Final = int(ErrorCode.INVALID_REQUEST)
INVALID_CONFIG: Final = int(ErrorCode.INVALID_CONFIG)


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class ConfigResources:
    def __init__(
        self,
        config: BrokerGroupSettings,
        group_configs: DynamicGroupConfigs,
        node_id: Callable[[], int],
        topic: Callable[[str], TopicRecord | None],
    ) -> None:
        self.config = config
        self.group_configs = group_configs
        self.node_id = node_id
        self.topic = topic

    # -- DescribeConfigs -------------------------------------------------------------------------

    def describe(self, ctx: RequestContext, req: DescribeConfigsRequest) -> Result:
        return reply(ctx, self.describe_response(req))

    def describe_response(self, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
        response = DescribeConfigsResponse()
        for resource in req.resources:
            result = DescribeConfigsResult(0, None, resource.resource_type, resource.resource_name)
            try:
                entries = self._entries(resource.resource_type, resource.resource_name, req.include_synonyms)
            except _Refused as refused:
                result.error_code, result.error_message = refused.code, refused.message
            else:
                wanted = resource.configuration_keys  # null or empty: every config, as Kafka reads it
                for entry in entries:
                    if not wanted or entry.name in wanted:
                        if not req.include_documentation:
                            entry.documentation = None
                        result.configs.append(entry)
            response.results.append(result)
        return response

    def _entries(self, resource_type: int, name: str, synonyms: bool) -> list[DescribeConfigsResourceResult]:
        if resource_type == GROUP:
            if not name:
                raise _Refused(INVALID_REQUEST, "Group name must not be empty")
            return list(self._group_entries(name, synonyms))
        if resource_type == BROKER:
            self._check_broker(name)
            return list(self._broker_entries(synonyms))
        if resource_type == TOPIC:
            record = self.topic(name) if name else None
            if record is None:
                raise _Refused(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Topic {name!r} does not exist")
            return [
                DescribeConfigsResourceResult(
                    key, value, read_only=True, config_source=DYNAMIC_TOPIC_CONFIG, config_type=UNKNOWN_TYPE,
                    synonyms=[DescribeConfigsSynonym(key, value, DYNAMIC_TOPIC_CONFIG)] if synonyms else [],
                    documentation=None,
                )
                for key, value in record.configs
            ]  # fmt: skip
        raise _Refused(INVALID_REQUEST, _unserved(resource_type))

    def _group_entries(self, group_id: str, synonyms: bool) -> Iterator[DescribeConfigsResourceResult]:
        overrides = self.group_configs.overrides.get(group_id, {})
        for definition in GROUP_CONFIGS:
            override = overrides.get(definition.name)
            if definition.broker_setting is None:
                # No broker-level synonym (Kafka's ALL_GROUP_CONFIG_SYNONYMS): GroupConfig's default.
                broker_name, broker_value, broker_source = definition.name, definition.default, DEFAULT_CONFIG
            else:
                broker_name = definition.broker_name
                broker_value = _shown(getattr(self.config, definition.broker_setting))
                broker_source = self._broker_source(definition.broker_setting)
            entry = DescribeConfigsResourceResult(
                definition.name,
                override if override is not None else broker_value,
                read_only=False,
                # As Kafka: the first synonym's source (the group's, else the broker setting's).
                config_source=DYNAMIC_GROUP_CONFIG if override is not None else broker_source,
                config_type=_GROUP_CONFIG_TYPES[definition.config_type],
                documentation=definition.doc,
            )
            if synonyms:
                if override is not None:
                    entry.synonyms.append(
                        DescribeConfigsSynonym(definition.name, override, DYNAMIC_GROUP_CONFIG)
                    )
                entry.synonyms.append(DescribeConfigsSynonym(broker_name, broker_value, broker_source))
                if broker_source == STATIC_BROKER_CONFIG and definition.broker_setting is not None:
                    # As Kafka: the broker-level default follows the static setting that hides it
                    # (docs/kafka-differences.md#group-configs).
                    entry.synonyms.append(
                        DescribeConfigsSynonym(
                            broker_name, self._broker_default(definition.broker_setting), DEFAULT_CONFIG
                        )
                    )
            yield entry

    def _check_broker(self, name: str) -> None:
        if name and name != str(self.node_id()):
            raise _Refused(
                INVALID_REQUEST,
                f"Unexpected broker id, expected {self.node_id()} or empty string, but received {name}",
            )

    def _broker_default(self, field_name: str) -> str:
        return str(next(s.default for s in settings_of(self.config) if s.name == field_name))

    def _broker_source(self, field_name: str) -> int:
        default = next(s.default for s in settings_of(self.config) if s.name == field_name)
        return DEFAULT_CONFIG if getattr(self.config, field_name) == default else STATIC_BROKER_CONFIG

    def _broker_entries(self, synonyms: bool) -> Iterator[DescribeConfigsResourceResult]:
        secret = {f.name for f in dataclasses.fields(self.config) if not f.repr}
        for s in settings_of(self.config):
            if not s.info.kafka:
                continue
            value = getattr(self.config, s.name)
            shown = None if s.name in secret else _shown(value)
            source = DEFAULT_CONFIG if value == s.default else STATIC_BROKER_CONFIG
            yield DescribeConfigsResourceResult(
                s.label, shown, read_only=True, config_source=source, is_sensitive=s.name in secret,
                synonyms=[DescribeConfigsSynonym(s.label, shown, source)] if synonyms else [],
                config_type=_config_type(value), documentation=s.info.doc,
            )  # fmt: skip

    # -- IncrementalAlterConfigs -----------------------------------------------------------------

    def incremental_alter(self, ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> Result:
        response, writes, accepted = self.plan_alter(req)
        if not writes:
            return reply(ctx, response)
        for group_id, after in accepted.items():
            self.group_configs.writing(group_id, after)

        def settle() -> None:
            for group_id, after in accepted.items():
                self.group_configs.written(group_id, after)

        def apply() -> None:
            settle()
            for record in writes:
                self.group_configs.apply(record)

        def fail_entries(code: int) -> None:
            settle()
            for result in response.responses:
                if result.resource_type == GROUP and not result.error_code:
                    result.error_code, result.error_message = code, "the group config could not be stored"

        return admin_write(ctx.reply_to, writes, response, apply=apply, fail_entries=fail_entries)

    def plan_alter(
        self, req: IncrementalAlterConfigsRequest
    ) -> tuple[
        IncrementalAlterConfigsResponse,
        list[GroupConfigRecord | GroupConfigTombstone],
        dict[str, dict[str, str]],
    ]:
        """The answer once the writes are durable, the writes, and each altered group's
        overrides once written (validated against the overrides this object holds)."""
        response = IncrementalAlterConfigsResponse()
        writes: list[GroupConfigRecord | GroupConfigTombstone] = []
        accepted: dict[str, dict[str, str]] = {}  # group -> its overrides once written
        seen = _duplicates([(r.resource_type, r.resource_name) for r in req.resources])
        for resource in req.resources:
            result = AlterConfigsResourceResponse(0, None, resource.resource_type, resource.resource_name)
            response.responses.append(result)
            try:
                if (resource.resource_type, resource.resource_name) in seen:
                    raise _Refused(INVALID_REQUEST, "Error due to duplicate resources")
                after = self._alter(resource)
            except _Refused as refused:
                result.error_code, result.error_message = refused.code, refused.message
                continue
            if not req.validate_only:
                writes += self.group_configs.records(resource.resource_name, after)
                accepted[resource.resource_name] = after
        return response, writes, accepted

    def _alter(self, resource: AlterConfigsResource) -> dict[str, str]:
        """The group's overrides after the resource's changes (validated)."""
        kind, name = resource.resource_type, resource.resource_name
        if kind == BROKER:
            self._check_broker(name)
            raise _Refused(INVALID_REQUEST, "the broker settings of this coordinator are set at start-up, "
                                            "not altered at run time")  # fmt: skip
        if kind == TOPIC:
            raise _Refused(INVALID_REQUEST, "topic configs cannot be altered on this coordinator")
        if kind != GROUP:
            raise _Refused(INVALID_REQUEST, _unserved(kind))
        if not name:
            raise _Refused(INVALID_REQUEST, "Default group resources are not allowed.")
        if len({c.name for c in resource.configs}) != len(resource.configs):
            raise _Refused(INVALID_REQUEST, "Error due to duplicate config keys")
        changes: dict[str, str | None] = {}
        for c in resource.configs:
            if c.config_operation == SET:
                if c.value is None:
                    raise _Refused(INVALID_REQUEST, f"Null value not supported for : {c.name}")
                changes[c.name] = c.value
            elif c.config_operation == DELETE:
                changes[c.name] = None
            elif c.config_operation in (APPEND, SUBTRACT):
                if c.name not in BY_NAME:
                    raise _Refused(INVALID_CONFIG, f"Unknown group config name: {c.name}")
                verb = "append" if c.config_operation == APPEND else "subtract"
                raise _Refused(INVALID_CONFIG, f"Config value {verb} is not allowed for config key: {c.name}")
            else:
                raise _Refused(INVALID_REQUEST, f"Unknown alter config operation {c.config_operation}")
        try:
            return self.group_configs.changed(name, changes)
        except InvalidGroupConfig as invalid:
            raise _Refused(INVALID_CONFIG, str(invalid)) from None


def _duplicates(keys: list[tuple[int, str]]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    twice: set[tuple[int, str]] = set()
    for key in keys:
        (twice if key in seen else seen).add(key)
    return twice


def _unserved(resource_type: int) -> str:
    what = RESOURCE_TYPE_NAMES.get(resource_type, f"resource type {resource_type}")
    return f"{what} config resources are not served by this coordinator (GROUP, BROKER and TOPIC are)"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _config_type(value: object) -> int:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INT if -(2**31) <= value < 2**31 else LONG
    if isinstance(value, tuple):
        return LIST
    return STRING


# -- answering some resources before the handler ---------------------------------------------------

# (code, message) for a resource answered before the handler, None to pass it on.
Refusal = Callable[[RequestContext, int, str], "tuple[int, str | None] | None"]
# The whole result of a resource answered before the handler, None to pass it on.
Answer = Callable[[RequestContext, int, str], Any]


def screen_describe(refusal: Refusal) -> Wrapper[DescribeConfigsRequest]:
    """A DescribeConfigs wrapper that answers the resources ``refusal`` refuses itself."""
    return answer_describe(_refusing(refusal, DescribeConfigsResult))


def screen_alter(refusal: Refusal) -> Wrapper[IncrementalAlterConfigsRequest]:
    """An IncrementalAlterConfigs wrapper that answers the resources ``refusal`` refuses itself."""
    return answer_alter(_refusing(refusal, AlterConfigsResourceResponse))


def answer_describe(answer: Answer) -> Wrapper[DescribeConfigsRequest]:
    """A DescribeConfigs wrapper that answers the resources ``answer`` has a result for itself."""
    wrapper: Wrapper[DescribeConfigsRequest] = _screen(answer, DescribeConfigsResponse, "results")
    return wrapper


def answer_alter(answer: Answer) -> Wrapper[IncrementalAlterConfigsRequest]:
    """An IncrementalAlterConfigs wrapper that answers the resources ``answer`` has a result for
    itself."""
    wrapper: Wrapper[IncrementalAlterConfigsRequest] = _screen(
        answer, IncrementalAlterConfigsResponse, "responses"
    )
    return wrapper


def _refusing(refusal: Refusal, result_type: Any) -> Answer:
    def answer(ctx: RequestContext, resource_type: int, name: str) -> Any:
        refused = refusal(ctx, resource_type, name)
        return None if refused is None else result_type(refused[0], refused[1], resource_type, name)

    return answer


def _screen(answer: Answer, response_type: Any, results: str) -> Any:
    def wrap(inner: Handler[Any]) -> Handler[Any]:
        def handle(ctx: RequestContext, req: Any) -> Result:
            resources = list(req.resources)
            answered: dict[int, Any] = {}
            for i, r in enumerate(resources):
                result = answer(ctx, r.resource_type, r.resource_name)
                if result is not None:
                    answered[i] = result
            if not answered:
                return inner(ctx, req)
            if len(answered) == len(resources):
                return reply(ctx, response_type(**{results: [answered[i] for i in range(len(resources))]}))
            req.resources = [r for i, r in enumerate(resources) if i not in answered]

            def in_request_order(response: Any) -> None:
                served = iter(getattr(response, results))
                merged = [answered[i] if i in answered else next(served) for i in range(len(resources))]
                setattr(response, results, merged)

            amend(ctx, in_request_order)
            return inner(ctx, req)

        return handle

    return wrap
