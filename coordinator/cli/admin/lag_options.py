"""The lag options of `groups describe`: lag per topic, and lag in seconds from the HTTP API."""

from __future__ import annotations

import argparse

from coordinator.cli.admin.connection import parse_address
from coordinator.cli.admin.http_api import HTTP_ENV, configured_http


def _http_address(text: str) -> str:
    try:
        parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_lag_options(describe: argparse.ArgumentParser) -> None:
    describe.add_argument(
        "--lag-per-topic",
        action="store_true",
        help="also the lag summed per topic, as rpk's --print-lag-per-topic ('-' when a partition's lag "
        "is unknown)",
    )
    describe.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=_http_address,
        default=configured_http(),
        help="the coordinator's HTTP (metrics) port: adds LAG-SECONDS and the lag STATUS (OK, WARNING, "
        f"STALL, STOP, ERR) from its lag sampler to the offsets (default ${HTTP_ENV}, else not asked)",
    )
