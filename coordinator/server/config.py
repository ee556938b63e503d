"""One settings object, from defaults <- TOML file <- COORDINATOR_* environment <- command line.

Coordinator knobs keep Apache Kafka's names and defaults (``group.initial.rebalance.delay.ms``
is the field ``group_initial_rebalance_delay_ms``, the env var
``COORDINATOR_GROUP_INITIAL_REBALANCE_DELAY_MS`` and the flag
``--group-initial-rebalance-delay-ms``; in TOML either spelling works).
"""

from __future__ import annotations

import dataclasses
import os
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from coordinator.core.assignors import ASSIGNORS
from coordinator.core.group_config import GroupConfig
from coordinator.core.heartbeat_interval import HEARTBEAT_POLICIES
from coordinator.security.scram import MECHANISMS
from coordinator.server.listeners import Listener, ListenerError, parse_listeners, server_ssl_context


class ConfigError(ValueError):
    """A setting is unknown or has an invalid value; the message names it."""


@dataclass(frozen=True, slots=True)
class Config:
    # Listener and identity
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None  # defaults to host (or 127.0.0.1 when host is 0.0.0.0)
    advertised_port: int | None = None  # defaults to port
    node_id: int = 0
    cluster_id: str = "kafka-group-coordinator"
    storage: str = "sqlite:///coordinator.db"
    sqlite_synchronous: str = "FULL"
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0  # Prometheus /metrics, /healthz, /readyz; 0 = off
    log_level: str = "INFO"
    log_format: str = "text"
    # Kafka-named settings
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    group_new_member_join_timeout_ms: int = 300000
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5000
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    socket_request_max_bytes: int = 104857600
    queued_max_request_bytes: int = 16 * 1024 * 1024
    # Connection limits (issue 9): Kafka's names; 0 or the maximum int means "no limit".
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    connections_max_idle_ms: int = 600000
    queued_max_requests: int = 500  # per connection here (Kafka: per broker request queue)
    group_max_groups: int = 2**31 - 1  # like Kafka's group.share.max.groups, for classic groups
    # KIP-848 consumer groups (Kafka's group.consumer.* settings)
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: str = "uniform,range"  # the first is the default
    # Not a Kafka setting: how the heartbeat interval varies (docs/kip848-handover.md).
    group_consumer_heartbeat_policy: str = "handover"
    # Listeners and TLS (issue 9; see coordinator/listeners.py). Empty listeners: --host/--port.
    listeners: str = ""
    advertised_listeners: str = ""
    listener_security_protocol_map: str = ""
    security_protocol: str = "PLAINTEXT"
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_keyfile_password: str = ""
    ssl_cafile: str = ""
    ssl_client_auth: str = "none"
    # SASL (issue 9; see coordinator/authn.py). Users: `coordinator users add`.
    sasl_enabled_mechanisms: str = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
    connections_max_reauth_ms: int = 0  # KIP-368; 0 = sessions do not expire
    connection_failed_authentication_delay_ms: int = 100  # KIP-306
    # Authorization (issue 9; see coordinator/acl.py). Off unless enabled.
    authorizer_enabled: bool = False
    super_users: str = ""  # User:admin;User:ops
    allow_everyone_if_no_acl_found: bool = False
    # Consumer lag metrics (see coordinator/server/lag.py): sampled when the log ends are known.
    lag_sample_interval_ms: int = 30000
    lag_metric_max_series: int = 10000

    @property
    def listener_host(self) -> str:
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host

    @property
    def listener_port(self) -> int:
        return self.advertised_port if self.advertised_port is not None else self.port

    def listener_specs(self) -> list[Listener]:
        return parse_listeners(
            self.listeners,
            self.advertised_listeners,
            self.listener_security_protocol_map,
            default_host=self.host,
            default_port=self.port,
            default_protocol=self.security_protocol,
            advertised_host=self.advertised_host,
            advertised_port=self.advertised_port,
        )

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        return tuple(m.strip().upper() for m in self.sasl_enabled_mechanisms.split(",") if m.strip())

    def ssl_context(self) -> ssl.SSLContext:
        return server_ssl_context(
            self.ssl_certfile,
            self.ssl_keyfile,
            self.ssl_cafile,
            self.ssl_client_auth,
            self.ssl_keyfile_password,
        )

    def group_config(self) -> GroupConfig:
        names = {f.name for f in fields(GroupConfig)}
        values = {name: getattr(self, name) for name in names if hasattr(self, name)}
        values["group_consumer_assignors"] = self.consumer_assignors
        return GroupConfig(**values)

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        return tuple(a.strip().lower() for a in self.group_consumer_assignors.split(",") if a.strip())


