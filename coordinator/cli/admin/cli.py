"""The `groups` and `offsets` command trees (argparse), and the runner that maps failures to exit codes.

Exit codes: 0 ok, 1 Kafka error (printed as 'ERROR_NAME: ...'; network failures as
NETWORK_EXCEPTION / REQUEST_TIMED_OUT, as Kafka's clients name them), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from coordinator.cli.admin.client import AdminClient
from coordinator.cli.admin.command_config import ENV_PREFIX, load_security
from coordinator.cli.admin.commit_history_cmd import add_commit_history_parser
from coordinator.cli.admin.connection import parse_address
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.group_configs_cmd import groups_configure
from coordinator.cli.admin.group_files import offsets_export_all, offsets_import_groups
from coordinator.cli.admin.groups_cmd import groups_delete, groups_describe, groups_list
from coordinator.cli.admin.history_cmd import add_history_parser
from coordinator.cli.admin.lag_options import add_lag_options
from coordinator.cli.admin.missing_topics import MISSING_POLICIES
from coordinator.cli.admin.move_cmd import (
    check_file_arguments,
    offsets_export_to_kafka,
    offsets_import_from_kafka,
)
from coordinator.cli.admin.offsets_cmd import offsets_delete, offsets_export, offsets_import, offsets_reset
from coordinator.cli.admin.specs import parse_datetime_ms, parse_duration_ms, parse_topic_spec
from coordinator.cli.admin.topics_cmd import (
    parse_config,
    topics_alter,
    topics_create,
    topics_delete,
    topics_describe,
    topics_list,
)
from coordinator.cli.admin.zookeeper import ZooKeeperError, parse_zk_address
from coordinator.cli.admin.zookeeper_cmd import (
    groups_list_from_zookeeper,
    offsets_import_from_zookeeper,
)
from coordinator.cli.parsing import add_version_flag, parse_args

Handler = Callable[[AdminClient, argparse.Namespace], int]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_VARIABLE = "COORDINATOR_ADMIN_BOOTSTRAP"
EXIT_CODES = "exit codes: 0 ok, 1 Kafka error (named, e.g. GROUP_ID_NOT_FOUND), 2 usage"


def run(handler: Handler, args: argparse.Namespace) -> int:
    """Run one command against the bootstrap address; print failures as the exit code says."""
    try:
        security = load_security(args.command_config, os.environ)
        with AdminClient(args.bootstrap, timeout=args.timeout, security=security) as client:
            return handler(client, args)
    except KafkaError as exc:
        print(exc, file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"{args.admin_prog}: error: {exc}", file=sys.stderr)
        return 2
    except ZooKeeperError as exc:
        print(f"{args.admin_prog}: ZooKeeper: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `... | head`: stop quietly, and keep Python's exit flush quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


def _groups_list(client: AdminClient, args: argparse.Namespace) -> int:
    if args.from_zookeeper is None:
        return groups_list(client, args)
    if args.state or args.type:
        raise UsageError("--state and --type filter the cluster's groups, not ZooKeeper's")
    return groups_list_from_zookeeper(args)


def _offsets_import(client: AdminClient, args: argparse.Namespace) -> int:
    if args.groups_file is not None:
        if args.group is not None or args.file is not None or args.from_kafka or args.from_zookeeper:
            raise UsageError("--groups-file names the groups itself: no GROUP, FILE or other source")
        check_file_arguments(args, "--from-kafka or --from-zookeeper", planned=True)
        return offsets_import_groups(client, args)
    if args.from_kafka is not None and args.from_zookeeper is not None:
        raise UsageError("--from-kafka and --from-zookeeper: one source at a time")
    if args.from_kafka is not None:
        return offsets_import_from_kafka(client, args)
    if args.from_zookeeper is not None:
        return offsets_import_from_zookeeper(client, args)
    return offsets_import(client, args)


def _typed(parse: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """An argparse type whose ValueError message reaches the user as it is."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name
    return convert


def _address(text: str) -> str:
    parse_address(text)
    return text


def _zk_address(text: str) -> str:
    parse_zk_address(text)
    return text


def _non_negative(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"expected a non-negative integer, got {text!r}")
    return int(text)


# Kafka's ConsumerGroupState and GroupType names; kafka-consumer-groups.sh accepts any case.
GROUP_STATES = (
    "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling",
)  # fmt: skip
GROUP_TYPES = ("classic", "consumer", "share", "streams")


def _canonical(known: Sequence[str], what: str) -> Callable[[str], str]:
    """Comma-separated names in any case -> Kafka's spelling; an unknown name is a usage error."""
    by_lower = {name.lower(): name for name in known}

    def convert(text: str) -> str:
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = [name for name in names if name.lower() not in by_lower]
        if unknown or not names:
            raise ValueError(
                f"unknown group {what} {', '.join(map(repr, unknown or [text]))} (one of: {', '.join(known)})"
            )
        return ",".join(by_lower[name.lower()] for name in names)

    return convert


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"expected a positive number of seconds, got {text!r}")
    return value


