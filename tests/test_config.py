from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.cli.main import build_parser
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.settings import settings_of
from coordinator.server.config import (
    SETTINGS,
    Config,
    ConfigError,
    _normalise_key,
    load_config,
    readme_with_settings,
    settings_markdown,
)


def test_defaults_are_kafkas() -> None:
    config = load_config(env={})
    assert config.group_initial_rebalance_delay_ms == 3000
    assert config.group_min_session_timeout_ms == 6000
    assert config.group_max_session_timeout_ms == 1800000
    assert config.offsets_retention_minutes == 10080
    assert config.offset_metadata_max_bytes == 4096
    assert config.storage == "sqlite:///coordinator.db"
    assert (config.host, config.port) == ("127.0.0.1", 9092)


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('"group.initial.rebalance.delay.ms" = 100\nport = 9000\n[group.max]\n"size" = 5\n')
    env = {"COORDINATOR_GROUP_INITIAL_REBALANCE_DELAY_MS": "200", "COORDINATOR_NUM_PARTITIONS": "4"}
    config = load_config(cli={"num_partitions": 8}, env=env, config_file=path)
    assert config.group_initial_rebalance_delay_ms == 200
    assert config.port == 9000
    assert config.group_max_size == 5
    assert config.num_partitions == 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env": {"COORDINATOR_NO_SUCH": "1"}}, "COORDINATOR_NO_SUCH"),
        ({"env": {"COORDINATOR_GROUP_MAX_SIZE": "many"}}, "group.max.size"),
        ({"cli": {"group_min_session_timeout_ms": 10, "group_max_session_timeout_ms": 5}}, "must not exceed"),
        ({"cli": {"auto_create_topics_enable": "maybe"}}, "auto.create.topics.enable"),
        (
            {"cli": {"group_consumer_heartbeat_policy": "sooner"}},
            "group.consumer.heartbeat.policy must be handover",
        ),
    ],
)
def test_bad_settings_have_readable_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(**{"env": {}, **kwargs})  # type: ignore[arg-type]


