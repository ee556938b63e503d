"""`coordinator groups list|describe|delete`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from coordinator.cli.admin.client import (
    CONSUMER,
    EARLIEST,
    LATEST,
    SHARE,
    STREAMS,
    TP,
    AdminClient,
    GroupDescription,
    Member,
)
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.group_configs_cmd import (
    GroupConfigValue,
    describe_group_configs,
    print_group_configs,
)
from coordinator.cli.admin.http_api import HttpApiError
from coordinator.cli.admin.lag_summary import lag_per_topic
from coordinator.cli.admin.lag_time import GroupTime, group_time, seconds_cell
from coordinator.cli.admin.output import note, print_json, print_table
from coordinator.cli.admin.share_offsets import StartOffset, start_offsets
from protocol.errors import ErrorCode, error_name


def split_values(values: list[str] | None) -> list[str]:
    """Repeated and comma-separated flag values: --state Stable,Empty --state Dead."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def groups_list(client: AdminClient, args: argparse.Namespace) -> int:
    listings = client.list_groups(split_values(args.state), split_values(args.type))
    if args.format == "json":
        print_json(
            [
                {
                    "group": g.group_id,
                    "state": g.state,
                    "type": g.group_type,
                    "protocol_type": g.protocol_type,
                    "broker": g.broker,
                }
                for g in listings
            ]
        )
    elif listings:
        print_table(
            ["GROUP", "STATE", "TYPE", "PROTOCOL-TYPE"],
            [[g.group_id, g.state, g.group_type, g.protocol_type] for g in listings],
        )
    else:
        note("no groups" + (" match the filters" if args.state or args.type else ""))
    return 0


@dataclass(slots=True)
class OffsetLine:
    """One line of the offsets view: a partition the group has committed or is assigned.

    ``log_end`` is None when the log end is unknown: ListOffsets failed for the partition, or
    it reported an end before the committed offset (see ``known_log_end``).
    """

    tp: TP
    current: int | None
    log_end: int | None
    owner: Member | None
    reported_end: int | None = None  # what ListOffsets answered, also when it cannot be the end
    lag_seconds: float | None = None  # from the server's lag sampler (--http)
    status: str | None = None
    # Streams groups: the active task reading the partition ("subtopology:partition"), the
    # committed record's leader epoch, and the log start the lag counts from without a commit.
    task: str | None = None
    leader_epoch: int | None = None
    start: int | None = None

    @property
    def topic(self) -> str:
        return self.tp.topic

    @property
    def lag(self) -> int | None:
        base = self.current if self.current is not None else self.start
        return None if base is None or self.log_end is None else self.log_end - base

    @property
    def end_behind_commit(self) -> bool:
        return self.log_end is None and self.reported_end is not None


def known_log_end(committed: int | None, reported: int | None) -> int | None:
    """The log end to show next to a committed offset, or None when it is unknown.

    A consumer commits positions it has read up to, so a committed offset never lies beyond the
    end of the log it was read from. A reported end before the committed offset therefore is not
    the end of that log: a broker that stores no records (a standalone coordinator answers 0 for
    every log), a log truncated or deleted and re-created. The lag is unknown then, never negative.
    """
    if reported is None or (committed is not None and committed > reported):
        return None
    return reported


def offset_lines(client: AdminClient, group: GroupDescription) -> list[OffsetLine]:
    """Committed offsets, log-end offsets (ListOffsets latest) and owners, as kafka-consumer-groups."""
    if group.group_type == STREAMS:
        return streams_offset_lines(client, group)
    committed = client.committed_offsets(group.group_id)
    owners = {tp: m for m in group.members for tp in m.assignment or []}
    partitions = sorted(set(committed) | set(owners))
    ends = client.log_offsets(partitions, LATEST) if partitions else {}
    lines = []
    for tp in partitions:
        current = committed[tp].offset if tp in committed else None
        reported = ends[tp].offset if tp in ends else None
        lines.append(OffsetLine(tp, current, known_log_end(current, reported), owners.get(tp), reported))
    return lines


