"""The write of an admin request (configs, ACLs, credentials, the topic catalog): records whose
answer is one response, sent once they are durable. A failed write fails the entries of that
response that were to succeed, with Kafka's error for a failed admin write
(``errors.admin_write_error``), so that no request maps a storage failure on its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from coordinator.core.context import ReplyTo
from coordinator.core.errors import admin_write_error
from coordinator.core.result import Result
from storage.records import Record


def admin_write(
    reply_to: ReplyTo,
    records: Sequence[Record],
    response: Any,
    *,
    fail_entries: Callable[[int], None],
    apply: Callable[[], None] | None = None,
) -> Result:
    """Write ``records``; once durable run ``apply`` (the change they carry) and send
    ``response``. If the write fails, ``fail_entries(code)`` marks the entries that were to
    succeed with the mapped error code, and the response is sent so marked."""

    def durable(_now_ms: int) -> Result:
        if apply is not None:
            apply()
        return Result(replies=[(reply_to, response)])

    def failed(_now_ms: int, error_code: int) -> Result:
        fail_entries(admin_write_error(error_code))
        return Result(replies=[(reply_to, response)])

    return Result(records=list(records), on_durable=durable, on_failed=failed)
