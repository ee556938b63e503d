"""docker/docker-compose.yml for real: each profile's images build, its containers become
healthy, kafka-python joins and commits through the published port, offsets survive restarts
and the stack stops cleanly. One function per profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.docker.clients import committed, join_and_commit
from tests.docker.compose import ComposeProject
from tests.docker.conftest import Stack

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(1800)]

# Characters that break a password put into a URL unescaped.
AWKWARD_PASSWORD = "p@ss:w/rd%?#"


def _bootstrap(project: ComposeProject, port_variable: str) -> str:
    return f"127.0.0.1:{project.variables[port_variable]}"


def _files_belong_to_10001(project: ComposeProject, service: str, path: str) -> None:
    assert project.exec(service, "stat", "-c", "%u:%g", path).split() == ["10001:10001"]


def _only_named_volumes(project: ComposeProject, expected: set[tuple[str, str]]) -> None:
    """No anonymous volume: each volume mount is one of the project's named volumes."""
    mounts = {
        (name.removeprefix(f"{project.name}_"), destination)
        for _, name, destination in project.volume_mounts()
    }
    assert mounts == expected


def _recreate(project: ComposeProject, *services: str) -> None:
    """New containers on the same volumes, as after an image upgrade."""
    project.compose("up", "--detach", "--no-build", "--force-recreate", *services, timeout=180)
    for service in services:
        project.wait_healthy(service)


def _stop_cleanly(project: ComposeProject) -> None:
    project.compose("stop", timeout=120)
    assert set(project.stopped_exit_codes().values()) <= {0}


def test_default_profile(stack: Stack) -> None:
    project = stack.project()
    try:
        project.compose("up", "--detach", "--no-build")
        project.wait_healthy("coordinator")
        bootstrap = _bootstrap(project, "COORDINATOR_KAFKA_PORT")
        offsets = join_and_commit(bootstrap, "billing", "orders", partitions=3, first_offset=40)
        assert committed(bootstrap, "billing", "orders") == offsets

        project.compose("restart", "coordinator", timeout=120)
        project.wait_healthy("coordinator")
        assert committed(bootstrap, "billing", "orders") == offsets
        _files_belong_to_10001(project, "coordinator", "/data/coordinator.db")
        _only_named_volumes(project, {("coordinator-data", "/data")})
        _recreate(project, "coordinator")
        assert committed(bootstrap, "billing", "orders") == offsets
        _stop_cleanly(project)
    finally:
        project.down()


def test_postgres_profile(stack: Stack) -> None:
    project = stack.project("postgres", POSTGRES_PASSWORD=AWKWARD_PASSWORD)
    try:
        project.compose("up", "--detach", "--no-build", "coordinator-postgres")
        project.wait_healthy("postgres")
        project.wait_healthy("coordinator-postgres")
        bootstrap = _bootstrap(project, "COORDINATOR_POSTGRES_KAFKA_PORT")
        offsets = join_and_commit(bootstrap, "billing", "orders", partitions=3, first_offset=70)
        assert committed(bootstrap, "billing", "orders") == offsets
        _only_named_volumes(project, {("postgres-data", "/var/lib/postgresql/data")})

        project.compose("restart", "coordinator-postgres", timeout=120)
        project.wait_healthy("coordinator-postgres")
        assert committed(bootstrap, "billing", "orders") == offsets

        # PostgreSQL restarts under the running coordinator, which reconnects by itself.
        project.compose("restart", "postgres", timeout=120)
        project.wait_healthy("postgres")
        project.wait_healthy("coordinator-postgres")
        more = join_and_commit(bootstrap, "shipping", "orders", partitions=3, first_offset=90)
        assert committed(bootstrap, "shipping", "orders") == more
        assert committed(bootstrap, "billing", "orders") == offsets
        _recreate(project, "postgres", "coordinator-postgres")
        assert committed(bootstrap, "billing", "orders") == offsets
        assert committed(bootstrap, "shipping", "orders") == more
        _stop_cleanly(project)
    finally:
        project.down()


@pytest.mark.slow
def test_loadtest_profile(stack: Stack, tmp_path: Path) -> None:
    out = tmp_path / "out"  # missing, so Docker creates it, owned by root
    project = stack.project(
        "loadtest", LOADTEST_OUT=str(out), LOADTEST_DURATION_S=os.environ.get("LOADTEST_DURATION_S", "20")
    )
    try:
        project.compose("up", "--no-build", "--exit-code-from", "loadtest", "loadtest", timeout=900)
        summary = json.loads((out / "summary.json").read_text())
        assert summary, "the load test wrote an empty summary"
        assert (out / "report.html").is_file()
    finally:
        project.down()