def task_input_partitions(group: GroupDescription) -> dict[TP, tuple[str, Member]]:
    """Each input partition of a streams group's active tasks, with its task and member: task
    "s:p" reads partition p of subtopology s's source and repartition source topics (Kafka's
    StreamsGroupCommand.getTopicPartitions)."""
    inputs = group.task_inputs or {}
    out: dict[TP, tuple[str, Member]] = {}
    for member in group.members:
        for task in member.tasks.active if member.tasks else []:
            subtopology, _, partition = task.rpartition(":")
            for topic in inputs.get(subtopology, []):
                out[TP(topic, int(partition))] = (task, member)
    return out


def streams_offset_lines(client: AdminClient, group: GroupDescription) -> list[OffsetLine]:
    """kafka-streams-groups --describe --offsets: the input partitions of the active tasks (and
    any other committed partition), the committed offset, the log end and the lag -- from the
    log start where nothing is committed, as Kafka 4.4 counts it -- grouped by task."""
    committed = client.committed_offsets(group.group_id)
    tasks = task_input_partitions(group)
    partitions = sorted(set(committed) | set(tasks))
    ends = client.log_offsets(partitions, LATEST) if partitions else {}
    uncommitted = [tp for tp in partitions if tp not in committed]
    starts = client.log_offsets(uncommitted, EARLIEST) if uncommitted else {}
    lines = []
    for tp in partitions:
        commit = committed.get(tp)
        current = commit.offset if commit is not None else None
        reported = ends[tp].offset if tp in ends else None
        task, owner = tasks.get(tp, (None, None))
        lines.append(
            OffsetLine(
                tp,
                current,
                known_log_end(current, reported),
                owner,
                reported,
                task=task,
                leader_epoch=commit.leader_epoch if commit is not None and commit.leader_epoch >= 0 else None,
                start=starts[tp].offset if tp in starts else None,
            )
        )
    lines.sort(key=lambda line: (_task_order(line.task), line.tp))
    return lines


def _task_order(task: str | None) -> tuple[int, str, int]:
    """Tasks in subtopology then partition order; partitions no task reads last."""
    if task is None:
        return (1, "", 0)
    subtopology, _, partition = task.rpartition(":")
    return (0, subtopology, int(partition))


def unknown_end_note(lines: list[OffsetLine]) -> str | None:
    """Why LOG-END-OFFSET and LAG show '-' (null in JSON) where ListOffsets did answer."""
    behind = [line for line in lines if line.end_behind_commit]
    if not behind:
        return None
    ends = sorted({line.reported_end for line in behind if line.reported_end is not None})
    return (
        f"log end unknown for {len(behind)} partition{'s' if len(behind) != 1 else ''}: the broker "
        f"reports a log end ({', '.join(map(str, ends))}) before the committed offset, so it is not "
        "the end of the log these offsets were read from: a standalone coordinator stores no records "
        "(every log is empty); through a gateway, the upstream cluster answers ListOffsets(latest) "
        "behind its log (Tansu 0.6 answers the last batch's base offset + 1) and no client has "
        "fetched the partition through the gateway yet, whose high watermark it would answer; or "
        "the log was truncated or re-created"
    )


def format_partitions(assignment: list[TP] | None) -> str:
    """'orders:0,1;payments:3': an assignment as kafka-consumer-groups --members --verbose prints it
    (since Kafka 3.7, for classic and consumer groups alike); '-' when there is none."""
    if not assignment:
        return "-"
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in _by_topic(assignment).items())


