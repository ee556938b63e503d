"""Usage errors of `coordinator`: rc 2, the usage of the command that was given, short lines."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from coordinator.cli.main import main
from coordinator.cli.parsing import package_version
from tests.admin.support import cli


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def test_an_unknown_log_level_is_a_usage_error() -> None:
    code, _out, err = run("serve", "--storage", "memory://", "--log-level", "bogus")
    assert (code, err) == (
        2,
        "coordinator: log-level must be DEBUG or INFO or WARNING or ERROR or CRITICAL\n",
    )


def test_an_unknown_serve_flag_shows_serves_usage() -> None:
    code, _out, err = run("serve", "--bogus-flag")
    assert code == 2
    assert err.startswith("usage: coordinator serve ")
    assert err.rstrip().endswith("coordinator serve: error: unrecognized arguments: --bogus-flag")


def test_a_bad_integer_is_a_few_lines() -> None:
    code, _out, err = run("serve", "--group-max-size", "many")
    assert code == 2
    assert len(err.splitlines()) <= 3, err
    assert "invalid value 'many' for group.max.size" in err


def test_unknown_admin_flag_shows_the_verbs_usage() -> None:
    code, _out, err = run("groups", "list", "--bogus")
    assert code == 2
    assert err.startswith("usage: coordinator groups list ")
    assert "coordinator groups list: error: unrecognized arguments: --bogus" in err


def test_version() -> None:
    code, out, _err = run("--version")
    assert (code, out) == (0, f"coordinator {package_version()}\n")
    assert package_version()[0].isdigit()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--state", "Bogus"], "unknown group state 'Bogus' (one of: PreparingRebalance"),
        (["--state", "stable,nope"], "unknown group state 'nope'"),
        (["--type", "modern"], "unknown group type 'modern' (one of: classic, consumer, share, streams)"),
    ],
)
def test_unknown_group_states_and_types_are_refused(given: list[str], message: str) -> None:
    code, _out, err = run("groups", "list", *given)
    assert code == 2 and message in err


def test_group_states_and_types_are_taken_in_any_case() -> None:
    from coordinator.cli.main import build_parser

    args = build_parser().parse_args(["groups", "list", "--state", "stable", "--state", "EMPTY,preparingrebalance",
                                      "--type", "CLASSIC"])  # fmt: skip
    assert args.state == ["Stable", "Empty,PreparingRebalance"]
    assert args.type == ["classic"]


@contextlib.contextmanager
def listener(answer: bytes | None) -> Iterator[str]:
    """A loopback port that reads what it gets and answers `answer` (or nothing at all)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(conn)
            conn.recv(4096)
            if answer is not None:
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in accepted:
            conn.close()
        server.close()


def test_a_web_server_is_named_as_such() -> None:
    with listener(b"HTTP/1.1 400 Bad Request\r\n\r\n") as address:
        result = cli(address, "groups", "list")
    assert result.code == 1
    assert (
        result.err.strip()
        == f"CORRUPT_MESSAGE: {address} answered in HTTP: it is a web server (a metrics port?), not a Kafka listener"
    )


def test_a_silent_port_is_not_waited_for_the_whole_timeout() -> None:
    with listener(None) as address:
        started = time.monotonic()
        result = cli(address, "groups", "list", "--timeout", "30")
        elapsed = time.monotonic() - started
    assert result.code == 1
    assert "did not answer ApiVersions within 5 s: it does not look like a Kafka listener" in result.err
    assert elapsed < 10
