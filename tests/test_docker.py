"""The container files: linted, valid, and the image's entrypoint works outside Docker."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.server import REPO, ServerProcess

DOCKERFILE = REPO / "docker" / "Dockerfile"
COMPOSE = REPO / "docker" / "docker-compose.yml"


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (.ci/setup installs it)")
        pytest.skip(f"{name} is not installed")
    return found


def _base_stage() -> list[str]:
    lines: list[str] = []
    for raw in DOCKERFILE.read_text().replace("\\\n", " ").splitlines():
        line = raw.strip()
        if line.startswith("FROM ") and lines:
            break
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


@pytest.mark.parametrize(
    "dockerfile",
    [DOCKERFILE, *sorted((REPO / "docker" / "standin").glob("*.Dockerfile"))],
    ids=lambda p: p.name,
)
def test_dockerfile_lints_clean(dockerfile: Path) -> None:
    result = subprocess.run([_tool("hadolint"), str(dockerfile)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_is_valid_for_every_profile() -> None:
    compose = _tool("docker-compose")
    for profiles in ([], ["--profile", "postgres"], ["--profile", "cluster"], ["--profile", "loadtest"]):
        result = subprocess.run(
            [compose, "-f", str(COMPOSE), *profiles, "config", "-q"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr


def _compose_config(variables: dict[str, str]) -> str:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("COORDINATOR_", "POSTGRES_", "LOADTEST_"))
    }
    result = subprocess.run(
        [
            _tool("docker-compose"),
            "-f",
            str(COMPOSE),
            "--profile",
            "postgres",
            "--profile",
            "loadtest",
            "config",
        ],
        capture_output=True,
        text=True,
        env=env | variables,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_base_images_command_lists_what_the_stack_needs() -> None:
    """`python -m tests.docker.base_images` (docs/docker.md) provides the base images outside the
    tests; --list names them: the Dockerfile's and those of the profiles' services."""
    _tool("docker-compose")
    listed = subprocess.run(
        [sys.executable, "-m", "tests.docker.base_images", "--list", "--profile", "postgres"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    images = listed.stdout.split()
    from_lines = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(), re.MULTILINE)
    assert from_lines[0] in images
    assert any(image.startswith("postgres:") for image in images), images
    assert "python -m tests.docker.base_images" in (REPO / "docs" / "docker.md").read_text()


def test_compose_ports_are_variables_the_advertised_address_follows() -> None:
    config = _compose_config(
        {
            "COORDINATOR_KAFKA_PORT": "19092",
            "COORDINATOR_METRICS_HOST_PORT": "19095",
            "COORDINATOR_POSTGRES_KAFKA_PORT": "19093",
            "COORDINATOR_POSTGRES_METRICS_HOST_PORT": "19096",
            "COORDINATOR_PUBLISH_ADDRESS": "0.0.0.0",
        }
    )
    for published in ("0.0.0.0:19092:19092/tcp", "0.0.0.0:19095:9095/tcp", "0.0.0.0:19093:19093/tcp",
                      "0.0.0.0:19096:9095/tcp"):  # fmt: skip
        assert f"- {published}\n" in config
    for port in ("19092", "19093"):
        assert f"COORDINATOR_PORT: '{port}'" in config
        assert f"COORDINATOR_ADVERTISED_PORT: '{port}'" in config
    # The load test shares the coordinator's network namespace and bootstraps on its port.
    assert "- --bootstrap\n    - 127.0.0.1:19092\n" in config


def test_cluster_nodes_have_their_own_ids_and_advertise_their_published_ports() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COORDINATOR_", "POSTGRES_"))}
    ports = {f"COORDINATOR_NODE{n}_KAFKA_PORT": str(19100 + n) for n in (1, 2, 3)}
    result = subprocess.run(
        [_tool("docker-compose"), "-f", str(COMPOSE), "--profile", "cluster", "config"],
        capture_output=True, text=True, env=env | ports, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    services = result.stdout.split("\n  coordinator-node-")[1:]
    assert [block.split(":", 1)[0] for block in services] == ["1", "2", "3"]
    for n, block in zip((1, 2, 3), services, strict=True):
        block = block.split("\n  postgres:", 1)[0]
        assert f"COORDINATOR_NODE_ID: '{n}'" in block
        assert f"COORDINATOR_PORT: '{19100 + n}'" in block
        assert f"COORDINATOR_ADVERTISED_PORT: '{19100 + n}'" in block
        assert f"- 127.0.0.1:{19100 + n}:{19100 + n}/tcp" in block
        assert "COORDINATOR_STORAGE: postgresql://coordinator@postgres:5432/coordinator" in block


def test_compose_defaults_publish_on_loopback() -> None:
    config = _compose_config({})
    for published in ("127.0.0.1:9092:9092/tcp", "127.0.0.1:9095:9095/tcp", "127.0.0.1:9093:9093/tcp",
                      "127.0.0.1:9096:9095/tcp"):  # fmt: skip
        assert f"- {published}\n" in config


def test_postgres_password_is_never_put_into_a_url() -> None:
    config = _compose_config({"POSTGRES_PASSWORD": "p@ss:w/rd"})
    assert "COORDINATOR_STORAGE: postgresql://coordinator@postgres:5432/coordinator\n" in config
    assert "PGPASSWORD: p@ss:w/rd\n" in config


def test_dockerignore_keeps_the_build_context_to_the_sources() -> None:
    patterns = [
        line
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert patterns[0] == "*", "everything is excluded first, then the sources are let back in"
    for kept in ("pyproject.toml", "README.md", "coordinator/", "protocol/", "storage/", "loadtest/"):
        assert f"!{kept}" in patterns
    for copied in re.findall(r"^COPY (?:--\S+ )*(\S+)", DOCKERFILE.read_text(), re.MULTILINE):
        assert copied.rstrip("/") in {p.removeprefix("!").rstrip("/") for p in patterns}, copied


@pytest.mark.integration
def test_image_entrypoint_and_healthcheck_work_outside_docker(tmp_path: Path) -> None:
    stage = _base_stage()
    env_line = next(line for line in stage if line.startswith("ENV COORDINATOR_"))
    settings = dict(item.split("=", 1) for item in shlex.split(env_line[len("ENV ") :]))
    entrypoint = json.loads(
        next(line for line in stage if line.startswith("ENTRYPOINT "))[len("ENTRYPOINT ") :]
    )
    healthcheck = json.loads(
        next(line for line in stage if line.startswith("HEALTHCHECK ")).split(" CMD ", 1)[1]
    )
    assert entrypoint == ["coordinator", "serve"]
    metrics_port = free_port()
    settings.update(
        COORDINATOR_HOST="127.0.0.1",  # loopback only in tests; the image listens on 0.0.0.0
        COORDINATOR_PORT="0",
        COORDINATOR_METRICS_HOST="127.0.0.1",
        COORDINATOR_METRICS_PORT=str(metrics_port),
        COORDINATOR_STORAGE=settings["COORDINATOR_STORAGE"].replace("/data", str(tmp_path)),
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")} | settings
    binary = str(Path(sys.executable).parent / entrypoint[0])
    process = subprocess.Popen([binary, *entrypoint[1:]], env=env, stderr=subprocess.PIPE, text=True)
    server = ServerProcess(process, 0, settings["COORDINATOR_STORAGE"])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=1) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert process.poll() is None, "the entrypoint exited"
                assert time.monotonic() < deadline, "the entrypoint never became ready"
                time.sleep(0.2)
        check = [sys.executable if healthcheck[0] == "python" else healthcheck[0], *healthcheck[1:]]
        check = [part.replace("9095", str(metrics_port)) for part in check]
        assert subprocess.run(check, check=False, timeout=10).returncode == 0
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2) as response:
            assert b"coordinator_groups" in response.read()
        assert (tmp_path / "coordinator.db").exists()
    finally:
        assert server.stop() == 0
