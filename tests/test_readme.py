"""The README's two set-up commands stay true: CI runs the second; this runs the first's server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from protocol.apis import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from tests.support.server import REPO
from tests.support.wire_client import WireClient

README = (REPO / "README.md").read_text()


def setup_commands() -> list[str]:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block is not None, "the README starts with a shell block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_starts_with_serve_and_test_commands() -> None:
    serve, test = setup_commands()[:2]
    assert serve == "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/coordinator serve"
    assert test == "bash .ci/setup && .venv/bin/python -m pytest"
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash .ci/setup" in ci and ".venv/bin/python -m pytest" in ci


# What `pip install .` reads from the checkout; the rest (tests, docs, .venv, jars) is not built.
PROJECT_FILES = ("pyproject.toml", "README.md", "coordinator", "protocol", "storage", "loadtest")
# The wheels of the server's dependencies and build tools, downloaded by .ci/setup.
QUICK_START_WHEELS = REPO / ".cache" / "quickstart-wheels"
# The quick start's promise (README): a light venv. Measured at about 60 MB.
QUICK_START_MAX_BYTES = 150 * 1024 * 1024


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


@pytest.mark.integration
def test_quick_start_sets_up_a_clean_venv_whose_server_answers_api_versions(tmp_path: Path) -> None:
    """The first command as written, in a clean directory: a new venv, `pip install .` (the
    dependencies from the wheels .ci/setup keeps, offline), then `coordinator serve` answering
    ApiVersions."""
    make_venv, install, serve = (part.split() for part in setup_commands()[0].split("&&"))
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, checkout / name)
    assert make_venv[:3] == ["python3", "-m", "venv"]
    # python3: the interpreter running the tests (3.11+); a venv made from a venv is made from its base.
    subprocess.run([sys.executable, *make_venv[1:]], cwd=checkout, check=True, timeout=120)
    assert install == [".venv/bin/pip", "install", "."]
    # Offline: the dependencies come from the wheels .ci/setup downloaded (tests never download).
    assert any(QUICK_START_WHEELS.glob("*.whl")), f"no wheels in {QUICK_START_WHEELS}: run `bash .ci/setup`"
    offline = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(QUICK_START_WHEELS),
    }
    installed = subprocess.run(
        [*install, "--disable-pip-version-check", "--quiet"],
        cwd=checkout,
        env=offline,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    size = tree_bytes(checkout / ".venv")
    assert size < QUICK_START_MAX_BYTES, f"the quick start's venv is {size / 2**20:.0f} MB"

    workdir = tmp_path / "run"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COORDINATOR_", "PYTHON"))} | {
        "COORDINATOR_PORT": "0"
    }
    binary = checkout / serve[0]
    process = subprocess.Popen(
        [str(binary), *serve[1:]], cwd=workdir, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        port = 0
        deadline = time.monotonic() + 60
        for line in process.stderr:
            if match := re.search(r"listening on 127\.0\.0\.1:(\d+)", line):
                port = int(match.group(1))
                break
            assert time.monotonic() < deadline
        assert port, "the server did not start"
        with WireClient(f"127.0.0.1:{port}") as client:
            versions = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("quick-start", "1"))
        assert versions.error_code == 0
        assert {api.api_key for api in versions.api_keys} >= {ApiKey.JOIN_GROUP, ApiKey.OFFSET_COMMIT}
        assert (workdir / "coordinator.db").exists()
    finally:
        process.terminate()
        assert process.wait(15) == 0
        if process.stderr is not None:
            process.stderr.close()


def test_supported_apis_table_lists_every_served_api() -> None:
    from protocol.apis import SERVED_VERSIONS

    section = README.split("## Supported APIs", 1)[1].split("\n## ", 1)[0]
    table = {
        int(key): (int(low), int(high))
        for key, low, high in re.findall(r"^\| [^|]+ \| (\d+) \| (\d+)(?:\u2013(\d+))? \|$", section, re.M)
        for low, high in [(low, high or low)]
    }
    assert table == {int(api): versions for api, versions in SERVED_VERSIONS.items()}


def _headings() -> list[tuple[int, str]]:
    """The README's ## and ### headings, in order (a # line inside a code block is none)."""
    found, fenced = [], False
    for line in README.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^(##|###) (.+)$", line)):
            found.append((len(match.group(1)), match.group(2).strip()))
    return found


def test_the_table_of_contents_lists_every_section() -> None:
    from tests.test_docs import _slug

    contents = README.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^( *)- \[(.+)\]\(#(.+)\)$", contents, re.M)
    sections = [(level, title) for level, title in _headings() if title != "Contents"]
    assert [(len(indent) // 2 + 2, title) for indent, title, _ in listed] == sections
    assert all(anchor == _slug(title) for _, title, anchor in listed)
