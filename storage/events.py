"""The statements of the ``group_events`` table beyond its plain insert and select (storage/sql.py):
loading each group's newest events, and pruning by age and by row count. One text per dialect,
from the same template, so SQLite and PostgreSQL keep the same rules."""

from __future__ import annotations

from typing import Final

from storage.tables import GROUP_EVENTS

_COLUMNS: Final = ", ".join(c.name for c in GROUP_EVENTS.written)

_LOAD: Final = (
    f"SELECT {_COLUMNS} FROM (\n"
    f"    SELECT {_COLUMNS}, row_id,\n"
    "           ROW_NUMBER() OVER (PARTITION BY group_id ORDER BY row_id DESC) AS newest\n"
    "    FROM group_events WHERE time_ms >= {since}\n"
    ") AS recent WHERE newest <= {per_group} ORDER BY row_id"
)
_PRUNE_OLD: Final = "DELETE FROM group_events WHERE time_ms < {before}"
_PRUNE_EXCESS: Final = (
    "DELETE FROM group_events WHERE row_id <= "
    "(SELECT row_id FROM group_events ORDER BY row_id DESC LIMIT 1 OFFSET {keep})"
)

# The newest ``per_group`` events of every group since ``since`` (ms), oldest first.
SQLITE_LOAD: Final = _LOAD.format(since="?", per_group="?")
POSTGRES_LOAD: Final = _LOAD.format(since="$1", per_group="$2")
# Events older than ``before`` (ms); then all but the newest ``keep`` rows.
SQLITE_PRUNE_OLD: Final = _PRUNE_OLD.format(before="?")
POSTGRES_PRUNE_OLD: Final = _PRUNE_OLD.format(before="$1")
SQLITE_PRUNE_EXCESS: Final = _PRUNE_EXCESS.format(keep="?")
POSTGRES_PRUNE_EXCESS: Final = _PRUNE_EXCESS.format(keep="$1")