def test_bad_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(env={}, config_file=tmp_path / "missing.toml")
    path = tmp_path / "bad.toml"
    path.write_text("what = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(env={}, config_file=path)
    path.write_text("unknown_key = 1")
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(env={}, config_file=path)


def test_every_kafka_knob_is_a_dashed_flag() -> None:
    args = build_parser().parse_args(
        ["serve", "--group-initial-rebalance-delay-ms", "0", "--auto-create-topics-enable", "false"]
    )
    config = load_config(
        cli={k: v for k, v in vars(args).items() if k not in ("command", "config_file")}, env={}
    )
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.auto_create_topics_enable is False


def test_heartbeat_policy_flag_reaches_the_core() -> None:
    args = build_parser().parse_args(["serve", "--group-consumer-heartbeat-policy", "kafka"])
    config = load_config(
        cli={k: v for k, v in vars(args).items() if k not in ("command", "config_file")}, env={}
    )
    assert config.group_settings().group_consumer_heartbeat_policy == "kafka"
    assert load_config(env={}).group_settings().group_consumer_heartbeat_policy == "handover"


def test_advertised_listener() -> None:
    assert Config(host="0.0.0.0").listener_host == "127.0.0.1"
    assert Config(advertised_host="coord", advertised_port=1).listener_host == "coord"


def test_the_readme_settings_table_is_current() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert readme_with_settings(readme) == readme, (
        "README.md's settings table is stale: python -m coordinator.server.config --update-readme README.md"
    )
    assert settings_markdown() in readme


def test_every_setting_is_a_flag_an_environment_variable_and_a_toml_key(tmp_path: Path) -> None:
    parser = build_parser()
    path = tmp_path / "c.toml"
    for s in SETTINGS:
        args = parser.parse_args(["serve", s.flag, "x"])
        assert getattr(args, s.name) == "x", s.flag
        assert _normalise_key(s.env.removeprefix("COORDINATOR_")) == s.name
        for key in (s.label, s.name) if s.default is not None else ():  # TOML has no null
            path.write_text(f'"{key}" = {tomlkit_value(s.default)}\n')
            assert getattr(load_config(env={}, config_file=path), s.name) == s.default, key


def tomlkit_value(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    return f'"{value}"'


def test_group_settings_are_declared_once_and_passed_to_the_core() -> None:
    config = load_config(env={"COORDINATOR_GROUP_CONSUMER_ASSIGNORS": " Range ,uniform"})
    assert config.group_consumer_assignors == ("range", "uniform")
    group = config.group_settings()
    assert type(group) is BrokerGroupSettings
    names = {s.name for s in settings_of(BrokerGroupSettings)}
    assert names <= {s.name for s in SETTINGS}
    assert all(getattr(group, n) == getattr(config, n) for n in names)


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"port": "70000"}, "port 70000 is not a TCP port"),
        ({"group_max_size": "0"}, "group.max.size must be at least 1"),
        ({"offsets_commit_timeout_ms": "0"}, "offsets.commit.timeout.ms must be positive"),
        ({"offset_metadata_max_bytes": "-1"}, "offset.metadata.max.bytes must be >= 0"),
        ({"log_format": "xml"}, "log-format must be text or json"),
        ({"log_level": "bogus"}, "log-level must be DEBUG or INFO or WARNING or ERROR or CRITICAL"),
        ({"sqlite_synchronous": "off"}, "sqlite-synchronous must be FULL or NORMAL"),
        ({"default_replication_factor": "3"}, "default.replication.factor must be 1 on a one-node cluster"),
        ({"group_consumer_assignors": "uniform,sticky"}, "unknown: sticky"),
        ({"sasl_enabled_mechanisms": "GSSAPI"}, "sasl.enabled.mechanisms: unsupported GSSAPI"),
        ({"group_consumer_heartbeat_interval_ms": "50000"}, "lower than group.consumer.session.timeout.ms"),
        ({"node_id": "one"}, "invalid value 'one' for node-id"),
    ],
)
def test_validation_messages_name_the_setting(cli: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(cli=cli, env={})


def test_the_core_validates_its_settings_too() -> None:
    with pytest.raises(ValueError, match=r"group\.max\.size must be at least 1"):
        BrokerGroupSettings(group_max_size=0)


def test_kubernetes_service_variables_are_not_settings() -> None:
    """A Service named `coordinator` injects these into every pod; the server must still start."""
    injected = {
        "COORDINATOR_SERVICE_HOST": "10.96.0.12",
        "COORDINATOR_SERVICE_PORT": "9092",
        "COORDINATOR_SERVICE_PORT_KAFKA": "9092",
        "COORDINATOR_SERVICE_PORT_METRICS": "9095",
        "COORDINATOR_PORT": "tcp://10.96.0.12:9092",
        "COORDINATOR_PORT_9092_TCP": "tcp://10.96.0.12:9092",
        "COORDINATOR_PORT_9092_TCP_PROTO": "tcp",
        "COORDINATOR_PORT_9092_TCP_PORT": "9092",
        "COORDINATOR_PORT_9092_TCP_ADDR": "10.96.0.12",
        "COORDINATOR_PORT_9095_UDP": "udp://10.96.0.12:9095",
    }
    config = load_config(env={**injected, "COORDINATOR_NUM_PARTITIONS": "3"})
    assert (config.port, config.num_partitions) == (9092, 3)
    # COORDINATOR_PORT holding a port number is still the setting, and bad values are still errors.
    assert load_config(env={**injected, "COORDINATOR_PORT": "19092"}).port == 19092
    with pytest.raises(ConfigError, match="COORDINATOR_PORTS"):
        load_config(env={"COORDINATOR_PORTS": "1"})


def test_the_admin_commands_variables_are_not_settings() -> None:
    env = {
        "COORDINATOR_ADMIN_PASSWORD": "pw",
        "COORDINATOR_ADMIN_BOOTSTRAP": "k:9092",
        "COORDINATOR_NODE_ID": "3",
    }
    assert load_config(env=env).node_id == 3
