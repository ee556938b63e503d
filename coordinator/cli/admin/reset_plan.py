"""Which partitions `offsets reset` touches and the offset each one gets (Kafka's semantics).

--to-offset, --shift-by and --from-file are kept within the log's [earliest, latest] range, as
kafka-consumer-groups.sh does, unless --no-clamp; --to-datetime and --by-duration take the first
offset at or after the time, or the log end when no record is that recent.

--to-group copies another group's committed offsets (rpk's `group seek --to-group`): with
--all-topics every partition that group has an offset for, with --topic the partitions named,
each of which it must have an offset for.

A broker that holds no records (this server in standalone mode, which says so in ApiVersions)
has no log to clamp against or to search: its ListOffsets answers 0 for want of a log. There
offsets are taken as given (--shift-by from the committed offset), and the methods that need the
log (--to-earliest, --to-latest, --to-datetime, --by-duration) are refused with the reason.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from typing import Final

from coordinator.cli.admin.client import EARLIEST, LATEST, TP, AdminClient, Committed
from coordinator.cli.admin.csvfile import OffsetRow
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.output import note
from protocol.errors import ErrorCode


def resolve_scope(client: AdminClient, specs: list[tuple[str, list[int] | None]]) -> list[TP]:
    """--topic T[:P,...] specs -> partitions, checked against the cluster's metadata."""
    meta = client.metadata(t for t, _ in specs)
    partitions: set[TP] = set()
    for topic, wanted in specs:
        info = meta.topics.get(topic)
        if info is None or info.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist")
        if info.error_code != ErrorCode.NONE:
            raise KafkaError(info.error_code, f"topic {topic!r}")
        missing = [p for p in wanted or [] if p not in info.leaders]
        if missing:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} has {len(info.leaders)} partitions; no partition {', '.join(map(str, missing))}",
                explain=False,
            )
        partitions.update(TP(topic, p) for p in (info.leaders if wanted is None else wanted))
    return sorted(partitions)


def check_scope(args: argparse.Namespace) -> None:
    """A scope is needed unless the offsets come from a file (argparse cannot say that)."""
    if not (args.topic or args.all_topics or args.from_file is not None):
        raise UsageError("one of the arguments --topic --all-topics is required (unless --from-file)")


def plan_reset(
    client: AdminClient,
    args: argparse.Namespace,
    committed: dict[TP, Committed],
    file_rows: list[OffsetRow] | None,
) -> dict[TP, int]:
    """The new offset of every partition in scope, in (topic, partition) order."""
    holds_records = client.holds_records()
    if not holds_records:
        _refuse_log_methods(client, args)
    no_clamp = args.no_clamp or not holds_records
    source = _source_offsets(client, args.to_group) if args.to_group is not None else {}
    scope: list[TP] | None = None
    if args.all_topics:
        # --to-group copies the other group's partitions; the others select what this group has.
        scope = sorted(source if args.to_group is not None else committed)
    elif args.topic:
        scope = resolve_scope(client, args.topic)
    if file_rows is not None:
        requested = {TP(r.topic, r.partition): r.offset for r in file_rows}
        if scope is not None:
            requested = {tp: o for tp, o in requested.items() if tp in set(scope)}
        return _clamped(client, dict(sorted(requested.items())), no_clamp)
    if not scope:
        return {}
    if args.to_earliest:
        return _log_offsets(client, scope, EARLIEST)
    if args.to_latest:
        return _log_offsets(client, scope, LATEST)
    if args.to_offset is not None:
        return _clamped(client, dict.fromkeys(scope, args.to_offset), no_clamp)
    if args.shift_by is not None:
        return _clamped(client, _shifted(scope, committed, args.shift_by), no_clamp)
    if args.to_current:
        return _current(client, scope, committed, holds_records)
    if args.to_group is not None:
        return _clamped(client, _copied(scope, args.to_group, source), no_clamp)
    if args.to_datetime is not None:
        return _offsets_at(client, scope, args.to_datetime)
    if args.by_duration is not None:
        return _offsets_at(client, scope, int(time.time() * 1000) - args.by_duration)
    raise UsageError("no reset method given")


_LOG_METHODS: Final = (
    ("to_earliest", "--to-earliest", "its earliest offset"),
    ("to_latest", "--to-latest", "its log-end offset"),
    ("to_datetime", "--to-datetime", "the offset of a time"),
    ("by_duration", "--by-duration", "the offset of a time"),
)


