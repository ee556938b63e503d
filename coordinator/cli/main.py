"""Command line: `coordinator serve ...`."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from coordinator.cli.acls import add_acls_parser
from coordinator.cli.admin.cli import add_groups_parser, add_offsets_parser, add_topics_parser
from coordinator.cli.parsing import add_version_flag, parse_args
from coordinator.cli.users import add_users_parser
from coordinator.server.config import SETTINGS, ConfigError, load_config
from storage.base import StoreError

PASSWORD_FILE_VARIABLE = "COORDINATOR_SSL_KEYFILE_PASSWORD_FILE"


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        # The generated usage lists every Kafka setting (40 lines); errors print this instead.
        usage="%(prog)s [--host H] [--port P] [--storage URL] [--config FILE] [--log-level LEVEL]\n"
        "       [--<kafka-setting-with-dashes> VALUE ...]   (--help lists them all)",
        help="run the coordinator",
        description="Run the group coordinator. Settings come from defaults, then --config FILE (TOML), "
        "then COORDINATOR_* environment variables, then these flags.",
    )
    serve.add_argument("--config", dest="config_file", metavar="FILE", help="TOML file with settings")
    serve.add_argument(
        "--ssl-keyfile-password-file",
        metavar="FILE",
        help=f"a file holding ssl.keyfile.password (also ${PASSWORD_FILE_VARIABLE}); keeps it out of `ps`",
    )
    serve.add_argument(
        "--init",
        action="store_true",
        default=None,  # not a setting: unset flags stay None like the settings' flags
        help="start even on a database without its cluster id (emptied or replaced) or with another "
        "cluster's id, and (re)write the id: see docs/hardening.md",
    )
    serve.add_argument(
        "--allow-mode-change",
        action="store_true",
        default=None,  # not a setting: a one-off confirmation, like --init
        help="serve a database recorded as served in another mode (standalone, or a gateway in front "
        "of another upstream) and record the new mode: see docs/gateway.md",
    )
    kafka = serve.add_argument_group("Kafka settings", "Apache Kafka's names with dots turned into dashes")
    for setting in SETTINGS:
        group = kafka if setting.info.kafka else serve
        default = setting.shown_default or "empty"
        # Values stay text here: load_config converts and checks them like those of a file.
        metavar = {"bool": "true|false", "int": "N"}.get(setting.annotation.split(" ")[0], "VALUE")
        group.add_argument(
            setting.flag, dest=setting.name, metavar=metavar, help=f"{setting.info.doc} (default {default})"
        )


def _loadtest_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from loadtest.cli import DESCRIPTION, add_arguments

    parser = sub.add_parser(
        "loadtest", help="load a server with simulated group members (PySpark)", description=DESCRIPTION
    )
    add_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="coordinator", description="A standalone Kafka group coordinator.")
    add_version_flag(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _serve_parser(sub)
    _loadtest_parser(sub)
    add_groups_parser(sub)
    add_offsets_parser(sub)
    add_topics_parser(sub)
    add_users_parser(sub)
    add_acls_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "loadtest":
        from loadtest.cli import run as run_loadtest

        return run_loadtest(args)
    if args.command in ("groups", "offsets", "topics", "users", "acls"):
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
    options = {
        k: v
        for k, v in vars(args).items()
        if k not in ("command", "config_file", "ssl_keyfile_password_file", "init", "allow_mode_change")
    }
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_FILE_VARIABLE}
    from coordinator.server.logs import console_line

    # Until the settings are loaded, the format asked for on the command line or in the environment.
    log_format = str(options.get("log_format") or env.get("COORDINATOR_LOG_FORMAT") or "text")
    try:
        if options.get("ssl_keyfile_password") is not None:
            warning = (
                "warning: --ssl-keyfile-password is visible to other users in `ps`; use "
                f"--ssl-keyfile-password-file, ${PASSWORD_FILE_VARIABLE} or $COORDINATOR_SSL_KEYFILE_PASSWORD"
            )
            print(console_line(warning, log_format, "WARNING"), file=sys.stderr)
        password_file = args.ssl_keyfile_password_file or os.environ.get(PASSWORD_FILE_VARIABLE)
        if password_file:
            options["ssl_keyfile_password"] = _read_secret(password_file)
        config = load_config(cli=options, env=env, config_file=args.config_file)
        from coordinator.server.http_auth import http_guard

        http_guard(config)  # the console token file is read at start: a bad one stops here
    except ConfigError as exc:
        print(console_line(str(exc), log_format), file=sys.stderr)
        return 2
    from coordinator.server.app import serve
    from coordinator.server.logs import setup_logging

    setup_logging(config.log_level, config.log_format)
    try:
        run_loop(serve(config, init=bool(args.init), allow_mode_change=bool(args.allow_mode_change)))
    except (OSError, ValueError, StoreError) as exc:
        # Port in use, a bad storage URL or option, storage unreachable at start: one readable line.
        print(console_line(f"cannot start: {exc}", config.log_format), file=sys.stderr)
        return 1
    return 0


def _read_secret(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(
            f"cannot read the ssl.keyfile.password file {path}: {exc.strerror or exc}"
        ) from None


if __name__ == "__main__":
    raise SystemExit(main())