def _offsets_export(client: AdminClient, args: argparse.Namespace) -> int:
    if args.to_kafka is not None:
        args.format = args.format or "table"
        if args.format == "csv":
            raise UsageError("--to-kafka prints the plan as a table or JSON, not CSV")
        return offsets_export_to_kafka(client, args)
    if args.all_groups and args.group is None and args.group_option is None:
        # kafka-consumer-groups --export --all-groups: group,topic,partition,offset
        args.all_groups = False
        check_file_arguments(args, "--to-kafka")
        if args.with_metadata:
            raise UsageError(
                "--with-metadata goes with one GROUP (the several-groups file has no metadata column)"
            )
        args.format = args.format or "csv"
        if args.format == "table":
            raise UsageError("--format table goes with --to-kafka; the export prints CSV or JSON")
        return offsets_export_all(client, args)
    check_file_arguments(args, "--to-kafka")
    if args.group is None:
        raise UsageError("GROUP is required (or --to-kafka BOOTSTRAP with --group/--all-groups)")
    args.format = args.format or "csv"
    if args.format == "table":
        raise UsageError("--format table goes with --to-kafka; the export prints CSV or JSON")
    return offsets_export(client, args)


def _group_selection(parser: argparse.ArgumentParser, source: str) -> None:
    """Which groups and topics a move between clusters takes, and whether it commits."""
    moving = parser.add_argument_group("moving groups (with --from-kafka, --to-kafka, --from-zookeeper)")
    which = moving.add_mutually_exclusive_group()
    which.add_argument("--group", dest="group_option", metavar="G", help="the group to move")
    which.add_argument("--all-groups", action="store_true", help=f"every group of {source}")
    moving.add_argument("--topic", action="append", metavar="T", help="only this topic (repeatable)")
    mode = moving.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the planned offsets")


def _connection_options(
    output: Sequence[str] = ("table", "json"), format_default: str | None = ""
) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        default=os.environ.get(BOOTSTRAP_VARIABLE) or DEFAULT_BOOTSTRAP,
        type=_typed(_address, "address"),
        help=f"any broker of the cluster (default ${BOOTSTRAP_VARIABLE}, else {DEFAULT_BOOTSTRAP})",
    )
    common.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.* "
        f"(default ${ENV_PREFIX}COMMAND_CONFIG; ${ENV_PREFIX}USERNAME, ${ENV_PREFIX}PASSWORD[_FILE], ... "
        "override it)",
    )
    common.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_typed(_seconds, "seconds"),
        default=10.0,
        help="per-request timeout, also how long to wait for a coordinator (default 10)",
    )
    if format_default == "":
        common.add_argument(
            "--format", choices=list(output), default=output[0], help=f"output format (default {output[0]})"
        )
    else:
        common.add_argument("--format", choices=list(output), default=None, help=format_default)
    return common


def _leaf(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Handler,
    help_text: str,
    output: Sequence[str] = ("table", "json"),
    format_default: str | None = "",
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=EXIT_CODES,
        parents=[_connection_options(output, format_default)],
    )
    parser.set_defaults(func=lambda args: run(handler, args), admin_prog=parser.prog)
    return parser