def _by_topic(assignment: list[TP]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(assignment):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def format_subscription(member: Member) -> str:
    """Subscribed topic names, then the regex (as /regex/) if the member subscribed to one."""
    parts = list(member.subscribed_topics or [])
    if member.subscribed_topic_regex:
        parts.append(f"/{member.subscribed_topic_regex}/")
    return ",".join(parts) or "-"


def groups_describe(client: AdminClient, args: argparse.Namespace) -> int:
    show_offsets = args.offsets or args.lag_per_topic or not (args.members or args.state or args.configs)
    described: list[tuple[GroupDescription, list[OffsetLine] | None]] = []
    failures: list[KafkaError] = []  # as kafka-consumer-groups: print what exists, report the rest
    groups = chosen_groups(client, args)
    if not groups:
        note("no groups")
        return 0
    times: dict[str, GroupTime] = {}
    time_failures: list[str] = []
    configs = describe_group_configs(client, groups) if args.configs else []
    if args.configs and not (show_offsets or args.members or args.state):
        # A group's configs exist whether or not the group does (as in Kafka).
        print_group_configs(configs, args.format)
        return 0
    starts: dict[str, dict[TP, StartOffset]] = {}
    for group_id in groups:
        try:
            group = client.describe_group(group_id)
            # A share group commits no offsets: its start offsets and lag (DescribeShareGroupOffsets).
            lines = offset_lines(client, group) if show_offsets and group.group_type != SHARE else None
            if show_offsets and group.group_type == SHARE:
                starts[group.group_id] = start_offsets(client, group.group_id)
            described.append((group, lines))
        except KafkaError as exc:
            if len(groups) == 1 and not args.all_groups:
                raise
            failures.append(exc)
    if args.http and show_offsets:
        for group, lines in described:
            try:
                times[group.group_id] = _with_times(
                    lines or [], group_time(args.http, group.group_id, args.timeout)
                )
            except HttpApiError as exc:
                time_failures.append(f"lag in seconds of group {group.group_id!r}: {exc}")
    if described:
        _print_described(args, described, show_offsets, times, configs, starts)
    for failure in failures:
        note(str(failure))
    for message in time_failures:
        note(message)
    return 1 if failures or time_failures else 0


def _with_times(lines: list[OffsetLine], times: GroupTime) -> GroupTime:
    for line in lines:
        known = times.partitions.get(line.tp)
        if known is not None:
            line.lag_seconds, line.status = known.lag_seconds, known.status
    return times


def _print_described(
    args: argparse.Namespace,
    described: list[tuple[GroupDescription, list[OffsetLine] | None]],
    show_offsets: bool,
    times: dict[str, GroupTime],
    configs: list[GroupConfigValue],
    starts: dict[str, dict[TP, StartOffset]],
) -> None:
    if args.format == "json":
        shown = [_group_json(g, lines, args, times.get(g.group_id)) for g, lines in described]
        for entry, (g, _) in zip(shown, described, strict=True):
            if g.group_id in starts:
                entry["start_offsets"] = [
                    {"topic": tp.topic, "partition": tp.partition, "start_offset": o.start, "lag": o.lag}
                    for tp, o in sorted(starts[g.group_id].items())
                ]
        if args.configs:
            for entry, (g, _) in zip(shown, described, strict=True):
                entry["configs"] = {c.name: {"value": c.value, "source": c.source}
                                    for c in configs if c.group == g.group_id}  # fmt: skip
        print_json(shown)
        return
    # Classic groups keep kafka-consumer-groups' tables; consumer groups get their own, with the
    # KIP-848 columns (epochs, subscriptions, target assignment), after the classic ones.
    # Streams groups get kafka-streams-groups' columns (process, tasks per member).
    classic = [(g, lines) for g, lines in described if g.group_type not in (CONSUMER, SHARE, STREAMS)]
    consumer = [(g, lines) for g, lines in described if g.group_type in (CONSUMER, SHARE)]
    streams = [(g, lines) for g, lines in described if g.group_type == STREAMS]
    sections: list[tuple[list[str], list[list[object]]]] = []
    if args.state:
        if classic or not (consumer or streams):
            sections.append(_state_table(classic))
        if consumer:
            sections.append(_consumer_state_table(consumer))
        if streams:
            sections.append(_streams_state_table(streams))
    if args.members:
        if classic or not (consumer or streams):
            sections.append(_members_table(classic))
        if consumer:
            sections.append(_consumer_members_table(consumer))
        if streams:
            sections.append(_streams_members_table(streams))
    if show_offsets and any(g.group_type not in (SHARE, STREAMS) for g, _ in described):
        sections.append(
            _offsets_table([(g, ls) for g, ls in described if g.group_type != STREAMS], bool(args.http))
        )
    if show_offsets and streams:
        sections.append(_streams_offsets_table(streams))
    if starts:
        # kafka-share-groups' offsets table.
        sections.append(
            (
                ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                [
                    [group, tp.topic, tp.partition, o.start, o.lag]
                    for group, offsets in starts.items()
                    for tp, o in sorted(offsets.items())
                ],
            )
        )
    if args.lag_per_topic:
        sections.append(_topic_lag_table(described, bool(args.http)))
    pending = _pending_table(described, times)
    if pending[1]:
        sections.append(pending)
    for group, lines in described:
        if not group.members:
            note(f"Consumer group '{group.group_id}' has no active members.")
        explanation = unknown_end_note(lines or [])
        if explanation:
            note(f"Consumer group '{group.group_id}': {explanation}.")
        unavailable = times[group.group_id].unavailable if group.group_id in times else None
        if unavailable:
            note(f"Consumer group '{group.group_id}': LAG-SECONDS and STATUS unknown: {unavailable}.")
    if args.configs:
        shown_groups = {g.group_id for g, _ in described}
        rows: list[list[object]] = [
            [c.group, c.name, c.value, c.source] for c in configs if c.group in shown_groups
        ]
        sections.append((["GROUP", "CONFIG", "VALUE", "SOURCE"], rows))
    for i, (headers, rows) in enumerate(sections):
        if i:
            print()
        print_table(headers, rows)


def _state_table(described: list[tuple[GroupDescription, Any]]) -> tuple[list[str], list[list[object]]]:
    headers = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    rows: list[list[object]] = [
        [g.group_id, str(g.coordinator), g.protocol, g.state, len(g.members)] for g, _ in described
    ]
    return headers, rows


def _members_table(described: list[tuple[GroupDescription, Any]]) -> tuple[list[str], list[list[object]]]:
    headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    rows: list[list[object]] = [
        [
            g.group_id,
            m.member_id,
            m.group_instance_id,
            m.host,
            m.client_id,
            "-" if m.assignment is None else len(m.assignment),
            format_partitions(m.assignment),
        ]
        for g, _ in described
        for m in g.members
    ]
    return headers, rows


def _consumer_state_table(
    described: list[tuple[GroupDescription, Any]],
) -> tuple[list[str], list[list[object]]]:
    headers = [
        "GROUP", "COORDINATOR (ID)", "TYPE", "ASSIGNOR", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS",
    ]  # fmt: skip
    rows: list[list[object]] = [
        [
            g.group_id,
            str(g.coordinator),
            g.group_type,
            g.protocol,
            g.state,
            g.group_epoch,
            g.assignment_epoch,
            len(g.members),
        ]
        for g, _ in described
    ]
    return headers, rows


def _consumer_members_table(
    described: list[tuple[GroupDescription, Any]],
) -> tuple[list[str], list[list[object]]]:
    headers = [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "SUBSCRIPTION",
        "#PARTITIONS", "ASSIGNMENT", "TARGET-ASSIGNMENT",
    ]  # fmt: skip
    rows: list[list[object]] = [
        [
            g.group_id,
            m.member_id,
            m.group_instance_id,
            m.host,
            m.client_id,
            m.member_epoch,
            format_subscription(m),
            len(m.assignment or []),
            format_partitions(m.assignment),
            format_partitions(m.target_assignment),
        ]
        for g, _ in described
        for m in g.members
    ]
    return headers, rows


def _streams_state_table(
    described: list[tuple[GroupDescription, Any]],
) -> tuple[list[str], list[list[object]]]:
    headers = ["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    rows: list[list[object]] = [
        [g.group_id, str(g.coordinator), g.state, g.group_epoch, g.assignment_epoch, len(g.members)]
        for g, _ in described
    ]
    return headers, rows


def _streams_members_table(
    described: list[tuple[GroupDescription, Any]],
) -> tuple[list[str], list[list[object]]]:
    """kafka-streams-groups --describe --members: a member's process and tasks."""
    headers = [
        "GROUP",
        "MEMBER",
        "PROCESS",
        "CLIENT-ID",
        "EPOCH",
        "ACTIVE-TASKS",
        "STANDBY-TASKS",
        "WARMUP-TASKS",
    ]
    rows: list[list[object]] = []
    for g, _ in described:
        for m in g.members:
            tasks = m.tasks
            rows.append(
                [
                    g.group_id,
                    m.member_id,
                    m.process_id,
                    m.client_id,
                    m.member_epoch,
                    ",".join(tasks.active) if tasks else "",
                    ",".join(tasks.standby) if tasks else "",
                    ",".join(tasks.warmup) if tasks else "",
                ]
            )
    return headers, rows


def _offsets_table(
    described: list[tuple[GroupDescription, list[OffsetLine] | None]], with_time: bool
) -> tuple[list[str], list[list[object]]]:
    """kafka-consumer-groups' offsets table; with --http, LAG-SECONDS and STATUS after LAG."""
    time_headers = ["LAG-SECONDS", "STATUS"] if with_time else []
    headers = [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", *time_headers,
        "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    rows: list[list[object]] = []
    for g, lines in described:
        for line in lines or []:
            owner = line.owner
            times = [seconds_cell(line.lag_seconds), line.status] if with_time else []
            rows.append(
                [
                    g.group_id,
                    line.tp.topic,
                    line.tp.partition,
                    line.current,
                    line.log_end,
                    line.lag,
                    *times,
                    owner.member_id if owner else None,
                    owner.host if owner else None,
                    owner.client_id if owner else None,
                ]
            )
    return headers, rows


def _streams_offsets_table(
    described: list[tuple[GroupDescription, list[OffsetLine] | None]],
) -> tuple[list[str], list[list[object]]]:
    """kafka-streams-groups --describe --offsets --verbose's columns, a row per input partition of
    each active task, grouped by task (TASK first), then who runs the task."""
    headers = [
        "GROUP", "TASK", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET",
        "OFFSET-LAG", "MEMBER", "PROCESS",
    ]  # fmt: skip
    rows: list[list[object]] = [
        [
            g.group_id,
            line.task,
            line.tp.topic,
            line.tp.partition,
            line.current,
            line.leader_epoch,
            line.log_end,
            line.lag,
            line.owner.member_id if line.owner else None,
            line.owner.process_id if line.owner else None,
        ]
        for g, lines in described
        for line in lines or []
    ]
    return headers, rows


def _pending_table(
    described: list[tuple[GroupDescription, Any]], times: dict[str, GroupTime]
) -> tuple[list[str], list[list[object]]]:
    """Offsets committed in open transactions (--http; docs/transactions.md): what a stuck
    transaction holds, and which producer (id, epoch) and transactional id hold it."""
    headers = [
        "GROUP", "TOPIC", "PARTITION", "PENDING-OFFSET", "PRODUCER-ID", "PRODUCER-EPOCH",
        "TRANSACTIONAL-ID", "SINCE",
    ]  # fmt: skip
    rows: list[list[object]] = [
        [
            g.group_id, row.get("topic"), row.get("partition"), row.get("offset"),
            row.get("producer_id"), row.get("producer_epoch"), row.get("transactional_id"),
            _since(row.get("commit_ms")),
        ]
        for g, _ in described
        for row in (times[g.group_id].pending_transactional if g.group_id in times else [])
    ]  # fmt: skip
    return headers, rows


def _since(commit_ms: object) -> str | None:
    if not isinstance(commit_ms, int):
        return None
    return datetime.fromtimestamp(commit_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _topic_lag_table(
    described: list[tuple[GroupDescription, list[OffsetLine] | None]], with_time: bool
) -> tuple[list[str], list[list[object]]]:
    """rpk's lag per topic: '-' where some partition's lag is unknown (a partial sum understates)."""
    headers = ["GROUP", "TOPIC", "PARTITIONS", "LAG", *(["MAX-LAG-SECONDS"] if with_time else [])]
    rows: list[list[object]] = [
        [g.group_id, t.topic, t.partitions, t.lag, *([seconds_cell(t.max_lag_seconds)] if with_time else [])]
        for g, lines in described
        for t in lag_per_topic(list(lines or []))
    ]
    return headers, rows


def _group_json(
    group: GroupDescription, lines: list[OffsetLine] | None, args: argparse.Namespace, times: GroupTime | None
) -> dict[str, Any]:
    members = args.members
    doc: dict[str, Any] = {
        "group": group.group_id,
        "type": group.group_type,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "assignment_strategy": group.protocol,
        "coordinator": {
            "node_id": group.coordinator.node_id,
            "host": group.coordinator.host,
            "port": group.coordinator.port,
        },
        "member_count": len(group.members),
    }
    if group.group_type in (CONSUMER, SHARE):
        doc["assignor"] = group.protocol
        doc["group_epoch"] = group.group_epoch
        doc["assignment_epoch"] = group.assignment_epoch
        if members:
            doc["members"] = [_consumer_member_json(m) for m in group.members]
    elif group.group_type == STREAMS:
        doc["group_epoch"] = group.group_epoch
        doc["assignment_epoch"] = group.assignment_epoch
        if members:
            doc["members"] = [
                {
                    "member_id": m.member_id,
                    "process_id": m.process_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "member_epoch": m.member_epoch,
                    "active_tasks": m.tasks.active if m.tasks else [],
                    "standby_tasks": m.tasks.standby if m.tasks else [],
                    "warmup_tasks": m.tasks.warmup if m.tasks else [],
                    "target_active_tasks": m.tasks.target_active if m.tasks else [],
                }
                for m in group.members
            ]
    elif members:
        doc["members"] = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": None
                if m.assignment is None
                else [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
            }
            for m in group.members
        ]
    if lines is not None:
        doc["offsets"] = [
            {
                "topic": line.tp.topic,
                "partition": line.tp.partition,
                "current_offset": line.current,
                "log_end_offset": line.log_end,
                "lag": line.lag,
                **({"lag_seconds": line.lag_seconds, "status": line.status} if args.http else {}),
                **(
                    {
                        "task": line.task,
                        "leader_epoch": line.leader_epoch,
                        "process_id": line.owner.process_id if line.owner else None,
                    }
                    if group.group_type == STREAMS
                    else {}
                ),
                "member_id": line.owner.member_id if line.owner else None,
                "host": line.owner.host if line.owner else None,
                "client_id": line.owner.client_id if line.owner else None,
            }
            for line in lines
        ]
    if times is not None:
        doc["lag_status"] = {
            "status": times.status,
            "max_lag_seconds": times.max_lag_seconds,
            "unavailable_reason": times.unavailable,
        }
        doc["pending_transactional_offsets"] = times.pending_transactional
    if args.lag_per_topic and lines is not None:
        doc["lag_per_topic"] = [
            {
                "topic": t.topic,
                "partitions": t.partitions,
                "lag": t.lag,
                "unknown_lag_partitions": t.unknown,
                **({"max_lag_seconds": t.max_lag_seconds} if args.http else {}),
            }
            for t in lag_per_topic(list(lines))
        ]
    return doc


def _consumer_member_json(m: Member) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "instance_id": m.group_instance_id,
        "rack_id": m.rack_id,
        "client_id": m.client_id,
        "client_host": m.host,
        "member_epoch": m.member_epoch,
        "subscribed_topics": m.subscribed_topics or [],
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "assignment": _by_topic(m.assignment or []),
        "target_assignment": _by_topic(m.target_assignment or []),
    }


def chosen_groups(client: AdminClient, args: argparse.Namespace) -> list[str]:
    """GROUP arguments, or with --all-groups every group of the cluster (as kafka-consumer-groups)."""
    if args.all_groups == bool(args.groups):
        raise UsageError("give GROUP names or --all-groups (one of them)")
    if args.all_groups:
        return sorted(g.group_id for g in client.list_groups([], []))
    return list(dict.fromkeys(args.groups))


def groups_delete(client: AdminClient, args: argparse.Namespace) -> int:
    groups = chosen_groups(client, args)
    if not groups:
        note("no groups")
        return 0
    results = {group: client.delete_group(group) for group in groups}
    if args.format == "json":
        print_json(
            [
                {
                    "group": g,
                    "deleted": code == ErrorCode.NONE,
                    "error": None if code == 0 else error_name(code),
                }
                for g, code in results.items()
            ]
        )
    else:
        print_table(
            ["GROUP", "STATUS"],
            [[g, "deleted" if code == ErrorCode.NONE else error_name(code)] for g, code in results.items()],
        )
    failures = [
        KafkaError(code, f"cannot delete group {g!r}")
        for g, code in results.items()
        if code != ErrorCode.NONE
    ]
    for failure in failures:
        note(str(failure))
    return 1 if failures else 0
