"""One settings object, from defaults <- TOML file <- COORDINATOR_* environment <- command line.

The body of ``Config`` (with the group settings it inherits from ``BrokerGroupSettings``) is the one
table of settings: each field is ``name: type = setting(default, doc, validator, kafka=...)``.
Everything else follows from it: the ``coordinator serve`` flags, the ``COORDINATOR_*``
environment variables, the TOML keys, the messages and the README's settings table. Adding a
setting is one line in that table, then ``python -m coordinator.server.config --update-readme``.

Coordinator knobs keep Apache Kafka's names and defaults (``group.initial.rebalance.delay.ms``
is the field ``group_initial_rebalance_delay_ms``, the env var
``COORDINATOR_GROUP_INITIAL_REBALANCE_DELAY_MS`` and the flag
``--group-initial-rebalance-delay-ms``; in TOML either spelling works).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import ssl
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from coordinator.api.limits import RequestLimits
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.settings import (
    ConfigError,
    Setting,
    at_least,
    non_negative,
    one_of,
    positive,
    require,
    setting,
    settings_of,
    tcp_port,
)
from coordinator.security.scram import MECHANISMS
from coordinator.server.listeners import Listener, ListenerError, parse_listeners, server_ssl_context

__all__ = ["SETTINGS", "Config", "ConfigError", "Setting", "load_config", "settings_markdown"]


def _mechanism_names(value: str) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in value.split(",") if m.strip())


def _sasl_mechanisms(label: str, value: str) -> str | None:
    names = _mechanism_names(value)
    unknown = set(names) - set(MECHANISMS)
    if unknown:
        return f"{label}: unsupported {', '.join(sorted(unknown))} (supported: {', '.join(MECHANISMS)})"
    return None if names else f"{label} must name at least one mechanism"


def _host_ports(label: str, value: str) -> str | None:
    if not value.strip():
        return None
    for server in value.split(","):
        host, _, port = server.strip().rpartition(":")
        if not (host and port.isdigit() and 0 < int(port) <= 65535):
            return f"{label}: {server.strip()!r} is not HOST:PORT"
    return None


def _one_node(label: str, value: int) -> str | None:
    return None if value == 1 else f"{label} must be 1 on a one-node cluster"


@dataclass(frozen=True, slots=True)
class Config(BrokerGroupSettings):
    # Listener and identity
    host: str = setting("127.0.0.1", "listen address")
    port: int = setting(9092, "listen port", tcp_port)
    advertised_host: str | None = setting(
        None,
        "host announced to clients (127.0.0.1 when listening on 0.0.0.0)",
        shown_default="the listen address",
    )
    advertised_port: int | None = setting(None, "port announced to clients", shown_default="the listen port")
    node_id: int = setting(0, "node id")
    cluster_id: str = setting(
        "",
        "cluster id answered in Metadata/DescribeCluster; empty: the one stored in the database (a new "
        "database gets a random one); set, it must match the stored one (--init re-labels)",
        shown_default="the stored one",
    )
    storage: str = setting(
        "sqlite:///coordinator.db", "sqlite:///path.db, postgresql://user:pw@host:port/db or memory://"
    )
    sqlite_synchronous: str = setting(
        "FULL",
        "FULL (every commit fsynced; survives power loss) or NORMAL",
        one_of("FULL", "NORMAL", normalise=str.upper),
    )
    offset_commit_history_retention_ms: int = setting(
        0,
        "keep every accepted offset commit in the commit audit history for this long, read with "
        "`coordinator offsets history` (0 = no history) (ours)",
        non_negative,
        kafka=True,
    )
    group_events_persist: bool = setting(
        False,
        "store group events so that `groups history` and the console survive a restart (ours)",
        kafka=True,
    )
    group_events_retention_ms: int = setting(
        7 * 24 * 3600 * 1000,
        "how long stored group events are kept (at most 200000 rows) (ours)",
        positive,
        kafka=True,
    )
    metrics_host: str = setting("127.0.0.1", "address of the metrics endpoint")
    metrics_port: int = setting(0, "port of /metrics, /healthz and /readyz (0 = off)", tcp_port)
    log_level: str = setting(
        "INFO",
        "DEBUG, INFO, WARNING, ERROR or CRITICAL (any case)",
        one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", normalise=str.upper),
    )
    log_format: str = setting("text", "log line format: text or json", one_of("text", "json"))
    # Kafka-named settings of the server
    offsets_commit_timeout_ms: int = setting(
        5000, "how long a commit may wait for storage", positive, kafka=True
    )
    offsets_topic_num_partitions: int = setting(
        50,
        "group shards (Kafka: partitions of __consumer_offsets); the same on every node of a database",
        at_least(1),
        kafka=True,
    )
    group_coordinator_lease_ms: int = setting(
        10000,
        "PostgreSQL: how long a node owns a shard without renewing it; renewed every third (ours)",
        at_least(300),
        kafka=True,
    )
    group_coordinator_ownership_poll_ms: int = setting(
        250,
        "PostgreSQL: how often a node looks for shards to take or hand over (ours)",
        at_least(10),
        kafka=True,
    )
    auto_create_topics_enable: bool = setting(
        True, "create unknown topics named in Metadata requests", kafka=True
    )
    num_partitions: int = setting(
        1, "partitions of auto-created topics (and CreateTopics with -1)", at_least(1), kafka=True
    )
    default_replication_factor: int = setting(
        1, "replication factor of created topics (one node: always 1)", _one_node, kafka=True
    )
    socket_request_max_bytes: int = setting(
        104857600, "largest request frame; larger closes the connection", at_least(1024), kafka=True
    )
    queued_max_request_bytes: int = setting(
        16 * 1024 * 1024, "bytes of requests queued per connection", kafka=True
    )
    # Connection limits: Kafka's names; the maximum int means "no limit".
    max_connections: int = setting(2**31 - 1, "connections in total", at_least(1), kafka=True)
    max_connections_per_ip: int = setting(4096, "connections per client address", at_least(1), kafka=True)
    connections_max_idle_ms: int = setting(
        600000, "idle connections (and slow partial frames) are closed after this", positive, kafka=True
    )
    queued_max_requests: int = setting(
        500, "requests queued per connection (Kafka: per broker)", at_least(1), kafka=True
    )
    # Back-pressure (docs/gateway.md#back-pressure).
    buffer_memory_bytes: int = setting(
        128 * 1024 * 1024,
        "request and response bytes buffered by all connections together (a frame larger than "
        "this is taken alone); past it, connections are not read until bytes are written (ours)",
        at_least(1024 * 1024),
    )
    connection_unsent_max_bytes: int = setting(
        1024 * 1024,
        "response bytes waiting for a client that does not read; past it, that connection takes no "
        "further requests and the gateway stops reading its upstream connection (ours)",
        at_least(64 * 1024),
    )
    pipelined_commits_per_connection: int = setting(
        16,
        "consecutive OffsetCommits of one connection handled at once, sharing a storage batch "
        "(replies stay in request order); 1: one request at a time, as Kafka",
        at_least(1),
    )
    # Listeners and TLS (coordinator/server/listeners.py). Empty listeners: --host/--port.
    listeners: str = setting(
        "", "listeners, e.g. PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093 (empty: host and port)", kafka=True
    )
    advertised_listeners: str = setting("", "the address announced for each listener", kafka=True)
    listener_security_protocol_map: str = setting(
        "", "security protocol of each listener name, NAME:PROTOCOL,...", kafka=True
    )
    security_protocol: str = setting(
        "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL for the host/port listener", kafka=True
    )
    ssl_certfile: str = setting("", "server certificate chain (PEM)", kafka=True)
    ssl_keyfile: str = setting("", "server private key (PEM)", kafka=True)
    ssl_keyfile_password: str = setting("", "password of the private key", kafka=True)
    ssl_cafile: str = setting("", "CA certificates that sign client certificates (PEM)", kafka=True)
    ssl_client_auth: str = setting("none", "client certificates: none, requested or required", kafka=True)
    # SASL (coordinator/server/authn.py). Users: `coordinator users add`.
    sasl_enabled_mechanisms: str = setting(
        "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN", "SASL mechanisms offered", _sasl_mechanisms, kafka=True
    )
    connections_max_reauth_ms: int = setting(
        0, "session lifetime told to SASL clients (KIP-368; 0 = no expiry)", non_negative, kafka=True
    )
    connection_failed_authentication_delay_ms: int = setting(
        100, "delay of the answer to a failed authentication (KIP-306)", non_negative, kafka=True
    )
    # Authorization (coordinator/security/acl.py). Off unless enabled.
    authorizer_enabled: bool = setting(False, "enforce ACLs", kafka=True)
    super_users: str = setting("", "principals allowed everything, User:admin;User:ops", kafka=True)
    allow_everyone_if_no_acl_found: bool = setting(
        False, "allow everyone on a resource that has no ACL", kafka=True
    )
    # The HTTP port (coordinator/server/http_auth.py).
    console_token_file: str = setting(
        "", "file with the bearer token the console and /api need (needed with the authorizer on)"
    )
    metrics_token_required: bool = setting(False, "/metrics needs the console token too")
    # Consumer lag metrics (coordinator/server/lag.py): sampled when the log ends are known.
    lag_sample_interval_ms: int = setting(
        30000, "how often consumer lag is sampled for the metrics (ours)", positive, kafka=True
    )
    lag_metric_max_series: int = setting(10000, "most lag series exported (ours)", at_least(1), kafka=True)
    # Request limits (coordinator/api/limits.py, docs/hardening.md): one request must not hurt others.
    control_request_max_bytes: int = setting(
        128 * 1024,
        "largest frame of a request that carries only names (all but JoinGroup, SyncGroup, OffsetCommit, "
        "ConsumerGroupHeartbeat, Produce) (ours)",
        at_least(1),
        kafka=True,
    )
    request_max_items: int = setting(
        100_000, "most array entries in one request (ours)", at_least(1), kafka=True
    )
    request_max_groups: int = setting(10_000, "most group ids in one request (ours)", at_least(1), kafka=True)
    group_id_max_chars: int = setting(
        1024, "longest group, instance and client id; member ids 64 more (ours)", at_least(1), kafka=True
    )
    group_member_metadata_max_bytes: int = setting(
        1024 * 1024, "largest member metadata or assignment (ours)", at_least(1), kafka=True
    )
    topic_max_partitions: int = setting(
        10_000, "most partitions of one topic (ours)", at_least(1), kafka=True
    )
    request_max_partitions: int = setting(
        10_000, "most partitions created by one request (ours)", at_least(1), kafka=True
    )

    # Gateway mode (coordinator/gateway/, docs/gateway.md): upstream.bootstrap.servers turns it on.
    upstream_bootstrap_servers: str = setting(
        "", "HOST:PORT[,HOST:PORT] of the upstream cluster (empty: standalone)", _host_ports, kafka=True
    )
    upstream_security_protocol: str = setting(
        "PLAINTEXT",
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL to upstream",
        one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", normalise=str.upper),
        kafka=True,
    )
    upstream_sasl_mechanism: str = setting(
        "PLAIN", "SASL mechanism to upstream", one_of(*MECHANISMS, normalise=str.upper), kafka=True
    )
    upstream_sasl_username: str = setting("", "SASL user name at upstream", kafka=True)
    upstream_sasl_password: str = setting(
        "",
        "SASL password at upstream (or COORDINATOR_UPSTREAM_SASL_PASSWORD; never logged)",
        kafka=True,
        secret=True,
    )
    upstream_ssl_cafile: str = setting("", "CAs trusted for upstream (PEM; empty: the system's)", kafka=True)
    upstream_ssl_certfile: str = setting("", "client certificate chain for upstream (PEM)", kafka=True)
    upstream_ssl_keyfile: str = setting("", "client private key for upstream (PEM)", kafka=True)
    upstream_metadata_refresh_ms: int = setting(
        30000, "how often upstream metadata is refreshed", at_least(100), kafka=True
    )
    upstream_request_timeout_ms: int = setting(
        30000, "timeout of the gateway's own upstream requests", at_least(100), kafka=True
    )
    upstream_connections_per_broker: int = setting(
        4,
        "upstream connections shared by all client connections, per upstream broker (Fetches "
        "and Produce with acks=0 keep one per client); 0: one per client connection (ours)",
        non_negative,
    )
    gateway_broker_port_base: int = setting(
        0,
        "port of the first virtual broker, node #i of listener #k of L on base + i*L + k (0: free ports)",
        tcp_port,
        kafka=True,
    )
    gateway_coordinator_node_id: int = setting(
        2**30, "the gateway's node id as group coordinator (unlike any upstream id)", non_negative, kafka=True
    )

    @property
    def gateway_mode(self) -> bool:
        return bool(self.upstream_bootstrap_servers.strip())

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
        return _mechanism_names(self.sasl_enabled_mechanisms)

    def ssl_context(self) -> ssl.SSLContext:
        return server_ssl_context(
            self.ssl_certfile,
            self.ssl_keyfile,
            self.ssl_cafile,
            self.ssl_client_auth,
            self.ssl_keyfile_password,
        )

    def request_limits(self) -> RequestLimits:
        names = {f.name for f in dataclasses.fields(RequestLimits)}
        return RequestLimits(**{name: getattr(self, name) for name in names})

    def group_settings(self) -> BrokerGroupSettings:
        return BrokerGroupSettings(
            **{s.name: getattr(self, s.name) for s in settings_of(BrokerGroupSettings)}
        )


# Every setting, non-Kafka ones first, each group in declaration order.
SETTINGS: Final[tuple[Setting, ...]] = tuple(sorted(settings_of(Config), key=lambda s: s.info.kafka))
_BY_NAME: Final = {s.name: s for s in SETTINGS}


def _normalise_key(key: str) -> str:
    return key.strip().lower().replace(".", "_").replace("-", "_")


def _coerce(name: str, raw: Any) -> Any:
    """A value from a file, the environment or a flag as the setting's type."""
    s = _BY_NAME[name]
    kind = s.annotation
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
        if kind.startswith("tuple"):  # a comma-separated list (or a TOML array)
            items = raw if isinstance(raw, list) else str(raw).split(",")
            return tuple(str(item).strip().lower() for item in items if str(item).strip())
        return str(raw)
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {s.label}") from None