def add_groups_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """`groups list|describe|delete` (the verbs of kafka-consumer-groups.sh and `rpk group`)."""
    groups: argparse.ArgumentParser = subparsers.add_parser(
        "groups", help="list, describe and delete consumer groups", description="Consumer groups."
    )
    verbs = groups.add_subparsers(dest="verb", required=True, metavar="VERB")

    listing = _leaf(verbs, "list", _groups_list, "list the groups of every broker")
    listing.add_argument(
        "--state",
        action="append",
        metavar="S",
        type=_typed(_canonical(GROUP_STATES, "state"), "state"),
        help=f"only groups in state S, any case ({', '.join(GROUP_STATES)}; repeatable or comma-separated)",
    )
    listing.add_argument(
        "--type",
        action="append",
        metavar="T",
        type=_typed(_canonical(GROUP_TYPES, "type"), "type"),
        help=f"only groups of type T, any case ({', '.join(GROUP_TYPES)}; repeatable or comma-separated)",
    )
    listing.add_argument(
        "--from-zookeeper",
        metavar="HOST:PORT[,HOST:PORT][/chroot]",
        type=_typed(_zk_address, "zookeeper"),
        help="list the ZooKeeper-era (pre-0.9) consumer groups registered there instead: their "
        "instances, owned partitions and offsets",
    )

    describe = _leaf(
        verbs,
        "describe",
        groups_describe,
        "describe classic and consumer (KIP-848) groups: offsets and lag (default), members, state",
    )
    describe.add_argument("groups", nargs="*", metavar="GROUP")
    describe.add_argument("--all-groups", action="store_true", help="every group of the cluster")
    describe.add_argument(
        "--members",
        action="store_true",
        help="members: client id, host, instance id, assigned partitions (consumer groups: also member "
        "epoch, subscription and target assignment)",
    )
    describe.add_argument(
        "--offsets",
        action="store_true",
        help="committed offset, log-end offset and lag per partition (default)",
    )
    describe.add_argument(
        "--state",
        action="store_true",
        help="coordinator, assignment strategy, state, #members (consumer groups: also type, group "
        "epoch and assignment epoch)",
    )

    add_lag_options(describe)
    describe.add_argument(
        "--configs",
        action="store_true",
        help="the group configs (consumer.session.timeout.ms, consumer.heartbeat.interval.ms): value "
        "and source (DYNAMIC_GROUP_CONFIG when set for the group, else the broker setting's: "
        "STATIC_BROKER_CONFIG or DEFAULT_CONFIG)",
    )

    configure = _leaf(
        verbs,
        "configure",
        groups_configure,
        "set or delete a group's configs (IncrementalAlterConfigs on the GROUP resource, as "
        "kafka-configs.sh --entity-type groups), then print them",
    )
    configure.add_argument("group", metavar="GROUP")
    configure.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="set a config, e.g. consumer.session.timeout.ms=50000 (repeatable)",
    )
    configure.add_argument(
        "--delete", action="append", metavar="NAME", help="back to the broker's default (repeatable)"
    )

    delete = _leaf(verbs, "delete", groups_delete, "delete groups (they must have no members)")
    delete.add_argument("groups", nargs="*", metavar="GROUP")
    delete.add_argument(
        "--all-groups", action="store_true", help="every group of the cluster (those with members fail)"
    )
    add_history_parser(verbs)
    return groups


def add_offsets_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """`offsets reset|delete|export|import`."""
    offsets: argparse.ArgumentParser = subparsers.add_parser(
        "offsets", help="reset, delete, export and import committed offsets", description="Committed offsets."
    )
    verbs = offsets.add_subparsers(dest="verb", required=True, metavar="VERB")
    topic_spec = _typed(parse_topic_spec, "topic")

    reset = _leaf(verbs, "reset", offsets_reset, "plan or execute an offset reset of an inactive group")
    reset.add_argument("group", metavar="GROUP", nargs="?")
    reset.add_argument(
        "--all-groups",
        action="store_true",
        help="every group of the cluster (groups with members are skipped)",
    )
    scope = reset.add_mutually_exclusive_group()
    scope.add_argument(
        "--topic",
        action="append",
        type=topic_spec,
        metavar="T[:P,P...]",
        help="topic, optionally partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has an offset for"
    )
    method = reset.add_mutually_exclusive_group(required=True)
    method.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    method.add_argument("--to-latest", action="store_true", help="the log-end offset of each partition")
    method.add_argument("--to-offset", type=_typed(_non_negative, "offset"), metavar="N", help="offset N")
    method.add_argument(
        "--shift-by", type=int, metavar="N", help="the committed offset plus N (N may be negative)"
    )
    method.add_argument(
        "--to-current",
        action="store_true",
        help="the committed offset (partitions without one: the log-end offset, on a broker with records)",
    )
    method.add_argument(
        "--to-group",
        metavar="OTHER",
        help="the committed offsets of group OTHER (rpk's `group seek --to-group`; with --all-topics "
        "every partition OTHER has an offset for)",
    )
    method.add_argument(
        "--to-datetime",
        type=_typed(parse_datetime_ms, "datetime"),
        metavar="ISO",
        help="first offset at or after an ISO 8601 time (local time unless it names a zone)",
    )
    method.add_argument(
        "--by-duration",
        type=_typed(parse_duration_ms, "duration"),
        metavar="PnDTnHnM",
        help="first offset at or after now minus an ISO 8601 duration",
    )
    method.add_argument(
        "--from-file",
        metavar="CSV",
        help="offsets from a topic,partition,offset file (as `offsets export` writes)",
    )
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the planned offsets")
    reset.add_argument(
        "--no-clamp",
        action="store_true",
        help="do not pull offsets into the log's [earliest, latest] range (never done on a broker that "
        "holds no records, such as a standalone coordinator)",
    )

    delete = _leaf(verbs, "delete", offsets_delete, "delete committed offsets (OffsetDelete)")
    delete.add_argument("group", metavar="GROUP", nargs="?")
    delete.add_argument(
        "--all-groups", action="store_true", help="every group that has offsets of the topics"
    )
    delete.add_argument(
        "--topic",
        action="append",
        required=True,
        type=topic_spec,
        metavar="T[:P,P...]",
        help="topic, optionally partitions; without them every partition the group has an offset for (repeatable)",
    )

    export = _leaf(
        verbs,
        "export",
        _offsets_export,
        "print committed offsets as topic,partition,offset CSV, or copy them to another cluster",
        ("csv", "table", "json"),
        format_default="output format: csv (default) or json; with --to-kafka table (default) or json",
    )
    export.add_argument("group", nargs="?", metavar="GROUP")
    export.add_argument(
        "--with-metadata", action="store_true", help="add a fourth column: the commit metadata"
    )
    export.add_argument(
        "--to-kafka",
        metavar="BOOTSTRAP",
        type=_typed(_address, "address"),
        help="copy the committed offsets to that cluster's group coordinator, for a rollback "
        "(a dry run unless --execute)",
    )
    _group_selection(export, "this cluster")

    imports = _leaf(
        verbs,
        "import",
        _offsets_import,
        "plan, then commit with --execute, offsets from a CSV file, another cluster or ZooKeeper-era "
        "consumers into inactive groups",
    )
    imports.add_argument("group", metavar="GROUP", nargs="?")
    imports.add_argument(
        "file", metavar="FILE", nargs="?", help="topic,partition,offset[,metadata] CSV ('-' for stdin)"
    )
    imports.add_argument(
        "--groups-file",
        metavar="CSV",
        help="several groups from a group,topic,partition,offset file (as `offsets export --all-groups` "
        "and kafka-consumer-groups.sh write it; '-' for stdin); each group on its own",
    )
    imports.add_argument(
        "--from-kafka",
        metavar="BOOTSTRAP",
        type=_typed(_address, "address"),
        help="copy the committed offsets from that cluster's group coordinator (a dry run unless --execute)",
    )
    imports.add_argument(
        "--from-zookeeper",
        metavar="HOST:PORT[,HOST:PORT][/chroot]",
        type=_typed(_zk_address, "zookeeper"),
        help="read /consumers/<group>/offsets there (a dry run unless --execute)",
    )
    _group_selection(imports, "the source")
    zookeeper = imports.add_argument_group("from ZooKeeper (consumers of Kafka before 0.9)")
    zookeeper.add_argument(
        "--ignore-live-consumers",
        action="store_true",
        help="import although consumers are still registered under /consumers/<group>/ids",
    )
    imports.add_argument(
        "--missing-topics",
        choices=MISSING_POLICIES,
        default="fail",
        help="file and ZooKeeper imports: offsets of topics or partitions the cluster lacks fail the "
        "import (default, nothing is committed), are skipped, or the topics and partitions are created",
    )
    add_commit_history_parser(verbs)
    return offsets


