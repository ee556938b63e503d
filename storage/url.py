"""Choose and construct a backend from a URL.

* ``memory://`` — MemoryStore (nothing survives the process)
* ``sqlite:///coordinator.db`` — SQLiteStore on ``coordinator.db`` relative to the working
  directory; ``sqlite:////var/lib/coordinator/state.db`` — absolute path (four slashes).
  Constructor options may also be given as query parameters:
  ``sqlite:///state.db?synchronous=NORMAL&history_retention_ms=86400000``.
* ``postgresql://user:password@host:port/database`` (or ``postgres://``) — PostgresStore; the
  URL goes to asyncpg unchanged, so libpq query options such as ``sslmode`` work.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from storage.base import Store
from storage.redact import redact_url

_EXPECTED: Final = "expected memory://, sqlite:///path.db or postgresql://user:password@host:port/database"
_SQLITE_QUERY_OPTIONS: Final = {
    "synchronous": str,
    "busy_timeout_ms": int,
    "history_retention_ms": int,
    "history_prune_interval_ms": int,
}


def open_store(url: str, **options: Any) -> Store:
    """Build the store ``url`` names; ``options`` go to its constructor.

    The store is not opened yet: ``await store.open()`` before use.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ValueError(f"not a store URL: {redact_url(url)!r}; {_EXPECTED}")
    if scheme == "memory":
        if rest:
            raise ValueError(f"memory:// takes no path or options, got {redact_url(url)!r}")
        from storage.memory import MemoryStore

        return MemoryStore(**options)
    if scheme == "sqlite":
        path, query_options = _parse_sqlite(url, rest)
        from storage.sqlite import SQLiteStore

        return SQLiteStore(path, **_merge(url, query_options, options))
    if scheme in ("postgresql", "postgres"):
        if not rest or rest.startswith("/"):
            raise ValueError(f"PostgreSQL URL needs a host: {redact_url(url)!r}; {_EXPECTED}")
        from storage.postgres import PostgresStore

        dsn, query_options = _pop_query_options(url, {"synchronous_commit": str})
        return PostgresStore(dsn, **_merge(url, query_options, options))
    raise ValueError(f"unsupported store URL scheme {scheme!r} in {redact_url(url)!r}; {_EXPECTED}")


def _parse_sqlite(url: str, rest: str) -> tuple[str, dict[str, Any]]:
    # rest is what follows "sqlite://": an empty host, then "/" + the path.
    if not rest.startswith("/"):
        raise ValueError(
            f"SQLite URL must have an empty host: sqlite:///relative.db or sqlite:////absolute/path.db, got {url!r}"
        )
    raw_path, _, query = rest[1:].partition("?")
    path = unquote(raw_path)
    if not path or path.endswith("/"):
        raise ValueError(f"SQLite URL names no database file: {url!r}")
    if path == ":memory:":
        raise ValueError("sqlite:///:memory: is not durable; use memory:// for an in-memory store")
    query_options: dict[str, Any] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        convert = _SQLITE_QUERY_OPTIONS.get(key)
        if convert is None:
            raise ValueError(f"unknown SQLite URL option {key!r}; known: {', '.join(_SQLITE_QUERY_OPTIONS)}")
        try:
            query_options[key] = convert(value)
        except ValueError:
            raise ValueError(f"SQLite URL option {key}={value!r} is not a valid {convert.__name__}") from None
    return path, query_options


def _merge(url: str, from_url: dict[str, Any], from_args: dict[str, Any]) -> dict[str, Any]:
    both = from_url.keys() & from_args.keys()
    if both:
        raise ValueError(
            f"option(s) {', '.join(sorted(both))} given both in {redact_url(url)!r} and as arguments"
        )
    return {**from_url, **from_args}


def _pop_query_options(url: str, known: dict[str, type]) -> tuple[str, dict[str, Any]]:
    """Take our own options out of a URL's query string; the rest stays for the driver."""
    parts = urlsplit(url)
    ours: dict[str, Any] = {}
    rest: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in known:
            ours[key] = known[key](value)
        else:
            rest.append((key, value))
    query = urlencode(rest)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment)), ours