def _refuse_log_methods(client: AdminClient, args: argparse.Namespace) -> None:
    for attribute, flag, what in _LOG_METHODS:
        if getattr(args, attribute) not in (None, False):
            address = client.bootstrap_connection().address
            raise UsageError(
                f"{flag} needs the partitions' log, and {address} is a standalone group coordinator "
                f"that holds no records: it cannot know {what}. Give the offset with --to-offset, "
                "--shift-by or --from-file (these are not clamped there)"
            )


def _current(
    client: AdminClient, scope: list[TP], committed: dict[TP, Committed], holds_records: bool
) -> dict[TP, int]:
    """Kafka's --to-current: the committed offset, else the log-end offset."""
    missing = [tp for tp in scope if tp not in committed]
    if missing and not holds_records:
        raise UsageError(
            f"{', '.join(map(str, missing))}: the group has no committed offset there, and this broker holds "
            "no records, so there is no log-end offset to use instead (use --to-offset for those partitions)"
        )
    at_end = _log_offsets(client, missing, LATEST) if missing else {}
    return {tp: committed[tp].offset if tp in committed else at_end[tp] for tp in scope}


def _source_offsets(client: AdminClient, group: str) -> dict[TP, int]:
    """The committed offsets --to-group copies (rpk's `group seek --to-group`)."""
    found = client.committed_offsets(group)
    if not found:
        raise KafkaError(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"group {group!r} has no committed offsets to copy",
            explain=False,
        )
    return {tp: c.offset for tp, c in found.items()}


def _copied(scope: list[TP], source_group: str, source: dict[TP, int]) -> dict[TP, int]:
    missing = [str(tp) for tp in scope if tp not in source]
    if missing:
        raise UsageError(
            f"group {source_group!r} has no committed offset for {', '.join(missing)}; "
            "narrow --topic to its partitions (or use --all-topics to copy every offset it has)"
        )
    return {tp: source[tp] for tp in scope}


def _shifted(scope: list[TP], committed: dict[TP, Committed], shift: int) -> dict[TP, int]:
    missing = [str(tp) for tp in scope if tp not in committed]
    if missing:
        raise UsageError(
            f"cannot shift {', '.join(missing)}: the group has no committed offset there "
            "(use --to-earliest, --to-latest or --to-offset for those partitions)"
        )
    return {tp: max(0, committed[tp].offset + shift) for tp in scope}


def _log_offsets(client: AdminClient, partitions: Iterable[TP], spec: int) -> dict[TP, int]:
    """Earliest or latest offset of each partition; a Kafka error if a partition has none."""
    found = client.log_offsets(partitions, spec)
    result: dict[TP, int] = {}
    for tp, answer in sorted(found.items()):
        if answer.error_code != ErrorCode.NONE or answer.offset is None:
            code = answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR
            raise KafkaError(code, f"listing the {'latest' if spec == LATEST else 'earliest'} offset of {tp}")
        result[tp] = answer.offset
    return result


def _offsets_at(client: AdminClient, partitions: list[TP], timestamp_ms: int) -> dict[TP, int]:
    found = client.log_offsets(partitions, timestamp_ms)
    for tp, answer in found.items():
        if answer.error_code != ErrorCode.NONE:
            raise KafkaError(answer.error_code, f"listing the offset of {tp} at {timestamp_ms} ms")
    latest = [tp for tp, answer in found.items() if answer.offset is None]
    at_end = _log_offsets(client, latest, LATEST) if latest else {}
    return {
        tp: at_end[tp] if answer.offset is None else answer.offset for tp, answer in sorted(found.items())
    }


def _clamped(client: AdminClient, requested: dict[TP, int], no_clamp: bool) -> dict[TP, int]:
    if no_clamp or not requested:
        return requested
    earliest = _log_offsets(client, requested, EARLIEST)
    latest = _log_offsets(client, requested, LATEST)
    result: dict[TP, int] = {}
    for tp, offset in requested.items():
        if offset > latest[tp]:
            note(
                f"{tp}: {offset} is past the log-end offset {latest[tp]}; using {latest[tp]} (--no-clamp keeps it)"
            )
            offset = latest[tp]
        elif offset < earliest[tp]:
            note(
                f"{tp}: {offset} is before the earliest offset {earliest[tp]}; using {earliest[tp]} (--no-clamp keeps it)"
            )
            offset = earliest[tp]
        result[tp] = offset
    return result
