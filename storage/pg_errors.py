"""What asyncpg and the socket layer raise for a failed PostgreSQL command or connection."""

from __future__ import annotations

from typing import Final

import asyncpg

# InternalClientError shows up when the server goes away mid-protocol ("cannot switch to
# state ..."), so it counts as a lost connection too.
PG_ERRORS: Final = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    TimeoutError,
)
