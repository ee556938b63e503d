from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli.main import build_parser
from coordinator.server.config import Config, ConfigError, load_config


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
        ({"cli": {"group_consumer_heartbeat_policy": "sooner"}}, "group-consumer-heartbeat-policy"),
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
    assert config.group_config().group_consumer_heartbeat_policy == "kafka"
    assert load_config(env={}).group_config().group_consumer_heartbeat_policy == "handover"


def test_advertised_listener() -> None:
    assert Config(host="0.0.0.0").listener_host == "127.0.0.1"
    assert Config(advertised_host="coord", advertised_port=1).listener_host == "coord"
