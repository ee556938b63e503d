"""One docker-compose project of docker/docker-compose.yml: its own project name, images and
free loopback ports, brought up, checked and removed with everything it created."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field

from tests.docker.base_images import pip_index_build_args, proxy_build_args
from tests.docker.daemon import Docker
from tests.support.server import REPO

COMPOSE_FILE = REPO / "docker" / "docker-compose.yml"


@dataclass
class ComposeProject:
    docker: Docker
    name: str
    profiles: list[str]
    variables: dict[str, str] = field(default_factory=dict)

    def compose(
        self, *args: str, timeout: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        compose = shutil.which("docker-compose")
        assert compose is not None, "docker-compose is not installed (.ci/setup installs it)"
        argv = [compose, "-f", str(COMPOSE_FILE), "-p", self.name]
        for profile in self.profiles:
            argv += ["--profile", profile]
        result = subprocess.run(
            [*argv, *args],
            env=self.docker.env | self.variables,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"docker-compose {' '.join(args)} exited {result.returncode}:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
            )
        return result

    def build(self, *services: str) -> None:
        argv = ["build"]
        for name, value in (proxy_build_args() | pip_index_build_args()).items():
            argv += ["--build-arg", f"{name}={value}"]
        self.compose(*argv, *services, timeout=1200)

    def container(self, service: str) -> str:
        container_id = self.compose("ps", "-q", service).stdout.strip()
        assert container_id, f"{service} has no container"
        return container_id

    def inspect(self, service: str) -> dict[str, object]:
        found = json.loads(self.docker.run("inspect", self.container(service)).stdout)
        assert isinstance(found, list) and isinstance(found[0], dict)
        return found[0]

    def health(self, service: str) -> str:
        return self.docker.run(
            "inspect",
            "--format",
            "{{if .State.Health}}{{.State.Health.Status}}{{end}}",
            self.container(service),
        ).stdout.strip()

    def wait_healthy(self, service: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        status = ""
        while time.monotonic() < deadline:
            status = self.health(service)
            if status == "healthy":
                return
            if status == "unhealthy":
                break
            time.sleep(1)
        logs = self.compose("logs", "--no-color", "--tail", "60", service, check=False).stdout
        raise AssertionError(f"{service} is not healthy (status {status!r}):\n{logs}")

    def exec(self, service: str, *command: str) -> str:
        return self.compose("exec", "-T", service, *command, timeout=60).stdout

    def volume_mounts(self) -> list[tuple[str, str, str]]:
        """(container name, volume name, destination) of every volume mount in the project."""
        found: list[tuple[str, str, str]] = []
        for container_id in self.compose("ps", "-q").stdout.split():
            info = json.loads(self.docker.run("inspect", container_id).stdout)[0]
            found += [
                (info["Name"], m["Name"], m["Destination"]) for m in info["Mounts"] if m["Type"] == "volume"
            ]
        return found

    def stopped_exit_codes(self) -> dict[str, int]:
        codes: dict[str, int] = {}
        for container_id in self.compose("ps", "-q").stdout.split():
            info = json.loads(self.docker.run("inspect", container_id).stdout)[0]
            assert not info["State"]["Running"], f"{info['Name']} still runs"
            codes[info["Name"]] = info["State"]["ExitCode"]
        return codes

    def down(self) -> None:
        """Remove the project's containers, networks and volumes."""
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout=180)
