"""Logging setup: one line per event, as text or JSON."""

from __future__ import annotations

import json
import logging
import sys
import time

# Fields a record may carry (``extra=``) that the JSON format shows at the top level: group
# events set group/member/client; authorization denials principal/operation/resource/host.
STRUCTURED_FIELDS = ("group", "member", "client", "principal", "operation", "resource", "host")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in STRUCTURED_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        event = getattr(record, "group_event", None)
        if event is not None:  # group events (coordinator.core.events) carry their fields
            entry["event"] = event.to_json() if hasattr(event, "to_json") else event
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


VERBATIM = "verbatim"


class TextFormatter(logging.Formatter):
    """One line per event: control characters in the message (a newline in a client-chosen group
    id, say) are escaped, so a client cannot forge log lines. Tracebacks keep their lines, and so
    does a record logged with ``extra={VERBATIM: True}``: text the operator wrote (the effective
    configuration block), never a client's."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second = -1  # the second whose date and time _second_text holds
        self._second_text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """What logging.Formatter writes ("2026-11-27 15:12:14,953"), its date and time formatted
        once per second instead of once per line."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._second = second
            self._second_text = time.strftime(self.default_time_format, self.converter(record.created))
        return f"{self._second_text},{int(record.msecs):03d}"  # logging.Formatter.default_msec_format

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = super().formatMessage(record)
        if message.isprintable() or getattr(record, VERBATIM, False):
            return message  # no control character (the common case: no translate pass)
        return message.translate(_ESCAPES)


# Every C0 control character but tab, and DEL, as a visible escape.
_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(0x20), 0x7F] if code != 0x09} | {
    0x0A: "\\n",
    0x0D: "\\r",
}


def console_line(message: str, fmt: str, level: str = "ERROR") -> str:
    """A line the ``coordinator`` command prints itself (before logging is set up, or instead of
    a traceback): ``coordinator: <message>`` as text, one JSON object when ``fmt`` is json."""
    if fmt != "json":
        return f"coordinator: {message}"
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
    return json.dumps({"ts": stamp, "level": level, "logger": "coordinator", "message": message})


def setup_logging(level: str, fmt: str) -> None:
    # Neither format shows where a line was logged from, nor the thread or process: skip finding
    # them for every record (the stack walk in findCaller and the thread, process and
    # multiprocessing look-ups: ~2 µs of the ~9 µs a group event's line costs,
    # docs/performance.md#group-events-cost).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
