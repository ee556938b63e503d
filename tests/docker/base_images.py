"""The public base images the stack needs: pulled when the image hub is reachable, otherwise
stand-ins built from Debian (docker/standin/), kept in the daemon by tag for the next run.

A stand-in carries the label ``kafka-group-coordinator.stand-in``; a later run still tries to
pull the real image first, so real images win wherever they can be pulled.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.docker.daemon import Docker
from tests.support.server import REPO

STANDIN_DIR = REPO / "docker" / "standin"
STANDIN_LABEL = "kafka-group-coordinator.stand-in"
DEBIAN_RELEASE = "bookworm"
# The Debian root file system the stand-ins start from (debootstrap minbase + Python).
ROOTFS_IMAGE = f"kafka-group-coordinator-standin/debian:{DEBIAN_RELEASE}"
# The host's locally added CA certificates, copied into the stand-ins: pip inside a container
# must trust the same registry certificates the host trusts.
LOCAL_CA_DIR = Path("/usr/local/share/ca-certificates")


def required_base_images(compose_config: str, profiles: list[str]) -> list[str]:
    """The images the stack pulls: FROM lines of docker/Dockerfile and the services without a
    build that run under ``profiles`` (services without profiles always run)."""
    images = dockerfile_base_images()
    for service in _services(compose_config).values():
        image = service.image
        active = not service.profiles or set(service.profiles) & set(profiles)
        if image and not service.build and active and image not in images:
            images.append(image)
    return images


def dockerfile_base_images() -> list[str]:
    """The images docker/Dockerfile starts from, in order (its own stages left out)."""
    stages: set[str] = set()
    images: list[str] = []
    for line in (REPO / "docker" / "Dockerfile").read_text().splitlines():
        match = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line.strip(), re.IGNORECASE)
        if match:
            if match.group(1) not in stages and match.group(1) not in images:
                images.append(match.group(1))
            if match.group(2):
                stages.add(match.group(2))
    return images


@dataclass
class _Service:
    image: str = ""
    build: bool = False
    profiles: list[str] = field(default_factory=list)


def _services(compose_config: str) -> dict[str, _Service]:
    """Service name -> its image, whether it is built and its profiles, from the YAML that
    `docker-compose config` prints (every service, whatever the profiles asked for)."""
    services: dict[str, _Service] = {}
    in_services = False
    current: _Service | None = None
    key = ""
    for line in compose_config.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0:
            in_services = line.rstrip() == "services:"
            current = None
        elif in_services and indent == 2:
            current = services.setdefault(text.rstrip(":"), _Service())
        elif current is not None and indent == 4 and not text.startswith("- "):
            key, _, value = text.partition(":")
            if key == "image":
                current.image = value.strip().strip("'\"")
            elif key == "build":
                current.build = True
        elif current is not None and key == "profiles" and text.startswith("- "):
            current.profiles.append(text[2:].strip().strip("'\""))
    return services


def provide(docker: Docker, image: str) -> str:
    """Make ``image`` available; answer how: ``pulled``, ``cached stand-in`` or ``stand-in built``."""
    if docker.run("pull", "--quiet", image, timeout=600, check=False).returncode == 0:
        return "pulled"
    if _present(docker, image):
        return "cached stand-in" if _is_standin(docker, image) else "present"
    builder = STANDINS.get(image.split(":", 1)[0])
    if builder is None:
        raise AssertionError(f"{image} cannot be pulled and there is no stand-in for it in docker/standin/")
    builder(docker, image)
    return "stand-in built"


def available(docker: Docker, image: str) -> bool:
    """Whether ``image`` can be had without a stand-in: pulled now, or already present."""
    if docker.run("pull", "--quiet", image, timeout=600, check=False).returncode == 0:
        return True
    return _present(docker, image) and not _is_standin(docker, image)


def service_image(compose_config: str, service: str) -> str:
    return _services(compose_config)[service].image


def _present(docker: Docker, image: str) -> bool:
    return docker.run("image", "inspect", image, check=False, timeout=30).returncode == 0


def _is_standin(docker: Docker, image: str) -> bool:
    labels = docker.run("image", "inspect", "--format", "{{json .Config.Labels}}", image).stdout
    return STANDIN_LABEL in labels


def _build_python(docker: Docker, image: str) -> None:
    _ensure_rootfs(docker)
    with tempfile.TemporaryDirectory(prefix="standin-python-") as context:
        certificates = Path(context) / "ca-certificates"
        certificates.mkdir()
        for certificate in sorted(LOCAL_CA_DIR.glob("**/*.crt")) if LOCAL_CA_DIR.is_dir() else []:
            shutil.copy(certificate, certificates / certificate.name)
        shutil.copy(STANDIN_DIR / "python.Dockerfile", Path(context) / "Dockerfile")
        _build(docker, image, Path(context), {"ROOTFS_IMAGE": ROOTFS_IMAGE})


def _build_postgres(docker: Docker, image: str) -> None:
    _ensure_rootfs(docker)
    with tempfile.TemporaryDirectory(prefix="standin-postgres-") as context:
        shutil.copy(STANDIN_DIR / "postgres.Dockerfile", Path(context) / "Dockerfile")
        shutil.copy(STANDIN_DIR / "postgres-entrypoint.sh", Path(context) / "postgres-entrypoint.sh")
        _build(docker, image, Path(context), {"BASE_IMAGE": ROOTFS_IMAGE})


def _build_tansu(docker: Docker, image: str) -> None:
    python_image = dockerfile_base_images()[0]
    provide(docker, python_image)
    with tempfile.TemporaryDirectory(prefix="standin-tansu-") as context:
        shutil.copy(STANDIN_DIR / "tansu.Dockerfile", Path(context) / "Dockerfile")
        _build(docker, image, Path(context), {"BASE_IMAGE": python_image} | pip_index_build_args())


def _build_prometheus(docker: Docker, image: str) -> None:
    _ensure_rootfs(docker)
    with tempfile.TemporaryDirectory(prefix="standin-prometheus-") as context:
        shutil.copy(STANDIN_DIR / "prometheus.Dockerfile", Path(context) / "Dockerfile")
        _build(docker, image, Path(context), {"BASE_IMAGE": ROOTFS_IMAGE})


def _build(docker: Docker, image: str, context: Path, args: dict[str, str]) -> None:
    argv = ["build", "--quiet", "--label", f"{STANDIN_LABEL}=true", "-t", image]
    for name, value in (args | proxy_build_args()).items():
        argv += ["--build-arg", f"{name}={value}"]
    docker.run(*argv, str(context), timeout=900)


def proxy_build_args() -> dict[str, str]:
    """The host's proxy settings, which Docker passes to builds only when asked."""
    names = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def pip_index_build_args() -> dict[str, str]:
    """The host's package index, when it is set in the environment and reachable over HTTP(S)."""
    names = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")
    return {
        name: os.environ[name]
        for name in names
        if os.environ.get(name, "").startswith(("http://", "https://"))
    }


