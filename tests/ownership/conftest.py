"""Nodes as subprocesses on one throwaway PostgreSQL (the storage suite's fixtures)."""

from __future__ import annotations

from tests.storage.conftest import pg_dsn, pg_server

__all__ = ["pg_dsn", "pg_server"]
