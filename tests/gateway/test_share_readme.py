"""The README's "Share groups (queues)" snippet does what its comment says, against a gateway in
front of Tansu."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.conftest import running_gateway, running_tansu
from tests.support.server import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

README_BOOTSTRAP = "127.0.0.1:9092"


def share_snippet() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Share groups (queues)\n", 1)[1].split("\n## ", 1)[0]
    (snippet,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return str(snippet)


def test_the_share_groups_snippet(tmp_path: Path) -> None:
    with running_tansu(tmp_path) as port, running_gateway(f"127.0.0.1:{port}") as gateway:
        script = tmp_path / "share_snippet.py"
        script.write_text(share_snippet().replace(README_BOOTSTRAP, gateway.bootstrap))
        env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
        ran = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout == "['job-0', 'job-1', 'job-2']\n"
