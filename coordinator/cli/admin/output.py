"""Output for people (aligned columns, like kafka-consumer-groups.sh) and for scripts (JSON)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def cell(value: object) -> str:
    """A table cell: missing values show as '-', as kafka-consumer-groups.sh prints them."""
    if value is None or value == "":
        return "-"
    return str(value)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns two spaces apart, no trailing blanks."""
    cells = [list(headers), *([cell(v) for v in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print(render_table(headers, rows))


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2)
    sys.stdout.write("\n")


def note(message: str) -> None:
    """A remark for people (stderr), so that stdout stays the table or the JSON."""
    print(message, file=sys.stderr)
