"""The session's Docker daemon and stack: base images provided once, the coordinator image built
once, everything the tests created removed at the end (stand-in base images stay, by design)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.docker.base_images import provide, required_base_images
from tests.docker.compose import ComposeProject
from tests.docker.daemon import Docker, DockerUnavailable, docker_daemon
from tests.support.ports import free_port

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked slow here run only when asked for (`-m slow`)."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run on demand with -m slow")
    for item in items:
        if item.path.is_relative_to(HERE) and "slow" in item.keywords:
            item.add_marker(skip)


@dataclass
class Stack:
    """Hands out compose projects that share this session's images."""

    docker: Docker
    tag: str = field(default_factory=lambda: f"test-{uuid.uuid4().hex[:10]}")
    base_images: dict[str, str] = field(default_factory=dict)
    built: set[str] = field(default_factory=set)
    projects: list[ComposeProject] = field(default_factory=list)

    @property
    def images(self) -> dict[str, str]:
        return {
            "COORDINATOR_IMAGE": f"kafka-group-coordinator:{self.tag}",
            "LOADTEST_IMAGE": f"kafka-group-coordinator-loadtest:{self.tag}",
        }

    def project(self, *profiles: str, **variables: str) -> ComposeProject:
        """A project with free loopback ports, its base images present and its images built."""
        ports = {
            name: str(free_port())
            for name in (
                "COORDINATOR_KAFKA_PORT",
                "COORDINATOR_METRICS_HOST_PORT",
                "COORDINATOR_POSTGRES_KAFKA_PORT",
                "COORDINATOR_POSTGRES_METRICS_HOST_PORT",
                "COORDINATOR_GATEWAY_KAFKA_PORT",
                "GATEWAY_BROKER_PORT_BASE",
                "COORDINATOR_GATEWAY_METRICS_HOST_PORT",
                "PROMETHEUS_HOST_PORT",
                "GRAFANA_HOST_PORT",
            )
        }
        project = ComposeProject(
            self.docker,
            name=f"kgc{self.tag.replace('-', '')}{len(self.projects)}",
            profiles=list(profiles),
            variables={
                "COORDINATOR_PUBLISH_ADDRESS": "127.0.0.1",
                "COORDINATOR_ADVERTISED_HOST": "127.0.0.1",
                "COORDINATOR_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
                **ports,
                **self.images,
                **variables,
            },
        )
        self.projects.append(project)
        for image in required_base_images(project.compose("config").stdout, list(profiles)):
            if image not in self.base_images:
                self.base_images[image] = provide(self.docker, image)
        services = ["coordinator"] + (["loadtest"] if "loadtest" in profiles else [])
        missing = [service for service in services if service not in self.built]
        if missing:
            project.build(*missing)
            self.built.update(missing)
        return project

    def remove(self) -> None:
        for project in self.projects:
            project.down()
        for image in self.images.values():
            self.docker.run("image", "rm", "--force", image, check=False)
        self.docker.run("image", "prune", "--force", check=False)


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    try:
        with docker_daemon() as docker:
            created = Stack(docker)
            try:
                yield created
            finally:
                created.remove()
    except DockerUnavailable as exc:
        if os.environ.get("DOCKER_TESTS_REQUIRED"):
            pytest.fail(f"the compose tests must run here: {exc}")
        pytest.skip(str(exc))
