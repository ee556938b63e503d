"""A throwaway PostgreSQL server for tests and benchmarks: initdb + pg_ctl in a temp dir.

The server listens on 127.0.0.1 only (no Unix socket), on a free port, with trust auth for
the ``postgres`` superuser. PostgreSQL refuses to run as root; when we are root, initdb and
pg_ctl run as ``$PG_TEST_USER``, else the ``postgres`` user, else ``nobody``.

Binaries are looked up in ``$PG_BINDIR``, then next to ``pg_ctl``/``initdb`` on PATH, then in
``/usr/lib/postgresql/<newest>/bin`` (Debian/Ubuntu) and ``/usr/local/pgsql/bin``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port


class PostgresUnavailable(Exception):
    """No usable PostgreSQL binaries here (the caller skips)."""


def find_bindir() -> Path:
    candidates: list[Path] = []
    if env := os.environ.get("PG_BINDIR"):
        candidates.append(Path(env))
    # Resolve symlinks (e.g. /usr/local/bin/pg_ctl -> /usr/lib/postgresql/15/bin/pg_ctl):
    # pg_ctl wants the real directory that also holds `postgres`.
    candidates.extend(
        Path(found).resolve().parent for exe in ("pg_ctl", "initdb") if (found := shutil.which(exe))
    )
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += [*debian, Path("/usr/local/pgsql/bin")]
    for bindir in candidates:
        if all(os.access(bindir / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return bindir
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in $PG_BINDIR, on PATH, "
        "in /usr/lib/postgresql/*/bin or /usr/local/pgsql/bin (Debian: apt-get install postgresql)"
    )


def _run_as_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    names = [os.environ["PG_TEST_USER"]] if os.environ.get("PG_TEST_USER") else ["postgres", "nobody"]
    for name in names:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable(
        f"running as root and none of the users {names} exists to run PostgreSQL "
        "(create one, e.g. `useradd --system postgres`, or set PG_TEST_USER)"
    )


def _base_dir(user: pwd.struct_passwd | None) -> str:
    base = os.environ.get("PG_TEST_TMPDIR") or tempfile.gettempdir()
    if user is not None:
        # The server user must be able to traverse every parent of its data directory.
        for parent in [Path(base), *Path(base).parents]:
            if not os.stat(parent).st_mode & 0o001:
                return "/tmp"
    return base


@dataclass
class PgServer:
    bindir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None
    superuser: str = "postgres"
    _destroyed: bool = field(default=False, repr=False)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    @classmethod
    def create(cls) -> PgServer:
        bindir = find_bindir()
        user = _run_as_user()
        root = Path(tempfile.mkdtemp(prefix="kgc-pg-", dir=_base_dir(user)))
        server = cls(bindir=bindir, root=root, port=0, user=user)
        atexit.register(server.destroy)
        try:
            if user is not None:
                os.chown(root, user.pw_uid, user.pw_gid)
            server._run(
                "initdb",
                "-D", str(server.datadir),
                "-U", server.superuser,
                "-A", "trust",
                "-E", "UTF8",
                "--locale=C",
                "--no-sync",
            )  # fmt: skip
            server._start_on_free_port()
        except BaseException:
            server.destroy()
            raise
        return server

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{database}"

    @property
    def pid(self) -> int | None:
        """The postmaster's PID while it runs."""
        try:
            return int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.datadir), "-l", str(self.logfile), "-w", "-t", "60", "start"
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``mode``: "smart", "fast" (disconnect clients, clean shutdown) or "immediate" (crash)."""
        pid = self.pid
        try:
            self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "-t", "60", "stop")
        except RuntimeError:
            if pid is None:
                raise
            if self._is_our_postmaster(pid):
                self._kill(pid)

    def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        try:
            if self.pid is not None:
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no server log)"

    def _start_on_free_port(self) -> None:
        error: Exception | None = None
        for _ in range(5):  # another process may grab the port between probe and bind
            self.port = free_port()
            self._write_config()
            try:
                self.start()
                return
            except RuntimeError as exc:
                error = exc
        raise RuntimeError(f"PostgreSQL did not start: {error}\n{self.log_tail()}")

    def _write_config(self) -> None:
        conf = self.datadir / "postgresql.auto.conf"
        conf.write_text(
            "# written by tests/storage/pg_server.py\n"
            "listen_addresses = '127.0.0.1'\n"
            f"port = {self.port}\n"
            "unix_socket_directories = ''\n"
            "max_connections = 100\n"
            "fsync = on\n"
            "synchronous_commit = on\n"
        )
        if self.user is not None:
            os.chown(conf, self.user.pw_uid, self.user.pw_gid)

    def _run(self, exe: str, *args: str) -> None:
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "HOME": str(self.root)}
        proc = subprocess.run(
            [str(self.bindir / exe), *args],
            cwd=self.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{exe} {' '.join(args)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}"
            )

    def _is_our_postmaster(self, pid: int) -> bool:
        # Never signal a recycled PID: the postmaster's command line names our data directory.
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return str(self.datadir).encode() in cmdline

    @staticmethod
    def _kill(pid: int) -> None:
        # SIGQUIT = immediate shutdown of the postmaster and its children.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
