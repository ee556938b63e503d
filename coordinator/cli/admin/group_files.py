"""Several groups in one CSV file (`group,topic,partition,offset`, kafka-consumer-groups.sh's
format for more than one group): `offsets export --all-groups` writes it, `offsets import
--groups-file` reads it (a plan unless --execute). Each group is imported on its own: a group that cannot take its
offsets (it has members, a partition is unknown) is reported and the others go ahead, as
`--all-groups` does everywhere."""

from __future__ import annotations

import argparse
import sys

from coordinator.cli.admin.client import TP, AdminClient, Committed
from coordinator.cli.admin.csvfile import OffsetRow, read_group_offsets_csv, write_group_offsets_csv
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.missing_topics import settle_missing
from coordinator.cli.admin.offsets_cmd import DRY_RUN_NOTE, refuse_if_active, refuse_if_joined
from coordinator.cli.admin.output import note, print_json, print_table
from protocol.errors import ErrorCode, error_name


def offsets_export_all(client: AdminClient, args: argparse.Namespace) -> int:
    rows: list[tuple[str, OffsetRow]] = []
    for group in sorted(g.group_id for g in client.list_groups([], [])):
        committed = client.committed_offsets(group)
        rows.extend(
            (group, OffsetRow(tp.topic, tp.partition, c.offset)) for tp, c in sorted(committed.items())
        )
    if args.format == "json":
        groups: dict[str, list[dict[str, object]]] = {}
        for group, r in rows:
            groups.setdefault(group, []).append(
                {"topic": r.topic, "partition": r.partition, "offset": r.offset}
            )
        print_json([{"group": g, "offsets": offsets} for g, offsets in groups.items()])
    else:
        write_group_offsets_csv(sys.stdout, rows)
    if not rows:
        note("no group has committed offsets")
    return 0


def offsets_import_groups(client: AdminClient, args: argparse.Namespace) -> int:
    path = args.groups_file
    try:
        if path == "-":
            rows = read_group_offsets_csv(sys.stdin, "<stdin>")
        else:
            with open(path, newline="", encoding="utf-8") as source:
                rows = read_group_offsets_csv(source, path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not rows:
        raise UsageError(f"{path}: no offsets to import")
    by_group: dict[str, dict[TP, Committed]] = {}
    for group, r in rows:
        by_group.setdefault(group, {})[TP(r.topic, r.partition)] = Committed(r.offset)
    skipped = settle_missing(
        client,
        sorted({tp for offsets in by_group.values() for tp in offsets}),
        args.missing_topics,
        dry_run=not args.execute,
    )
    by_group = {g: {tp: c for tp, c in o.items() if tp not in skipped} for g, o in by_group.items()}
    by_group = {g: o for g, o in by_group.items() if o}
    results: list[tuple[str, TP, int, int]] = []
    failures: list[KafkaError] = []
    for group, offsets in by_group.items():
        try:
            refuse_if_active(client, group, "import offsets into")
            errors: dict[TP, int] = {}
            if args.execute:  # a plan unless --execute, as every offset change
                errors = client.commit_offsets(group, offsets)
                refuse_if_joined(client, group, "import offsets into", errors)
        except KafkaError as exc:
            failures.append(exc)
            continue
        results.extend(
            (group, tp, c.offset, errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp, c in offsets.items()
        )
    if args.format == "json":
        print_json([_result_json(g, tp, o, code, args.execute) for g, tp, o, code in results])
    elif results:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET", *(["STATUS"] if args.execute else [])],
            [
                [g, tp.topic, tp.partition, o, *([_status(code)] if args.execute else [])]
                for g, tp, o, code in results
            ],
        )
    if results and not args.execute:
        note(DRY_RUN_NOTE)
        return 1 if failures else 0
    for failure in failures:
        note(str(failure))
    partition_failures = [(g, tp, code) for g, tp, _o, code in results if code != ErrorCode.NONE]
    for g, tp, code in partition_failures:
        note(str(KafkaError(code, f"cannot commit {tp} for group {g!r}")))
    return 1 if failures or partition_failures else 0


def _status(code: int) -> str:
    return "committed" if code == ErrorCode.NONE else error_name(code)


def _result_json(group: str, tp: TP, offset: int, code: int, executed: bool) -> dict[str, object]:
    entry: dict[str, object] = {
        "group": group,
        "topic": tp.topic,
        "partition": tp.partition,
        "new_offset": offset,
    }
    if executed:
        entry["error"] = None if code == ErrorCode.NONE else error_name(code)
    return entry