def add_topics_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """`topics list|describe|create|alter|delete` (kafka-topics.sh's verbs) over the Kafka protocol."""
    topics: argparse.ArgumentParser = subparsers.add_parser(
        "topics", help="list, describe, create, alter and delete topics", description="Topics."
    )
    verbs = topics.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = _leaf(verbs, "list", topics_list, "list the cluster's topics (Metadata)")
    listing.add_argument("--internal", action="store_true", help="also internal topics (__consumer_offsets)")
    describe = _leaf(verbs, "describe", topics_describe, "partitions, leaders, replicas and ISR of topics")
    describe.add_argument("topics", nargs="*", metavar="TOPIC")
    describe.add_argument("--all-topics", action="store_true", help="every topic of the cluster")
    create = _leaf(verbs, "create", topics_create, "create topics (CreateTopics)")
    create.add_argument("topics", nargs="+", metavar="TOPIC")
    create.add_argument("--partitions", type=int, metavar="N", help="partitions (default: the broker's)")
    create.add_argument(
        "--replication-factor", type=int, metavar="R", help="replicas per partition (default: the broker's)"
    )
    create.add_argument(
        "--config", action="append", type=_typed(parse_config, "config"), metavar="NAME=VALUE",
        help="a topic config, e.g. cleanup.policy=compact (repeatable)",
    )  # fmt: skip
    create.add_argument("--if-not-exists", action="store_true", help="a topic that exists is not an error")
    alter = _leaf(verbs, "alter", topics_alter, "raise the number of partitions (CreatePartitions)")
    alter.add_argument("topics", nargs="+", metavar="TOPIC")
    alter.add_argument("--partitions", type=int, required=True, metavar="N", help="the new partition count")
    delete = _leaf(verbs, "delete", topics_delete, "delete topics (DeleteTopics)")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument(
        "--if-exists", action="store_true", help="a topic that does not exist is not an error"
    )
    return topics


def build_parser(prog: str = "coordinator") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Kafka consumer-group administration.")
    add_version_flag(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_groups_parser(sub)
    add_offsets_parser(sub)
    add_topics_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "coordinator") -> int:
    args = parse_args(build_parser(prog), argv)
    result: int = args.func(args)
    return result
