"""Argument parsing shared by the command lines: usage errors come from the command that has them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "kafka-group-coordinator"


def package_version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Like parser.parse_args, but an unknown flag is reported with the usage of the (sub)command
    it was given to (`coordinator serve --bogus` shows serve's usage, not the top level's)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    current = parser
    while True:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, sub.dest, None) if sub is not None else None
        if sub is None or chosen not in sub.choices:
            return current
        current = sub.choices[chosen]