def _validate(config: Config) -> Config:
    """The checks that span settings of the server (each setting's own ran when it was built)."""
    if config.gateway_mode and config.upstream_security_protocol.upper().startswith("SASL"):
        require(
            bool(config.upstream_sasl_username),
            "upstream.sasl.username is required with a SASL upstream.security.protocol",
        )
    require(
        bool(config.upstream_ssl_certfile) == bool(config.upstream_ssl_keyfile),
        "upstream.ssl.certfile and upstream.ssl.keyfile go together",
    )
    try:
        listeners = config.listener_specs()
        if any(listener.uses_tls for listener in listeners):
            config.ssl_context()
    except ListenerError as exc:
        raise ConfigError(str(exc)) from None
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
            if name not in _BY_NAME:
                raise ConfigError(f"unknown setting {key!r} in {path}")
            values[name] = _coerce(name, raw)
    environ = os.environ if env is None else env
    for key, raw in environ.items():
        if (
            key.startswith("COORDINATOR_")
            and not key.startswith("COORDINATOR_ADMIN_")
            and not injected_by_kubernetes(key, raw)
        ):
            name = _normalise_key(key[len("COORDINATOR_") :])
            if name not in _BY_NAME:
                raise ConfigError(f"unknown setting in environment variable {key}")
            values[name] = _coerce(name, raw)
    for name, raw in (cli or {}).items():
        if raw is not None:
            if name not in _BY_NAME:
                raise ConfigError(f"unknown setting {name!r}")
            values[name] = _coerce(name, raw)
    return _validate(dataclasses.replace(Config(), **values))