KAFKA_NAMED = {
    "group_min_session_timeout_ms",
    "group_max_session_timeout_ms",
    "group_initial_rebalance_delay_ms",
    "group_max_size",
    "group_new_member_join_timeout_ms",
    "offsets_retention_minutes",
    "offsets_retention_check_interval_ms",
    "offset_metadata_max_bytes",
    "offsets_commit_timeout_ms",
    "auto_create_topics_enable",
    "num_partitions",
    "default_replication_factor",
    "socket_request_max_bytes",
    "queued_max_request_bytes",
    "max_connections",
    "max_connections_per_ip",
    "connections_max_idle_ms",
    "queued_max_requests",
    "group_max_groups",
    "group_consumer_session_timeout_ms",
    "group_consumer_heartbeat_interval_ms",
    "group_consumer_max_size",
    "group_consumer_assignors",
    "listeners",
    "advertised_listeners",
    "listener_security_protocol_map",
    "security_protocol",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_keyfile_password",
    "ssl_cafile",
    "ssl_client_auth",
    "sasl_enabled_mechanisms",
    "connections_max_reauth_ms",
    "connection_failed_authentication_delay_ms",
    "authorizer_enabled",
    "super_users",
    "allow_everyone_if_no_acl_found",
    "lag_sample_interval_ms",
    "lag_metric_max_series",
}
_FIELDS = {f.name: f for f in fields(Config)}


def kafka_name(field_name: str) -> str:
    return field_name.replace("_", ".")


def _normalise_key(key: str) -> str:
    return key.strip().lower().replace(".", "_").replace("-", "_")


def _coerce(name: str, raw: Any) -> Any:
    field = _FIELDS[name]
    kind = field.type if isinstance(field.type, str) else str(field.type)
    label = kafka_name(name) if name in KAFKA_NAMED else name.replace("_", "-")
    if raw is None:
        return None
    try:
        if kind.startswith("bool"):
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("true", "1", "yes", "on"):
                return True
            if text in ("false", "0", "no", "off"):
                return False
            raise ValueError(raw)
        if kind.startswith("int"):
            if isinstance(raw, bool):
                raise ValueError(raw)
            return int(raw)
        return str(raw)
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {label}") from None


