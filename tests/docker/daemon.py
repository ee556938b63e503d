"""A Docker daemon for the compose tests: the machine's own when one answers, otherwise a dockerd
started here (its own socket, pid file and exec root under a temporary directory) and stopped by
PID afterwards.

The started daemon keeps its data root in a cache directory (``DOCKER_TESTS_DATA_ROOT``,
default ``~/.cache/kafka-group-coordinator/docker``), so stand-in base images built by one run
are found by the next. A lock file in the temporary directory lets one such daemon run at a time
on the machine: daemons share the host's docker0 bridge and iptables chains, whatever their data
roots.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class DockerUnavailable(Exception):
    """No Docker daemon answers and none can be started here."""


@dataclass(frozen=True)
class Docker:
    """How to reach a daemon: the environment every docker/docker-compose call gets."""

    host: str

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
        return env | {"DOCKER_HOST": self.host}

    def run(
        self, *args: str, timeout: float = 120, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["docker", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return result

    def answers(self) -> bool:
        try:
            return (
                self.run("version", "--format", "{{.Server.Version}}", timeout=10, check=False).returncode
                == 0
            )
        except subprocess.TimeoutExpired:
            return False


def default_data_root() -> Path:
    configured = os.environ.get("DOCKER_TESTS_DATA_ROOT")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kafka-group-coordinator" / "docker"


@contextmanager
def docker_daemon(data_root: Path | None = None, start_timeout: float = 60) -> Iterator[Docker]:
    """Yield a running daemon; stop it on exit if it was started here."""
    if shutil.which("docker") is None:
        raise DockerUnavailable("the docker command is not installed (.ci/setup installs docker.io)")
    existing = Docker(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
    if existing.answers():
        yield existing
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise DockerUnavailable(
            "no Docker daemon answers and dockerd is not installed (.ci/setup installs docker.io)"
        )
    if os.geteuid() != 0:
        raise DockerUnavailable("no Docker daemon answers and starting dockerd needs root")
    root = data_root or default_data_root()
    root.mkdir(parents=True, exist_ok=True)
    with (
        open(Path(tempfile.gettempdir()) / "kafka-group-coordinator-dockerd.lock", "w") as lock,
        tempfile.TemporaryDirectory(prefix="dockerd-") as run_dir,
        open(Path(run_dir) / "dockerd.log", "w") as log,
    ):
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = Path(run_dir)
        docker = Docker(f"unix://{run / 'docker.sock'}")
        argv = [dockerd, "--data-root", str(root), "--exec-root", str(run / "exec"), "-H", docker.host]
        argv += ["--pidfile", str(run / "docker.pid")]
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + start_timeout
            while not docker.answers():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise DockerUnavailable(
                        f"dockerd did not start:\n{(run / 'dockerd.log').read_text()[-3000:]}"
                    )
                time.sleep(0.5)
            yield docker
        finally:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