# What Kubernetes injects into every pod for a Service named "coordinator" (docker links did the
# same): COORDINATOR_SERVICE_HOST, COORDINATOR_SERVICE_PORT[_<name>], COORDINATOR_PORT=tcp://ip:port
# and COORDINATOR_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR].
_KUBERNETES_NAME = re.compile(r"COORDINATOR_(SERVICE_HOST|SERVICE_PORT(_.+)?|PORT_\d+_(TCP|UDP|SCTP)(_.+)?)")
_KUBERNETES_URL = re.compile(r"(tcp|udp|sctp)://.*", re.IGNORECASE)


# COORDINATOR_ADMIN_* belong to the admin commands (their bootstrap address and credentials).
def injected_by_kubernetes(key: str, value: str) -> bool:
    """A service-discovery variable, not a setting: COORDINATOR_PORT is ours unless it holds a URL."""
    if key == "COORDINATOR_PORT":
        return _KUBERNETES_URL.fullmatch(value.strip()) is not None
    return _KUBERNETES_NAME.fullmatch(key) is not None


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


# ---- the README's settings table ----------------------------------------------------------

README_BEGIN: Final = (
    "<!-- settings table: generated by python -m coordinator.server.config --update-readme -->"
)
README_END: Final = "<!-- end of settings table -->"


def settings_markdown() -> str:
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    lines.extend(f"| `{s.label}` | {s.shown_default or '(empty)'} | {s.info.doc} |" for s in SETTINGS)
    return "\n".join(lines) + "\n"


def readme_with_settings(readme: str) -> str:
    """``readme`` with the text between the settings-table markers regenerated."""
    start = readme.index(README_BEGIN) + len(README_BEGIN)
    end = readme.index(README_END, start)
    return readme[:start] + "\n" + settings_markdown() + readme[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coordinator.server.config", description="The settings table, for the docs."
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--markdown", action="store_true", help="print the settings table (Markdown)")
    action.add_argument("--update-readme", metavar="PATH", help="regenerate the table in this README")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(settings_markdown())
        return 0
    path = Path(args.update_readme)
    try:
        text = path.read_text(encoding="utf-8")
        updated = readme_with_settings(text)
    except (OSError, ValueError) as exc:
        print(f"cannot update {path}: {exc}", file=sys.stderr)
        return 1
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