def _validate(config: Config) -> Config:
    def need(condition: bool, message: str) -> None:
        if not condition:
            raise ConfigError(message)

    need(0 <= config.port <= 65535, f"port {config.port} is not a TCP port")
    need(0 <= config.metrics_port <= 65535, f"metrics-port {config.metrics_port} is not a TCP port")
    need(config.group_min_session_timeout_ms > 0, "group.min.session.timeout.ms must be positive")
    need(
        config.group_min_session_timeout_ms <= config.group_max_session_timeout_ms,
        "group.min.session.timeout.ms must not exceed group.max.session.timeout.ms",
    )
    need(config.group_initial_rebalance_delay_ms >= 0, "group.initial.rebalance.delay.ms must be >= 0")
    need(config.group_max_size >= 1, "group.max.size must be at least 1")
    need(config.offsets_retention_minutes >= 1, "offsets.retention.minutes must be at least 1")
    need(
        config.offsets_retention_check_interval_ms >= 1,
        "offsets.retention.check.interval.ms must be positive",
    )
    need(config.offset_metadata_max_bytes >= 0, "offset.metadata.max.bytes must be >= 0")
    need(config.offsets_commit_timeout_ms >= 1, "offsets.commit.timeout.ms must be positive")
    need(config.num_partitions >= 1, "num.partitions must be at least 1")
    need(config.default_replication_factor == 1, "default.replication.factor must be 1 on a one-node cluster")
    need(config.socket_request_max_bytes >= 1024, "socket.request.max.bytes must be at least 1024")
    need(config.max_connections >= 1, "max.connections must be at least 1")
    need(config.max_connections_per_ip >= 1, "max.connections.per.ip must be at least 1")
    need(config.connections_max_idle_ms >= 1, "connections.max.idle.ms must be positive")
    need(config.queued_max_requests >= 1, "queued.max.requests must be at least 1")
    need(config.group_max_groups >= 1, "group.max.groups must be at least 1")
    need(config.group_consumer_session_timeout_ms >= 1, "group.consumer.session.timeout.ms must be positive")
    need(
        1 <= config.group_consumer_heartbeat_interval_ms < config.group_consumer_session_timeout_ms,
        "group.consumer.heartbeat.interval.ms must be positive and lower than group.consumer.session.timeout.ms",
    )
    need(config.group_consumer_max_size >= 1, "group.consumer.max.size must be at least 1")
    need(
        config.group_consumer_heartbeat_policy in HEARTBEAT_POLICIES,
        f"group-consumer-heartbeat-policy must be one of {', '.join(HEARTBEAT_POLICIES)}",
    )
    unknown_assignors = [a for a in config.consumer_assignors if a not in ASSIGNORS]
    need(
        bool(config.consumer_assignors) and not unknown_assignors,
        f"group.consumer.assignors must list assignors among {', '.join(ASSIGNORS)}"
        + (f"; unknown: {', '.join(unknown_assignors)}" if unknown_assignors else ""),
    )
    try:
        listeners = config.listener_specs()
        if any(listener.uses_tls for listener in listeners):
            config.ssl_context()
    except ListenerError as exc:
        raise ConfigError(str(exc)) from None
    unknown = set(config.sasl_mechanisms) - set(MECHANISMS)
    need(
        not unknown,
        f"sasl.enabled.mechanisms: unsupported {', '.join(sorted(unknown))} (supported: {', '.join(MECHANISMS)})",
    )
    need(bool(config.sasl_mechanisms), "sasl.enabled.mechanisms must name at least one mechanism")
    need(config.connections_max_reauth_ms >= 0, "connections.max.reauth.ms must be >= 0")
    need(
        config.connection_failed_authentication_delay_ms >= 0,
        "connection.failed.authentication.delay.ms must be >= 0",
    )
    need(config.log_format in ("text", "json"), "log-format must be text or json")
    need(
        config.sqlite_synchronous.upper() in ("FULL", "NORMAL"),
        "sqlite-synchronous must be FULL or NORMAL",
    )
    need(config.lag_sample_interval_ms >= 1, "lag.sample.interval.ms must be positive")
    need(config.lag_metric_max_series >= 1, "lag.metric.max.series must be at least 1")
    return config


def load_config(
    cli: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: str | Path | None = None,
) -> Config:
    """Merge the sources in precedence order; raises ConfigError with a readable message."""
    values: dict[str, Any] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        for key, raw in _flatten(document).items():
            name = _normalise_key(key)
            if name not in _FIELDS:
                raise ConfigError(f"unknown setting {key!r} in {path}")
            values[name] = _coerce(name, raw)
    environ = os.environ if env is None else env
    for key, raw in environ.items():
        if key.startswith("COORDINATOR_"):
            name = _normalise_key(key[len("COORDINATOR_") :])
            if name not in _FIELDS:
                raise ConfigError(f"unknown setting in environment variable {key}")
            values[name] = _coerce(name, raw)
    for name, raw in (cli or {}).items():
        if raw is not None:
            values[name] = _coerce(name, raw)
    return _validate(dataclasses.replace(Config(), **values))


def _flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML tables become dotted keys: [group] initial.rebalance.delay.ms = 0 works too."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        full = f"{prefix}.{key}" if prefix else key
        if isinstance(value, Mapping):
            flat.update(_flatten(value, full))
        else:
            flat[full] = value
    return flat
