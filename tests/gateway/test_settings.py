"""Gateway settings and the advertised API versions (no server needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from coordinator.gateway.versions import (
    ADD_OFFSETS_TO_TXN,
    FORWARDED_MAX,
    TXN_OFFSET_COMMIT,
    advertised_versions,
)
from coordinator.server.config import ConfigError, load_config
from protocol.apis import SERVED_VERSIONS, ApiKey
from tests.support.server import REPO


def _config(**values: object):  # type: ignore[no-untyped-def]
    return load_config(cli=values, env={})


def test_gateway_mode_is_off_unless_upstream_is_set() -> None:
    assert not _config().gateway_mode
    config = _config(upstream_bootstrap_servers="a:9092, b:9093", gateway_broker_port_base=9100)
    assert config.gateway_mode and config.gateway_broker_port_base == 9100


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"upstream_bootstrap_servers": "nohost"}, "'nohost' is not HOST:PORT"),
        ({"upstream_bootstrap_servers": "h:99999"}, "'h:99999' is not HOST:PORT"),
        (
            {"upstream_bootstrap_servers": "h:1", "upstream_security_protocol": "TLS"},
            "upstream.security.protocol",
        ),
        (
            {"upstream_bootstrap_servers": "h:1", "upstream_security_protocol": "SASL_SSL"},
            "upstream.sasl.username is required",
        ),
        (
            {
                "upstream_bootstrap_servers": "h:1",
                "upstream_security_protocol": "SASL_PLAINTEXT",
                "upstream_sasl_username": "u",
                "upstream_sasl_mechanism": "GSSAPI",
            },
            "upstream.sasl.mechanism must be PLAIN or SCRAM-SHA-256 or SCRAM-SHA-512",
        ),
        ({"upstream_bootstrap_servers": "h:1", "upstream_ssl_certfile": "c.pem"}, "go together"),
        ({"upstream_bootstrap_servers": "h:1", "upstream_metadata_refresh_ms": 5}, "refresh.ms"),
        (
            {"upstream_bootstrap_servers": "h:1", "gateway_broker_port_base": 70000},
            "gateway.broker.port.base",
        ),
    ],
)
def test_bad_gateway_settings_are_named(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**values)


def test_the_upstream_password_comes_from_the_environment_and_is_never_shown() -> None:
    config = load_config(
        cli={"upstream_bootstrap_servers": "h:1", "upstream_security_protocol": "SASL_SSL",
             "upstream_sasl_username": "svc"},
        env={"COORDINATOR_UPSTREAM_SASL_PASSWORD": "s3cret-pw"},
    )  # fmt: skip
    assert config.upstream_sasl_password == "s3cret-pw"
    assert "s3cret-pw" not in repr(config)


def test_a_bad_upstream_address_on_the_command_line_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "coordinator", "serve", "--upstream-bootstrap-servers", "just-a-host"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "upstream.bootstrap.servers: 'just-a-host' is not HOST:PORT" in result.stderr


def test_advertised_versions_intersect_upstream_and_keep_the_group_apis() -> None:
    upstream = {int(ApiKey.PRODUCE): (0, 11), int(ApiKey.FETCH): (4, 20), int(ApiKey.METADATA): (0, 13),
                int(ApiKey.FIND_COORDINATOR): (0, 6), 22: (0, 5)}  # fmt: skip
    ranges = advertised_versions(upstream)
    assert ranges[ApiKey.PRODUCE] == (0, 11)
    # No newer than the gateway knows; v0-3 are converted to v4 (old_formats.py).
    assert ranges[ApiKey.FETCH] == (0, FORWARDED_MAX[ApiKey.FETCH])
    newer = advertised_versions({int(ApiKey.PRODUCE): (4, 11), int(ApiKey.FETCH): (5, 20)})
    assert newer[ApiKey.PRODUCE] == (4, 11) and newer[ApiKey.FETCH] == (5, FORWARDED_MAX[ApiKey.FETCH])
    assert advertised_versions({int(ApiKey.PRODUCE): (3, 13)})[ApiKey.PRODUCE] == (0, 13)
    assert ranges[ApiKey.METADATA] == (0, SERVED_VERSIONS[ApiKey.METADATA][1])  # rewritten: our codecs
    assert ranges[22] == (0, 5)
    assert ApiKey.LIST_OFFSETS not in ranges  # upstream lacks it
    # KIP-848 and the other group APIs are ours, whatever upstream serves.
    assert ranges[ApiKey.CONSUMER_GROUP_HEARTBEAT] == SERVED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT]
    assert ranges[ApiKey.JOIN_GROUP] == SERVED_VERSIONS[ApiKey.JOIN_GROUP]
    # TxnOffsetCommit is served here; AddOffsetsToTxn is forwarded, so upstream must serve it.
    assert ranges[TXN_OFFSET_COMMIT] == SERVED_VERSIONS[ApiKey.TXN_OFFSET_COMMIT]
    assert ADD_OFFSETS_TO_TXN not in ranges
    assert advertised_versions({**upstream, ADD_OFFSETS_TO_TXN: (0, 9)})[ADD_OFFSETS_TO_TXN] == (0, 4)
    # Upstream lacks the config APIs: GROUP config resources are still served here.
    assert ranges[ApiKey.DESCRIBE_CONFIGS] == SERVED_VERSIONS[ApiKey.DESCRIBE_CONFIGS]
    assert ranges[ApiKey.INCREMENTAL_ALTER_CONFIGS] == SERVED_VERSIONS[ApiKey.INCREMENTAL_ALTER_CONFIGS]
    # Upstream unknown (unreachable at start): the gateway's own ranges.
    assert advertised_versions(None)[ApiKey.PRODUCE] == (0, FORWARDED_MAX[ApiKey.PRODUCE])


def test_list_config_resources_v1_is_advertised_whatever_upstream_serves() -> None:
    """GROUP resources are listed by the gateway (v1); v0 (client metrics only) is upstream's."""
    listing = ApiKey.LIST_CONFIG_RESOURCES
    assert advertised_versions({})[listing] == (1, 1)
    assert advertised_versions({int(listing): (0, 0)})[listing] == (0, 1)
    assert advertised_versions({int(listing): (0, 1)})[listing] == (0, 1)
    assert advertised_versions(None)[listing] == (0, 1)
