"""Log lines: authorization denials (Kafka's authorizer logger, rate-limited), structured JSON
fields of group events and denials, and the level of members the coordinator expires."""

from __future__ import annotations

import io
import json
import logging

import pytest

from coordinator.core.clock import ShardClock
from coordinator.core.events import MEMBER_JOINED, SESSION_TIMEOUT, GroupEvents
from coordinator.security.acl import Operation, ResourceType
from coordinator.server.denials import DenialLog
from coordinator.server.logs import JsonFormatter, TextFormatter, console_line, setup_logging


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _denials(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "coordinator.authorizer"]


def test_a_denial_is_one_kafka_style_line_with_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "coordinator.authorizer")
    DenialLog().denied("User:bob", "10.0.0.7", Operation.READ, ResourceType.GROUP, "billing")
    (record,) = _denials(caplog)
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        "Principal = User:bob is Denied Operation = Read from host = 10.0.0.7 on resource = Group:LITERAL:billing"
    )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["logger"] == "coordinator.authorizer"
    assert (entry["principal"], entry["operation"], entry["resource"], entry["host"]) == (
        "User:bob", "Read", "Group:LITERAL:billing", "10.0.0.7",
    )  # fmt: skip


def test_denials_are_rate_limited_per_principal_and_resource(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "coordinator.authorizer")
    clock = FakeClock()
    denials = DenialLog(window_s=60, clock=clock)
    for _ in range(50):
        denials.denied("User:bob", "h", Operation.READ, ResourceType.GROUP, "g")
    denials.denied("User:bob", "h", Operation.READ, ResourceType.TOPIC, "t")  # another resource
    denials.denied("User:eve", "h", Operation.READ, ResourceType.GROUP, "g")  # another principal
    assert len(_denials(caplog)) == 3
    clock.now += 59
    denials.denied("User:bob", "h", Operation.DESCRIBE, ResourceType.GROUP, "g")
    assert len(_denials(caplog)) == 3
    clock.now += 1
    denials.denied("User:bob", "h", Operation.READ, ResourceType.GROUP, "g")
    lines = [r.getMessage() for r in _denials(caplog)]
    assert len(lines) == 4
    assert lines[-1].endswith("(50 more denials of this principal on this resource not logged)")


def test_the_rate_limiter_remembers_a_bounded_number_of_pairs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "coordinator.authorizer")
    denials = DenialLog(max_keys=10, clock=FakeClock())
    for n in range(1000):
        denials.denied("User:bob", "h", Operation.READ, ResourceType.GROUP, f"g{n}")
    assert len(denials._windows) == 10
    denials.denied("User:bob", "h", Operation.READ, ResourceType.GROUP, "g0")  # forgotten: logged again
    assert len(_denials(caplog)) == 1001


def test_group_events_carry_group_member_and_client_and_expiry_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    events = GroupEvents(ShardClock())
    events.record("g", MEMBER_JOINED, "classic", "PreparingRebalance", 0, "member m1 joined", "m1",
                  client_id="app-1", client_host="/127.0.0.1", instance_id=None)  # fmt: skip
    events.record(
        "g", SESSION_TIMEOUT, "classic", "PreparingRebalance", 1, "session timeout of member m1", "m1"
    )
    joined, expired = caplog.records[-2:]
    assert joined.levelno == logging.INFO and expired.levelno == logging.WARNING
    entry = json.loads(JsonFormatter().format(joined))
    assert (entry["group"], entry["member"], entry["client"]) == ("g", "m1", "app-1")
    assert entry["event"]["kind"] == MEMBER_JOINED
    entry = json.loads(JsonFormatter().format(expired))
    assert entry["level"] == "WARNING" and entry["group"] == "g" and "client" not in entry


def test_console_lines_follow_the_log_format() -> None:
    assert console_line("cannot start: boom", "text") == "coordinator: cannot start: boom"
    entry = json.loads(console_line("cannot start: boom", "json"))
    assert (entry["level"], entry["logger"], entry["message"]) == (
        "ERROR",
        "coordinator",
        "cannot start: boom",
    )


def test_text_lines_keep_the_standard_time_stamp_across_seconds() -> None:
    """The date and time are formatted once per second: every line still reads as logging's own
    formatter writes it, milliseconds included, and a new second gets a new stamp."""
    ours = TextFormatter()
    stock = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for created in (1_764_256_334.953, 1_764_256_334.001, 1_764_256_335.999, 1_764_256_400.5):
        record = logging.LogRecord("coordinator", logging.INFO, __file__, 1, "group %s", ("g",), None)
        record.created, record.msecs = created, float(int(created * 1000) % 1000)
        assert ours.format(record) == stock.format(record)


def test_setup_logging_never_looks_for_the_caller_or_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither format shows them, and finding them costs every group event's line ~2 µs."""
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, name, getattr(logging, name))  # restored afterwards
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)

    def no_stack_walk(*_: object, **__: object) -> None:
        raise AssertionError("findCaller called")

    monkeypatch.setattr(logging.Logger, "findCaller", no_stack_walk)
    setup_logging("info", "text")
    stream = io.StringIO()
    monkeypatch.setattr(root.handlers[0], "stream", stream)
    events = GroupEvents(ShardClock())
    events.record("g", MEMBER_JOINED, "classic", "Empty", 0, "member m joined", "m")
    (line,) = stream.getvalue().splitlines()
    assert line.endswith(" INFO coordinator.core.classic_group_manager: group g: member m joined")
    record = logging.getLogger("x").makeRecord("x", logging.INFO, "(unknown file)", 0, "m", (), None)
    assert record.thread is None and record.process is None
