"""SASL to upstream (PLAIN and SCRAM), against a coordinator in standalone mode as the upstream:
the gateway's own connections authenticate, and refused credentials are reported once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gateway.conftest import running_gateway
from tests.support.server import REPO, start_server

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_to_upstream(tmp_path: Path, mechanism: str) -> None:
    storage = f"sqlite:///{tmp_path / 'upstream.db'}"
    scram = "SCRAM-SHA-512" if mechanism == "PLAIN" else mechanism
    subprocess.run(
        [sys.executable, "-m", "coordinator", "users", "add", "svc", "--password", "right-pw",
         "--mechanism", scram, "--storage", storage],
        cwd=REPO, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    upstream = start_server(
        storage, {"security-protocol": "SASL_PLAINTEXT", "cluster-id": "upstream-cluster"}
    )
    try:
        settings = {
            "upstream-security-protocol": "SASL_PLAINTEXT",
            "upstream-sasl-mechanism": mechanism,
            "upstream-sasl-username": "svc",
        }
        with running_gateway(
            upstream.bootstrap, **settings, **{"upstream-sasl-password": "right-pw"}
        ) as good:
            expected = "gateway mode: upstream cluster upstream-cluster, 1 brokers"
            deadline = time.monotonic() + 10
            while expected not in good.log_text():
                assert time.monotonic() < deadline, good.log_text()
                time.sleep(0.1)
        with running_gateway(
            upstream.bootstrap, **settings, **{"upstream-sasl-password": "Wr0ng-Pa55"}
        ) as bad:
            time.sleep(3.5)  # the first attempt and a couple of retries
            log = bad.log_text()
            assert log.count("refused the credentials of 'svc'") == 1, log
            assert "credentials error" in log and "Wr0ng-Pa55" not in log
    finally:
        upstream.stop()
