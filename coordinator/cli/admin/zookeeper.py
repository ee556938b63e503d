"""Reading the consumer registry of ZooKeeper-era Kafka consumers (before Kafka 0.9).

The layout, under an optional chroot::

    /consumers/<group>/ids/<consumer id>              registered instances (ephemeral znodes)
    /consumers/<group>/owners/<topic>/<partition>      the consumer thread that owns a partition
    /consumers/<group>/offsets/<topic>/<partition>     the committed offset, a decimal string

Everything is read and checked before anything is committed anywhere: a registry that does not
follow the layout (a partition that is not a number, an offset that is not a non-negative
integer, a partition znode with children) is reported with the znode's path, so an operator can
fix it by hand. The client is kazoo, an optional extra (``pip install '.[zookeeper]'``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from coordinator.cli.admin.client import TP

GROUP_CHILDREN = frozenset({"ids", "owners", "offsets"})
CONNECT_TIMEOUT_S = 10.0


class ZooKeeperError(Exception):
    """ZooKeeper could not be read, or what it holds does not follow the consumer layout (exit 1)."""


@dataclass(frozen=True)
class ZkAddress:
    hosts: str  # host:port[,host:port...]
    chroot: str  # "" or "/path"

    def __str__(self) -> str:
        return self.hosts + self.chroot


@dataclass(frozen=True)
class ZkInstance:
    consumer_id: str
    host: str | None
    subscription: dict[str, int]
    # A registration that is not ephemeral outlives its consumer: not a live instance.
    ephemeral: bool


@dataclass
class ZkGroup:
    name: str
    instances: list[ZkInstance] = field(default_factory=list)
    owners: dict[TP, str] = field(default_factory=dict)
    offsets: dict[TP, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def live_instances(self) -> list[ZkInstance]:
        return [i for i in self.instances if i.ephemeral]


def parse_zk_address(text: str) -> ZkAddress:
    """``HOST:PORT[,HOST:PORT...][/chroot]``, as Kafka's zookeeper.connect is written."""
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise ValueError(f"expected HOST:PORT[,HOST:PORT][/chroot], got {text!r}")
    for entry in hosts.split(","):
        host, colon, port = entry.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected HOST:PORT in {text!r}, got {entry!r}")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    if "//" in chroot:
        raise ValueError(f"the chroot in {text!r} has an empty path element")
    return ZkAddress(hosts, chroot)


def instance_host(group: str, consumer_id: str, data: dict[str, Any]) -> str | None:
    """The host a registered consumer runs on, as far as its registration says.

    Kafka's own ZooKeeper consumer names itself ``<group>_<host>-<millis>-<uuid8>``; kazoo-go's
    consumergroup ``<host>:<uuid>``. A ``host`` in the registration data wins.
    """
    host = data.get("host")
    if isinstance(host, str) and host:
        return host
    prefix = group + "_"
    if consumer_id.startswith(prefix):
        parts = consumer_id[len(prefix) :].rsplit("-", 2)
        if len(parts) == 3 and parts[1].isdigit():
            return parts[0]
    if ":" in consumer_id:
        return consumer_id.rsplit(":", 1)[0] or None
    return None


def parse_offset(path: str, raw: bytes) -> int:
    text = raw.decode("utf-8", errors="replace").strip()
    if not text.isdigit():
        raise ZooKeeperError(f"{path}: the offset {text!r} is not a non-negative integer")
    return int(text)


def parse_partition(path: str, name: str) -> int:
    if not name.isdigit():
        raise ZooKeeperError(f"{path}: {name!r} is not a partition number")
    return int(name)


