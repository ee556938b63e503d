"""`groups list --from-zookeeper` and `offsets import --from-zookeeper`: moving ZooKeeper-era consumers.

The import reads every group first, checks it (registered instances in ZooKeeper, members here,
topics and partitions in the target cluster) and only then commits, one OffsetCommit per group.
A group whose commit fails for any partition is put back as it was (its previous offsets
committed again, offsets it did not have deleted): all or nothing per group.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from coordinator.cli.admin.client import TP, AdminClient, Committed
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.missing_topics import TopicGap, catalog_gaps, create_missing
from coordinator.cli.admin.offsets_cmd import refuse_if_active
from coordinator.cli.admin.output import note, print_json, print_table
from coordinator.cli.admin.zookeeper import ZkGroup, ZkRegistry, open_registry
from protocol.errors import ErrorCode, error_name


@dataclass
class Row:
    tp: TP
    new: int
    current: int | None = None
    status: str = "planned"
    skipped: bool = False


@dataclass
class GroupPlan:
    group: str
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    failed: bool = False


# -- groups list --from-zookeeper ---------------------------------------------------------


def groups_list_from_zookeeper(args: argparse.Namespace) -> int:
    with open_registry(args.from_zookeeper, args.timeout) as registry:
        groups = [registry.read_group(name) for name in registry.group_names()]
    if args.format == "json":
        print_json({"source": args.from_zookeeper, "groups": [_group_json(g) for g in groups]})
    elif groups:
        print_table(
            ["GROUP", "INSTANCES", "HOSTS", "OWNED-PARTITIONS", "OFFSETS", "TOPICS"],
            [
                [
                    g.name,
                    len(g.instances),
                    ",".join(sorted({i.host or "?" for i in g.instances})),
                    len(g.owners),
                    len(g.offsets),
                    ",".join(sorted({tp.topic for tp in g.offsets} | {tp.topic for tp in g.owners})),
                ]
                for g in groups
            ],
        )
    for g in groups:
        for line in g.notes:
            note(line)
    if not groups:
        note(f"no ZooKeeper-era consumer groups under {args.from_zookeeper}")
    live = [g.name for g in groups if g.live_instances]
    if live:
        note(f"still registered (live) in ZooKeeper: {', '.join(live)}")
    return 0


def _group_json(group: ZkGroup) -> dict[str, Any]:
    return {
        "group": group.name,
        "instances": [
            {"id": i.consumer_id, "host": i.host, "subscription": i.subscription, "ephemeral": i.ephemeral}
            for i in group.instances
        ],
        "owners": [
            {"topic": tp.topic, "partition": tp.partition, "owner": o}
            for tp, o in sorted(group.owners.items())
        ],
        "offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": o}
            for tp, o in sorted(group.offsets.items())
        ],
    }


# -- offsets import --from-zookeeper ------------------------------------------------------


def offsets_import_from_zookeeper(client: AdminClient, args: argparse.Namespace) -> int:
    if args.file is not None or (args.group is not None and (args.group_option or args.all_groups)):
        raise UsageError(
            "--from-zookeeper reads the offsets from ZooKeeper: give no FILE, and the group once"
        )
    group = args.group_option or args.group
    if group is None and not args.all_groups:
        raise UsageError("--from-zookeeper needs --group G or --all-groups")
    with open_registry(args.from_zookeeper, args.timeout) as registry:
        source = _read_groups(registry, group, args.topic)
    for g in source:
        for line in g.notes:
            note(line)
        if not g.offsets:
            note(f"group {g.name!r} has no offsets in ZooKeeper: nothing to import")
    source = [g for g in source if g.offsets]
    if not source:
        note(f"nothing to import: no ZooKeeper-era group with offsets under {args.from_zookeeper}")
        return 0
    _refuse_live_in_zookeeper(source, args.ignore_live_consumers)
    for g in source:
        refuse_if_active(client, g.name, "import offsets into")
    plans = [GroupPlan(g.name, [Row(tp, offset) for tp, offset in sorted(g.offsets.items())]) for g in source]
    gaps = _catalog_gaps(client, plans)
    blocked = _apply_missing_policy(plans, gaps, args.missing_topics, args.execute)
    for plan in plans:
        current = client.committed_offsets(plan.group)
        for row in plan.rows:
            row.current = current[row.tp].offset if row.tp in current else None
    if args.execute and not blocked:
        if args.missing_topics == "create":
            create_missing(client, gaps)
        for plan in plans:
            _commit_group(client, plan)
    _print_plan(args, plans, executed=args.execute and not blocked)
    if blocked:
        note(
            "topics or partitions missing in the target cluster: "
            + ", ".join(_gap_text(g) for g in gaps)
            + ". Create them, or pass --missing-topics create (creates them) or --missing-topics skip."
        )
        return 1
    if not args.execute:
        note("Dry run: nothing was changed. Run again with --execute to commit these offsets.")
    return 1 if any(p.failed for p in plans) else 0


def _read_groups(registry: ZkRegistry, group: str | None, topics: list[str] | None) -> list[ZkGroup]:
    names = [group] if group is not None else registry.group_names()
    if group is not None:
        registry.check_root()
    return [registry.read_group(name, topics) for name in names]


def _refuse_live_in_zookeeper(groups: list[ZkGroup], ignore: bool) -> None:
    live = [g for g in groups if g.live_instances]
    if not live:
        return
    if ignore:
        for g in live:
            note(
                f"group {g.name!r}: ignoring {len(g.live_instances)} live consumer(s) registered in ZooKeeper"
            )
        return
    described = "; ".join(
        f"{g.name!r}: " + ", ".join(f"{i.consumer_id} (host {i.host or 'unknown'})" for i in g.live_instances)
        for g in live
    )
    raise KafkaError(
        ErrorCode.NON_EMPTY_GROUP,
        f"consumers are still registered in ZooKeeper for {described}. Moving offsets under running "
        "consumers loses data: stop them first, or pass --ignore-live-consumers",
        explain=False,
    )


def _catalog_gaps(client: AdminClient, plans: list[GroupPlan]) -> list[TopicGap]:
    return catalog_gaps(client, (row.tp for plan in plans for row in plan.rows))


def _apply_missing_policy(plans: list[GroupPlan], gaps: list[TopicGap], policy: str, execute: bool) -> bool:
    """Mark the rows the gaps touch; True when the policy says the import cannot go on."""
    by_topic = {g.topic: g for g in gaps}
    touched = False
    for plan in plans:
        for row in plan.rows:
            gap = by_topic.get(row.tp.topic)
            if gap is None or row.tp.partition < gap.have:
                continue
            touched = True
            what = "topic" if gap.have == 0 else "partition"
            if policy == "skip":
                row.status, row.skipped = f"skipped: no such {what}", True
            elif policy == "create":
                row.status = f"planned (creates the {what})"
            else:
                row.status = f"no such {what}"
    return touched and policy == "fail"


def _gap_text(gap: TopicGap) -> str:
    return gap.text()


def _commit_group(client: AdminClient, plan: GroupPlan) -> None:
    rows = [r for r in plan.rows if not r.skipped]
    if not rows:
        return
    errors = client.commit_offsets(plan.group, {r.tp: Committed(r.new) for r in rows})
    failed = {tp: code for tp, code in errors.items() if code != ErrorCode.NONE}
    missing = [r.tp for r in rows if r.tp not in errors]
    if not failed and not missing:
        for r in rows:
            r.status = "committed"
        return
    plan.failed = True
    _restore(client, plan.group, rows)
    for r in rows:
        code = failed.get(r.tp, ErrorCode.UNKNOWN_SERVER_ERROR if r.tp in missing else ErrorCode.NONE)
        r.status = f"rolled back ({error_name(code)})" if code != ErrorCode.NONE else "rolled back"
    note(
        f"group {plan.group!r}: the commit failed for {len(failed) + len(missing)} partition(s); its offsets were put back"
    )


def _restore(client: AdminClient, group: str, rows: list[Row]) -> None:
    previous = {r.tp: Committed(r.current) for r in rows if r.current is not None}
    if previous:
        client.commit_offsets(group, previous)
    fresh = [r.tp for r in rows if r.current is None]
    if fresh:
        client.delete_offsets(group, fresh)


def _print_plan(args: argparse.Namespace, plans: list[GroupPlan], executed: bool) -> None:
    if args.format == "json":
        print_json(
            {
                "source": args.from_zookeeper,
                "executed": executed,
                "groups": [
                    {
                        "group": p.group,
                        "partitions": [
                            {
                                "topic": r.tp.topic,
                                "partition": r.tp.partition,
                                "current_offset": r.current,
                                "new_offset": r.new,
                                "status": r.status,
                            }
                            for r in p.rows
                        ],
                    }
                    for p in plans
                ],
            }
        )
        return
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "STATUS"],
        [[p.group, r.tp.topic, r.tp.partition, r.current, r.new, r.status] for p in plans for r in p.rows],
    )
