"""Moving consumer groups between clusters: `offsets import --from-kafka` and `offsets export --to-kafka`.

The committed offsets of each group are read from the source cluster's own group coordinator
(FindCoordinator, then OffsetFetch there) and committed on the destination's coordinator as a
simple consumer does (OffsetCommit with generation -1 and an empty member id, as
kafka-consumer-groups.sh does), with their metadata and leader epoch. A dry run (the default)
prints the plan only.

A group is moved only while it is inactive on both sides: with members on the source its
offsets are still moving, with members on the destination a commit from outside would be
rejected (and would fight the members). Every named group is checked before anything is
committed, so a refused move changes nothing.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from coordinator.cli.admin.client import TP, AdminClient, Committed, GroupDescription
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.output import note, print_json, print_table
from protocol.errors import ErrorCode, error_name


@dataclass(slots=True)
class GroupMove:
    """The offsets of one group: what the source has, what the destination has now."""

    group: str
    offsets: dict[TP, Committed]
    current: dict[TP, Committed]
    errors: dict[TP, int] = field(default_factory=dict)

    @property
    def left_alone(self) -> list[TP]:
        """Partitions the destination has offsets for and the source does not (not touched)."""
        return sorted(set(self.current) - set(self.offsets))


@dataclass(frozen=True, slots=True)
class Direction:
    verb: str  # "import" / "export"
    source_name: str
    destination_name: str


def offsets_import_from_kafka(client: AdminClient, args: argparse.Namespace) -> int:
    """`offsets import --from-kafka SRC`: from another cluster into the --bootstrap one."""
    if args.file is not None:
        raise UsageError("--from-kafka reads the offsets from that cluster: give no FILE")
    zookeeper_only = [
        flag
        for flag, given in (
            ("--ignore-live-consumers", args.ignore_live_consumers),
            ("--missing-topics", args.missing_topics != "fail"),
        )
        if given
    ]
    if zookeeper_only:
        raise UsageError(f"{', '.join(zookeeper_only)} go with --from-zookeeper")
    _check_move_arguments(args, args.from_kafka, "--from-kafka")
    direction = Direction("import", args.from_kafka, args.bootstrap)
    with AdminClient(args.from_kafka, timeout=args.timeout) as source:
        return _move(source, client, direction, args)


def offsets_export_to_kafka(client: AdminClient, args: argparse.Namespace) -> int:
    """`offsets export --to-kafka DEST`: from the --bootstrap cluster into another one (rollback)."""
    if args.with_metadata:
        raise UsageError("--with-metadata is for the CSV export; --to-kafka always copies the metadata")
    _check_move_arguments(args, args.to_kafka, "--to-kafka")
    direction = Direction("export", args.bootstrap, args.to_kafka)
    with AdminClient(args.to_kafka, timeout=args.timeout) as destination:
        return _move(client, destination, direction, args)


def _check_move_arguments(args: argparse.Namespace, other: str, flag: str) -> None:
    if args.group is not None and (args.group_option is not None or args.all_groups):
        raise UsageError(f"{flag}: give the group once (GROUP or --group G), or --all-groups")
    if args.group is None and args.group_option is None and not args.all_groups:
        raise UsageError(f"{flag} needs --group G or --all-groups")
    if _same_address(other, args.bootstrap):
        raise UsageError(f"{flag} {other} is the --bootstrap cluster itself")


def check_file_arguments(args: argparse.Namespace, flag: str, *, planned: bool = False) -> None:
    """A CSV export or import takes none of the options that belong to moving groups between
    clusters; ``planned``: the file command plans too (a file import), so --execute and
    --dry-run are its own."""
    given = [
        name
        for name, value in (
            ("--group", args.group_option is not None),
            ("--all-groups", args.all_groups),
            ("--topic", args.topic is not None),
            ("--execute", args.execute and not planned),
            ("--dry-run", args.dry_run and not planned),
        )
        if value
    ]
    if given:
        raise UsageError(f"{', '.join(given)}: only with {flag}")


def _same_address(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def _move(
    source: AdminClient, destination: AdminClient, direction: Direction, args: argparse.Namespace
) -> int:
    moves = _plan(source, destination, direction, args)
    if args.execute:
        for move in moves:
            move.errors = destination.commit_offsets(move.group, move.offsets)
            if ErrorCode.UNKNOWN_MEMBER_ID in move.errors.values():
                # Members joined after the check: the destination refused the commit as a whole.
                note(
                    f"group {move.group!r} got members on {direction.destination_name} after the "
                    "check: its offsets were not committed there"
                )
    _print_moves(args, direction, moves)
    for move in moves:
        if move.left_alone:
            note(
                f"group {move.group!r} on {direction.destination_name} also has offsets that "
                f"{direction.source_name} lacks, left as they are: {', '.join(map(str, move.left_alone))}"
            )
    if not moves:
        note(f"no group on {direction.source_name} has committed offsets: nothing to {direction.verb}")
    elif not args.execute:
        note(
            f"Dry run: nothing was changed. Run again with --execute to commit these offsets "
            f"on {direction.destination_name}."
        )
    failures = [(m.group, tp, code) for m in moves for tp, code in sorted(m.errors.items()) if code]
    for group, tp, code in failures:
        note(str(KafkaError(code, f"cannot commit {tp} for group {group!r} on {direction.destination_name}")))
    return 1 if failures else 0


def _plan(
    source: AdminClient, destination: AdminClient, direction: Direction, args: argparse.Namespace
) -> list[GroupMove]:
    """Every group to move with its offsets; raises before anything is committed if one cannot move."""
    for cluster in (source, destination):  # an unreachable cluster is named before anything else
        cluster.brokers()
    named = args.group_option or args.group
    groups = [named] if named else [g.group_id for g in source.list_groups([], [])]
    topics = set(args.topic) if args.topic else None
    moves: list[GroupMove] = []
    for group in groups:
        _refuse_if_live(source, group, direction, on_source=True)
        offsets = {
            tp: c for tp, c in source.committed_offsets(group).items() if topics is None or tp.topic in topics
        }
        if not offsets:
            if named:
                raise KafkaError(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"group {group!r} has no committed offsets on {direction.source_name}"
                    + (f" for topic {', '.join(sorted(topics))}" if topics else "")
                    + f": nothing to {direction.verb}",
                )
            note(f"group {group!r} has no committed offsets on {direction.source_name}: skipped")
            continue
        _refuse_if_live(destination, group, direction, on_source=False)
        current = {
            tp: c
            for tp, c in destination.committed_offsets(group).items()
            if topics is None or tp.topic in topics
        }
        moves.append(GroupMove(group, dict(sorted(offsets.items())), current))
    _note_missing_partitions(destination, direction, moves)
    return moves


def _refuse_if_live(client: AdminClient, group: str, direction: Direction, on_source: bool) -> None:
    described: GroupDescription = client.describe_group(group, must_exist=False)
    if not described.is_active:
        return
    count = len(described.members)
    where = direction.source_name if on_source else direction.destination_name
    raise KafkaError(
        ErrorCode.NON_EMPTY_GROUP,
        f"cannot {direction.verb} group {group!r} while it has active members on {where} "
        f"(state {described.state}, {count} member{'s' if count != 1 else ''}); stop its consumers first",
        explain=False,
    )


def _note_missing_partitions(destination: AdminClient, direction: Direction, moves: list[GroupMove]) -> None:
    """Say ahead of the commit which partitions the destination lacks (commits to them fail)."""
    wanted = sorted({tp for move in moves for tp in move.offsets})
    if not wanted:
        return
    meta = destination.metadata({tp.topic for tp in wanted})
    missing = [
        tp
        for tp in wanted
        if (info := meta.topics.get(tp.topic)) is None
        or info.error_code != ErrorCode.NONE
        or tp.partition not in info.leaders
    ]
    if missing:
        note(
            f"{direction.destination_name} has no partition {', '.join(map(str, missing))}: "
            "create the topics (with as many partitions) there first; "
            "Kafka refuses commits to them with UNKNOWN_TOPIC_OR_PARTITION"
        )


def _print_moves(args: argparse.Namespace, direction: Direction, moves: list[GroupMove]) -> None:
    executed = bool(args.execute)
    if args.format == "json":
        doc: dict[str, Any] = {
            "source": direction.source_name,
            "destination": direction.destination_name,
            "executed": executed,
            "groups": [_move_json(move, executed) for move in moves],
        }
        print_json(doc)
        return
    if not moves:
        return
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"] + (
        ["STATUS"] if executed else []
    )
    rows: list[list[object]] = []
    for move in moves:
        for tp, committed in move.offsets.items():
            current = move.current.get(tp)
            row: list[object] = [
                move.group,
                tp.topic,
                tp.partition,
                None if current is None else current.offset,
                committed.offset,
            ]
            if executed:
                code = move.errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                row.append("committed" if code == ErrorCode.NONE else error_name(code))
            rows.append(row)
    print_table(headers, rows)


def _move_json(move: GroupMove, executed: bool) -> dict[str, Any]:
    partitions = []
    for tp, committed in move.offsets.items():
        current = move.current.get(tp)
        entry: dict[str, Any] = {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": None if current is None else current.offset,
            "new_offset": committed.offset,
            "leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata,
        }
        if executed:
            code = move.errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            entry["error"] = None if code == ErrorCode.NONE else error_name(code)
        partitions.append(entry)
    return {"group": move.group, "partitions": partitions}
