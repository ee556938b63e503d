"""Command line: `coordinator serve ...`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from coordinator.cli.acls import add_acls_parser
from coordinator.cli.admin.cli import add_groups_parser, add_offsets_parser
from coordinator.cli.users import add_users_parser
from coordinator.server.config import KAFKA_NAMED, Config, ConfigError, kafka_name, load_config
from storage.base import StoreError


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the coordinator",
        description="Run the group coordinator. Settings come from defaults, then --config FILE (TOML), "
        "then COORDINATOR_* environment variables, then these flags.",
    )
    defaults = Config()
    serve.add_argument("--host", help=f"listen address (default {defaults.host})")
    serve.add_argument("--port", type=int, help=f"listen port (default {defaults.port})")
    serve.add_argument("--advertised-host", help="host announced to clients (default: the listen address)")
    serve.add_argument(
        "--advertised-port", type=int, help="port announced to clients (default: the listen port)"
    )
    serve.add_argument("--node-id", type=int, help=f"node id (default {defaults.node_id})")
    serve.add_argument("--cluster-id", help=f"cluster id (default {defaults.cluster_id})")
    serve.add_argument(
        "--storage",
        help="sqlite:///path.db (default sqlite:///coordinator.db), postgresql://user:pw@host:port/db or memory://",
    )
    serve.add_argument("--sqlite-synchronous", help="FULL (survives power loss; default) or NORMAL")
    serve.add_argument("--config", dest="config_file", metavar="FILE", help="TOML file with settings")
    serve.add_argument("--metrics-host", help="address of the metrics endpoint (default 127.0.0.1)")
    serve.add_argument(
        "--metrics-port", type=int, help="port of /metrics, /healthz and /readyz (default 0 = off)"
    )
    serve.add_argument(
        "--group-consumer-heartbeat-policy",
        metavar="POLICY",
        help="KIP-848 heartbeat intervals: handover (default: shorter during hand-overs, jittered), "
        "unreleased (shorter only for members waiting for partitions) or kafka (always the configured one)",
    )
    serve.add_argument("--log-level", help="DEBUG, INFO (default), WARNING, ERROR")
    serve.add_argument("--log-format", choices=["text", "json"], help="log line format (default text)")
    kafka = serve.add_argument_group("Kafka settings", "Apache Kafka's names with dots turned into dashes")
    for name in sorted(KAFKA_NAMED):
        default = getattr(defaults, name)
        flag = "--" + kafka_name(name).replace(".", "-")
        if isinstance(default, bool):
            kafka.add_argument(
                flag,
                dest=name,
                metavar="true|false",
                help=f"{kafka_name(name)} (default {str(default).lower()})",
            )
        elif isinstance(default, str):
            kafka.add_argument(
                flag, dest=name, metavar="VALUE", help=f"{kafka_name(name)} (default {default!r})"
            )
        else:
            kafka.add_argument(
                flag, dest=name, type=int, metavar="N", help=f"{kafka_name(name)} (default {default})"
            )


def _loadtest_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from loadtest.cli import DESCRIPTION, add_arguments

    parser = sub.add_parser(
        "loadtest", help="load a server with simulated group members (PySpark)", description=DESCRIPTION
    )
    add_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coordinator", description="A standalone Kafka group coordinator.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve_parser(sub)
    _loadtest_parser(sub)
    add_groups_parser(sub)
    add_offsets_parser(sub)
    add_users_parser(sub)
    add_acls_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "loadtest":
        from loadtest.cli import run as run_loadtest

        return run_loadtest(args)
    if args.command in ("groups", "offsets", "users", "acls"):
        result: int = args.func(args)
        return result
    parser.error(f"unknown command {args.command}")
    return 2


def run_loop(main_coroutine: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop when it is installed (Linux), else on the default asyncio loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main_coroutine)
    else:
        uvloop.run(main_coroutine)


def _serve(args: argparse.Namespace) -> int:
    options = {k: v for k, v in vars(args).items() if k not in ("command", "config_file")}
    try:
        config = load_config(cli=options, config_file=args.config_file)
    except ConfigError as exc:
        print(f"coordinator: {exc}", file=sys.stderr)
        return 2
    from coordinator.server.app import serve
    from coordinator.server.logs import setup_logging

    setup_logging(config.log_level, config.log_format)
    try:
        run_loop(serve(config))
    except (OSError, ValueError, StoreError) as exc:
        # Port in use, a bad storage URL or option, storage unreachable at start: one readable line.
        print(f"coordinator: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
