"""`coordinator offsets reset|delete|export|import`."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from coordinator.cli.admin.client import SHARE, TP, AdminClient, Committed, GroupDescription
from coordinator.cli.admin.csvfile import OffsetRow, read_offsets_csv, write_offsets_csv
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.missing_topics import settle_missing
from coordinator.cli.admin.output import note, print_json, print_table
from coordinator.cli.admin.reset_plan import check_scope, plan_reset
from coordinator.cli.admin.share_offsets import alter_start_offsets, delete_start_offsets, start_offsets
from protocol.errors import ErrorCode, error_name

DRY_RUN_NOTE = "Dry run: nothing was changed. Run again with --execute to commit these offsets."


@dataclass(slots=True)
class Change:
    tp: TP
    current: int | None
    new: int
    error: int = ErrorCode.NONE


def refuse_if_active(client: AdminClient, group: str, action: str) -> GroupDescription:
    """Offsets may be changed from outside only while the group has no members (Empty or Dead).

    Classic groups are checked with DescribeGroups, consumer (KIP-848) groups with
    ConsumerGroupDescribe: both report a group with members as active.
    """
    described = client.describe_group(group, must_exist=False)
    if described.is_active:
        count = len(described.members)
        raise KafkaError(
            ErrorCode.NON_EMPTY_GROUP,
            f"cannot {action} group {group!r} while it has active members "
            f"(state {described.state}, {count} member{'s' if count != 1 else ''}); stop its consumers first",
            explain=False,
        )
    return described


def refuse_if_joined(client: AdminClient, group: str, action: str, errors: dict[TP, int]) -> None:
    """A non-member commit rejected with UNKNOWN_MEMBER_ID: members joined after the check.

    Coordinators reject a generation/epoch -1 commit to a group with members (classic and consumer
    groups alike) as a whole; report that as refuse_if_active does, if the group still has members.
    """
    if ErrorCode.UNKNOWN_MEMBER_ID in errors.values():
        refuse_if_active(client, group, action)


def read_csv_argument(path: str) -> list[OffsetRow]:
    if path == "-":
        return read_offsets_csv(sys.stdin, "<stdin>")
    try:
        with open(path, newline="", encoding="utf-8") as source:
            return read_offsets_csv(source, path)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def offsets_reset(client: AdminClient, args: argparse.Namespace) -> int:
    check_scope(args)
    if args.all_groups == (args.group is not None):
        raise UsageError("give a GROUP or --all-groups (one of them)")
    if args.to_group is not None and (args.all_groups or args.to_group == args.group):
        raise UsageError("--to-group copies another group's offsets into GROUP: name one GROUP, not itself")
    file_rows = read_csv_argument(args.from_file) if args.from_file is not None else None
    if not args.all_groups:
        changes = _reset_group(client, args, args.group, file_rows)
        _print_changes(args, changes, executed=args.execute, current_header="CURRENT-OFFSET")
        _reset_notes(args, bool(changes))
        return _report_failures(args.group, changes)
    # --all-groups, as kafka-consumer-groups: every group is planned on its own; one that cannot be
    # reset (members, no offsets in scope) is reported and the others go ahead.
    results: list[tuple[str, list[Change]]] = []
    failures: list[KafkaError] = []
    for group in sorted(g.group_id for g in client.list_groups([], [])):
        try:
            results.append((group, _reset_group(client, args, group, file_rows)))
        except KafkaError as exc:
            failures.append(exc)
    if args.format == "json":
        print_json(
            [_changes_json(group, changes, args.execute, "CURRENT-OFFSET") for group, changes in results]
        )
    else:
        rows = [(group, change) for group, changes in results for change in changes]
        _print_rows(rows, args.execute, "CURRENT-OFFSET")
    _reset_notes(args, any(changes for _group, changes in results))
    for failure in failures:
        note(str(failure))
    failed = [_report_failures(group, changes) for group, changes in results]
    return 1 if failures or any(failed) else 0


def _reset_group(
    client: AdminClient, args: argparse.Namespace, group: str, file_rows: list[OffsetRow] | None
) -> list[Change]:
    described = refuse_if_active(client, group, "reset the offsets of")
    if described.group_type == SHARE:
        return _reset_share_group(client, args, group, file_rows)
    committed = client.committed_offsets(group)
    if args.all_topics and not committed and described.state == "Dead" and args.to_group is None:
        raise KafkaError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"group {group!r} does not exist, so --all-topics selects nothing; name the partitions "
            "with --topic to give a new group its first offsets",
        )
    plan = plan_reset(client, args, committed, file_rows)
    changes = [Change(tp, committed[tp].offset if tp in committed else None, new) for tp, new in plan.items()]
    if args.execute and changes:
        errors = client.commit_offsets(group, {c.tp: Committed(c.new) for c in changes})
        refuse_if_joined(client, group, "reset the offsets of", errors)
        for change in changes:
            change.error = errors.get(change.tp, ErrorCode.UNKNOWN_SERVER_ERROR)
    return changes


def _reset_share_group(
    client: AdminClient, args: argparse.Namespace, group: str, file_rows: list[OffsetRow] | None
) -> list[Change]:
    """A share group's start offsets (kafka-share-groups --reset-offsets): planned as committed
    offsets are, written with AlterShareGroupOffsets."""
    current = {tp: Committed(o.start) for tp, o in start_offsets(client, group).items()}
    plan = plan_reset(client, args, current, file_rows)
    changes = [Change(tp, current[tp].offset if tp in current else None, new) for tp, new in plan.items()]
    if args.execute and changes:
        errors = alter_start_offsets(client, group, {c.tp: c.new for c in changes})
        for change in changes:
            change.error = errors.get(change.tp, ErrorCode.UNKNOWN_SERVER_ERROR)
    return changes


def _reset_notes(args: argparse.Namespace, changed: bool) -> None:
    if not changed:
        note("nothing to reset: no partition matched")
    elif not args.execute:
        note(DRY_RUN_NOTE)


def offsets_import(client: AdminClient, args: argparse.Namespace) -> int:
    """A file import plans first, as every offset change does (and Kafka's --reset-offsets
    --from-file): the offsets are committed only with --execute."""
    moving_only = [
        flag
        for flag, given in (
            ("--group", args.group_option is not None),
            ("--all-groups", args.all_groups),
            ("--topic", args.topic is not None),
        )
        if given
    ]
    if moving_only:
        raise UsageError(f"{', '.join(moving_only)} go with --from-kafka or --from-zookeeper")
    if args.ignore_live_consumers:
        raise UsageError("--ignore-live-consumers goes with --from-zookeeper")
    if args.group is None or args.file is None:
        raise UsageError("give GROUP and FILE (or --from-kafka, or --from-zookeeper)")
    rows = read_csv_argument(args.file)
    if not rows:
        raise UsageError(f"{args.file}: no offsets to import")
    refuse_if_active(client, args.group, "import offsets into")
    offsets = {TP(r.topic, r.partition): Committed(r.offset, r.metadata or "") for r in rows}
    for tp in settle_missing(client, list(offsets), args.missing_topics, dry_run=not args.execute):
        del offsets[tp]
    if not offsets:
        return 0
    current = client.committed_offsets(args.group)
    changes = [
        Change(tp, current[tp].offset if tp in current else None, c.offset) for tp, c in offsets.items()
    ]
    if args.execute:
        errors = client.commit_offsets(args.group, offsets)
        refuse_if_joined(client, args.group, "import offsets into", errors)
        for change in changes:
            change.error = errors.get(change.tp, ErrorCode.UNKNOWN_SERVER_ERROR)
    _print_changes(args, changes, executed=args.execute, current_header="CURRENT-OFFSET")
    if not args.execute:
        note(DRY_RUN_NOTE)
    return _report_failures(args.group, changes)


def offsets_delete(client: AdminClient, args: argparse.Namespace) -> int:
    if args.all_groups == (args.group is not None):
        raise UsageError("give a GROUP or --all-groups (one of them)")
    if not args.all_groups:
        results = _delete_group_offsets(client, args, args.group)
        if args.format == "json":
            print_json(_deleted_json(args.group, results))
        elif results:
            print_table(
                ["TOPIC", "PARTITION", "STATUS"],
                [[tp.topic, tp.partition, _deleted_status(code)] for tp, code in results],
            )
        return _report_delete_failures(args.group, results)
    # --all-groups: every group that has offsets of the topics; other groups are left alone.
    done: list[tuple[str, list[tuple[TP, int]]]] = []
    failures: list[KafkaError] = []
    for group in sorted(g.group_id for g in client.list_groups([], [])):
        try:
            results = _delete_group_offsets(client, args, group, quiet=True)
        except KafkaError as exc:
            failures.append(exc)
            continue
        if results:
            done.append((group, results))
    if args.format == "json":
        print_json([_deleted_json(group, results) for group, results in done])
    elif done:
        print_table(
            ["GROUP", "TOPIC", "PARTITION", "STATUS"],
            [
                [g, tp.topic, tp.partition, _deleted_status(code)]
                for g, results in done
                for tp, code in results
            ],
        )
    else:
        note("no group has committed offsets for these topics")
    for failure in failures:
        note(str(failure))
    failed = [_report_delete_failures(group, results) for group, results in done]
    return 1 if failures or any(failed) else 0


def _delete_group_offsets(
    client: AdminClient, args: argparse.Namespace, group: str, quiet: bool = False
) -> list[tuple[TP, int]]:
    if client.describe_group(group, must_exist=False).group_type == SHARE:
        return _delete_share_offsets(client, args, group, quiet)
    committed = client.committed_offsets(group)
    partitions: list[TP] = []
    for topic, wanted in args.topic:
        if wanted is None:
            found = [tp for tp in committed if tp.topic == topic]
            if not found and not quiet:
                note(f"group {group!r} has no committed offsets for topic {topic!r}")
            partitions.extend(found)
        elif quiet:  # --all-groups: only the partitions this group has offsets for
            partitions.extend(tp for tp in (TP(topic, p) for p in wanted) if tp in committed)
        else:
            partitions.extend(TP(topic, p) for p in wanted)
    partitions = sorted(set(partitions))
    if quiet and not partitions:
        return []
    group_error, errors = client.delete_offsets(group, partitions)
    if group_error != ErrorCode.NONE:
        raise KafkaError(group_error, f"deleting offsets of group {group!r}")
    return [(tp, errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in partitions]


def _delete_share_offsets(
    client: AdminClient, args: argparse.Namespace, group: str, quiet: bool
) -> list[tuple[TP, int]]:
    """A share group's start offsets are deleted per topic (DeleteShareGroupOffsets): each
    partition with state of the named topics is reported."""
    if any(wanted is not None for _topic, wanted in args.topic):
        raise UsageError(
            "a share group's start offsets are deleted per topic: name topics without partitions"
        )
    current = start_offsets(client, group)
    topics = sorted(
        {topic for topic, _ in args.topic if quiet is False or any(tp.topic == topic for tp in current)}
    )
    if not topics:
        return []
    errors = delete_start_offsets(client, group, topics)
    results: list[tuple[TP, int]] = []
    for topic in topics:
        partitions = sorted(tp for tp in current if tp.topic == topic)
        if not partitions and not quiet:
            note(f"share group {group!r} has no start offsets for topic {topic!r}")
        code = errors.get(topic, ErrorCode.UNKNOWN_SERVER_ERROR)
        results += [(tp, code) for tp in partitions]
    return results


def _deleted_json(group: str, results: list[tuple[TP, int]]) -> dict[str, Any]:
    return {
        "group": group,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "error": _name_or_none(code)}
            for tp, code in results
        ],
    }


def _deleted_status(code: int) -> str:
    return "deleted" if code == ErrorCode.NONE else error_name(code)


def _report_delete_failures(group: str, results: list[tuple[TP, int]]) -> int:
    failures = [(tp, code) for tp, code in results if code != ErrorCode.NONE]
    for tp, code in failures:
        note(str(KafkaError(code, f"cannot delete the offset of {tp} in group {group!r}")))
    return 1 if failures else 0


def offsets_export(client: AdminClient, args: argparse.Namespace) -> int:
    client.describe_group(args.group)  # GROUP_ID_NOT_FOUND rather than an empty file
    committed = client.committed_offsets(args.group)
    rows = [OffsetRow(tp.topic, tp.partition, c.offset, c.metadata) for tp, c in sorted(committed.items())]
    if args.format == "json":
        print_json(
            {
                "group": args.group,
                "offsets": [
                    {"topic": r.topic, "partition": r.partition, "offset": r.offset, "metadata": r.metadata}
                    for r in rows
                ],
            }
        )
    else:
        write_offsets_csv(sys.stdout, rows, with_metadata=args.with_metadata)
    if not rows:
        note(f"group {args.group!r} has no committed offsets")
    return 0


def _print_changes(
    args: argparse.Namespace, changes: list[Change], executed: bool, current_header: str | None
) -> None:
    if args.format == "json":
        print_json(_changes_json(args.group, changes, executed, current_header))
    else:
        _print_rows([(args.group, c) for c in changes], executed, current_header)


def _changes_json(
    group: str, changes: list[Change], executed: bool, current_header: str | None
) -> dict[str, Any]:
    doc: dict[str, Any] = {"group": group, "executed": executed, "partitions": []}
    for c in changes:
        entry: dict[str, Any] = {"topic": c.tp.topic, "partition": c.tp.partition}
        if current_header:
            entry["current_offset"] = c.current
        entry["new_offset"] = c.new
        if executed:
            entry["error"] = _name_or_none(c.error)
        doc["partitions"].append(entry)
    return doc


def _print_rows(changes: list[tuple[str, Change]], executed: bool, current_header: str | None) -> None:
    if not changes:
        return
    headers = ["GROUP", "TOPIC", "PARTITION"]
    headers += [current_header, "NEW-OFFSET"] if current_header else ["NEW-OFFSET"]
    headers += ["STATUS"] if executed else []
    rows: list[list[object]] = []
    for group, c in changes:
        row: list[object] = [group, c.tp.topic, c.tp.partition]
        row += [c.current, c.new] if current_header else [c.new]
        row += ["committed" if c.error == 0 else error_name(c.error)] if executed else []
        rows.append(row)
    print_table(headers, rows)


def _report_failures(group: str, changes: list[Change]) -> int:
    failures = [c for c in changes if c.error != ErrorCode.NONE]
    for c in failures:
        note(str(KafkaError(c.error, f"cannot commit {c.tp} for group {group!r}")))
    return 1 if failures else 0


def _name_or_none(code: int) -> str | None:
    return None if code == ErrorCode.NONE else error_name(code)