def _registration(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _subscription(data: dict[str, Any]) -> dict[str, int]:
    sub = data.get("subscription")
    if not isinstance(sub, dict):
        return {}
    return {str(k): v for k, v in sub.items() if isinstance(v, int)}


class ZkRegistry:
    """Read-only access to one ZooKeeper ensemble's consumer registry (a connected kazoo client)."""

    def __init__(self, client: Any, address: ZkAddress) -> None:
        self._zk = client
        self.address = address
        self._root = address.chroot + "/consumers"

    def _children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(self._zk.get_children(path))
        except NoNodeError:
            return []

    def _data(self, path: str) -> tuple[bytes, Any] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self._zk.get(path)
        except NoNodeError:  # gone between listing and reading (an instance that just left)
            return None
        return data or b"", stat

    def check_root(self) -> bool:
        """False when there is no /consumers (no ZooKeeper-era groups); an error for a missing chroot."""
        if self.address.chroot and self._zk.exists(self.address.chroot) is None:
            raise ZooKeeperError(
                f"the chroot {self.address.chroot} does not exist on ZooKeeper {self.address.hosts}"
            )
        return self._zk.exists(self._root) is not None

    def group_names(self) -> list[str]:
        return self._children(self._root) if self.check_root() else []

    def read_group(self, group: str, topics: Iterable[str] | None = None) -> ZkGroup:
        base = f"{self._root}/{group}"
        if self._zk.exists(base) is None:
            raise ZooKeeperError(
                f"no ZooKeeper-era group {group!r}: {self.address}{'/consumers/' + group} does not exist"
            )
        wanted = None if topics is None else set(topics)
        found = ZkGroup(group)
        for child in self._children(base):
            if child not in GROUP_CHILDREN:
                found.notes.append(f"{base}/{child}: not part of the consumer layout, left alone")
        for consumer_id in self._children(f"{base}/ids"):
            read = self._data(f"{base}/ids/{consumer_id}")
            if read is None:
                continue
            data = _registration(read[0])
            ephemeral = bool(read[1].ephemeralOwner)
            found.instances.append(
                ZkInstance(
                    consumer_id, instance_host(group, consumer_id, data), _subscription(data), ephemeral
                )
            )
            if not ephemeral:
                found.notes.append(
                    f"{base}/ids/{consumer_id}: not ephemeral, so not a live consumer (a leftover?)"
                )
        for tp, path in self._partitions(f"{base}/owners", wanted):
            read = self._data(path)
            if read is not None:
                found.owners[tp] = read[0].decode("utf-8", errors="replace")
        for tp, path in self._partitions(f"{base}/offsets", wanted):
            read = self._data(path)
            if read is not None:
                found.offsets[tp] = parse_offset(path, read[0])
        return found

    def _partitions(self, base: str, wanted: set[str] | None) -> Iterator[tuple[TP, str]]:
        for topic in self._children(base):
            if wanted is not None and topic not in wanted:
                continue
            for name in self._children(f"{base}/{topic}"):
                path = f"{base}/{topic}/{name}"
                partition = parse_partition(path, name)
                if self._children(path):
                    raise ZooKeeperError(
                        f"{path}: a partition znode has unexpected children {self._children(path)}"
                    )
                yield TP(topic, partition), path


@contextmanager
def open_registry(text: str, timeout: float = CONNECT_TIMEOUT_S) -> Iterator[ZkRegistry]:
    """Connect (read-only use) to ``HOST:PORT[,...][/chroot]``; readable errors for every failure."""
    try:
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError
    except ImportError as exc:
        raise ZooKeeperError(
            "reading ZooKeeper needs the kazoo client: pip install 'kafka-group-coordinator[zookeeper]'"
        ) from exc
    address = parse_zk_address(text)
    # kazoo logs every failed connection attempt; the command reports the outcome once.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    client = KazooClient(
        hosts=address.hosts, timeout=timeout, read_only=True, connection_retry={"max_tries": 1}
    )
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError as exc:
        client.close()
        raise ZooKeeperError(f"cannot connect to ZooKeeper at {address.hosts} within {timeout:g} s") from exc
    try:
        yield ZkRegistry(client, address)
    except KazooException as exc:  # connection lost, no auth, ...: one readable line
        raise ZooKeeperError(f"reading ZooKeeper at {address}: {type(exc).__name__}: {exc}") from exc
    finally:
        client.stop()
        client.close()