def _ensure_rootfs(docker: Docker) -> None:
    if _present(docker, ROOTFS_IMAGE):
        return
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise AssertionError("building stand-in base images needs debootstrap (.ci/setup installs it)")
    mirror = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
    with tempfile.TemporaryDirectory(prefix="standin-rootfs-") as work:
        rootfs = Path(work) / "rootfs"
        packages = "--include=python3,python3-venv,ca-certificates"
        result = subprocess.run(
            [debootstrap, "--variant=minbase", packages, DEBIAN_RELEASE, str(rootfs), mirror],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"debootstrap failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["docker", "import", "--change", f"LABEL {STANDIN_LABEL}=true", "-", ROOTFS_IMAGE],
            stdin=tar.stdout,
            env=docker.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0 or imported.returncode != 0:
            raise AssertionError(f"importing the Debian root file system failed:\n{imported.stderr}")


# Image repository -> stand-in builder. A new profile's public image needs an entry here when
# it cannot be pulled on the CI machines.
STANDINS: dict[str, Callable[[Docker, str], None]] = {
    "python": _build_python,
    "postgres": _build_postgres,
    "ghcr.io/tansu-io/tansu": _build_tansu,
    "prom/prometheus": _build_prometheus,
}


def main(argv: list[str] | None = None) -> int:
    """Provide the stack's base images outside the test suite, as the docker tests do."""
    import argparse

    from tests.docker.compose import ComposeProject
    from tests.docker.daemon import DockerUnavailable, docker_daemon

    parser = argparse.ArgumentParser(
        prog="python -m tests.docker.base_images",
        description="Pull the public base images docker/Dockerfile and docker/docker-compose.yml need, "
        "or build their stand-ins from Debian (docker/standin/) where the image hub cannot be "
        "reached, into the Docker daemon the tests use (a running one, else dockerd started on "
        "$DOCKER_TESTS_DATA_ROOT or ~/.cache/kafka-group-coordinator/docker, as root).",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        help="a compose profile whose services' images are needed too (postgres, gateway, monitoring, "
        "loadtest); repeat for several",
    )
    parser.add_argument("--list", action="store_true", help="only print the images, provide nothing")
    args = parser.parse_args(argv)
    host = Docker(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"))
    config = ComposeProject(host, "kgcbaseimages", args.profile).compose("config").stdout
    images = required_base_images(config, args.profile)
    if args.list:
        print("\n".join(images))
        return 0
    try:
        with docker_daemon() as docker:
            for image in images:
                print(f"{image}: {provide(docker, image)}", flush=True)
    except DockerUnavailable as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
