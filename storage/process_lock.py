"""One process per SQLite file: an exclusive ``flock`` on a lock file next to the database.

SQLite lets several processes open one file, and two coordinators on one file would each hold
the whole state in memory and overwrite each other's writes. The server therefore holds
``<database>.lock`` with ``flock(LOCK_EX | LOCK_NB)`` for as long as the store is open. The
kernel drops the lock with the last descriptor of the process, so a SIGKILLed server leaves
no stale lock behind: the file itself may stay, empty of meaning, and is reused.

The holder writes its PID and host into the file after taking the lock, so that the process
that is refused can say who holds it. ``flock`` locks are independent of the POSIX record
locks SQLite uses on the database itself, so the two never interfere.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from storage.base import StoreError


class DatabaseInUse(StoreError):
    """Another process holds the database's lock file."""


@dataclass
class ProcessLock:
    path: Path
    _fd: int | None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    @property
    def held(self) -> bool:
        return self._fd is not None


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


def lock_database(database: Path) -> ProcessLock:
    """Take ``database``'s lock file or raise DatabaseInUse naming the holder."""
    path = lock_path(database)
    try:
        # O_CLOEXEC (Python's default): a child process never inherits the lock.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the lock file {path} of SQLite database {database}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _read_holder(fd)
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise StoreError(f"cannot lock {path} of SQLite database {database}: {exc}") from exc
        raise DatabaseInUse(
            f"SQLite database {database} is in use by another coordinator ({holder}, lock file {path}); "
            "a SQLite file serves one process: stop that one first, or use PostgreSQL to run several nodes"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"cannot write the lock file {path} of SQLite database {database}: {exc}") from exc
    return ProcessLock(path, fd)


def _read_holder(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            return text
    return "process id not yet recorded"
