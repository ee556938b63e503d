"""The offsets CSV file: `topic,partition,offset[,metadata]`, one row per partition; and the
several-groups file: `group,topic,partition,offset`.

Three columns are exactly kafka-consumer-groups.sh's reset-offsets file (its --export output
and --from-file input for one group), so files move between the two tools. A fourth column,
written by `offsets export --with-metadata`, carries the commit metadata string. No header is
written; a header row naming the columns is accepted on input, and blank lines are skipped.

The several-groups file is kafka-consumer-groups.sh's (its --export and --from-file with more
than one group): the group first, then the three columns above, no metadata.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

from coordinator.cli.admin.errors import UsageError

HEADER = ("topic", "partition", "offset", "metadata")


@dataclass(frozen=True, slots=True)
class OffsetRow:
    topic: str
    partition: int
    offset: int
    metadata: str | None = None  # None: the file had no metadata column


def write_offsets_csv(out: TextIO, rows: Iterable[OffsetRow], with_metadata: bool) -> None:
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        fields: list[object] = [row.topic, row.partition, row.offset]
        if with_metadata:
            fields.append(row.metadata or "")
        writer.writerow(fields)


def read_offsets_csv(source: TextIO, name: str) -> list[OffsetRow]:
    """Every row of the file; UsageError naming the file and line for anything malformed."""
    rows: list[OffsetRow] = []
    seen: dict[tuple[str, int], int] = {}
    try:
        records = list(csv.reader(source))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise UsageError(f"{name}: not a readable CSV file: {exc}") from exc
    for line, fields in enumerate(records, start=1):
        if not fields or all(not f.strip() for f in fields):
            continue
        fields = [f.strip() for f in fields[:3]] + fields[3:]
        if line == 1 and tuple(f.lower() for f in fields) == HEADER[: len(fields)]:
            continue
        row = _parse_row(fields, f"{name} line {line}")
        key = (row.topic, row.partition)
        if key in seen:
            raise UsageError(f"{name} line {line}: {row.topic}:{row.partition} already on line {seen[key]}")
        seen[key] = line
        rows.append(row)
    return rows


def _parse_row(fields: list[str], where: str) -> OffsetRow:
    if len(fields) not in (3, 4):
        raise UsageError(
            f"{where}: expected topic,partition,offset[,metadata], got {len(fields)} columns: {','.join(fields)}"
        )
    topic, partition, offset = fields[:3]
    if not topic:
        raise UsageError(f"{where}: empty topic name")
    if not partition.isdigit():
        raise UsageError(f"{where}: partition {partition!r} is not a non-negative integer")
    if not offset.isdigit():
        raise UsageError(f"{where}: offset {offset!r} is not a non-negative integer")
    return OffsetRow(topic, int(partition), int(offset), fields[3] if len(fields) == 4 else None)


GROUPS_HEADER = ("group", "topic", "partition", "offset")


def write_group_offsets_csv(out: TextIO, rows: Iterable[tuple[str, OffsetRow]]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    for group, row in rows:
        writer.writerow([group, row.topic, row.partition, row.offset])


def read_group_offsets_csv(source: TextIO, name: str) -> list[tuple[str, OffsetRow]]:
    """Every (group, row) of a several-groups file; UsageError naming the file and line."""
    rows: list[tuple[str, OffsetRow]] = []
    seen: dict[tuple[str, str, int], int] = {}
    try:
        records = list(csv.reader(source))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise UsageError(f"{name}: not a readable CSV file: {exc}") from exc
    for line, fields in enumerate(records, start=1):
        if not fields or all(not f.strip() for f in fields):
            continue
        fields = [f.strip() for f in fields]
        if line == 1 and tuple(f.lower() for f in fields) == GROUPS_HEADER:
            continue
        where = f"{name} line {line}"
        if len(fields) != 4:
            raise UsageError(
                f"{where}: expected group,topic,partition,offset, got {len(fields)} columns: {','.join(fields)}"
            )
        if not fields[0]:
            raise UsageError(f"{where}: empty group id")
        row = _parse_row(fields[1:], where)
        key = (fields[0], row.topic, row.partition)
        if key in seen:
            raise UsageError(f"{where}: {fields[0]} {row.topic}:{row.partition} already on line {seen[key]}")
        seen[key] = line
        rows.append((fields[0], row))
    return rows
