"""What one operation of the core produced, and how it becomes a Result.

Handlers do not build a Result directly: they add replies, records and their continuations to
an :class:`Effects`, and the shard turns it into one Result with :func:`to_result`. The model
is Kafka's replay of its log, applied once durable (see docs/commit-path.md):

* ``on_durable`` hooks apply the state change the records carry; they run when the records are
  durable, before any reply of the operation is sent;
* a failed write applies nothing: each reply is replaced by its ``if_failed(code)`` alternative
  (or sent unchanged when its answer does not depend on the write), and ``on_failed`` hooks may
  answer requests or react the way Kafka's protocol does (a failed assignment write starts a new
  rebalance), never undo a change: none was made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from coordinator.core.clock import ShardClock
from coordinator.core.context import ReplyTo
from coordinator.core.result import Result
from storage.records import Record

DurableHook = Callable[["Effects"], None]
FailedHook = Callable[["Effects", int], None]
FailedReply = Callable[[int], object]


class Effects:
    """Replies, records, and the continuations of their write."""

    __slots__ = ("durable_hooks", "failed_hooks", "fallbacks", "records", "replies")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.replies: list[tuple[ReplyTo, object]] = []
        self.fallbacks: list[FailedReply | None] = []
        self.durable_hooks: list[DurableHook] = []
        self.failed_hooks: list[FailedHook] = []

    def reply(self, reply_to: ReplyTo, response: object, if_failed: FailedReply | None = None) -> None:
        self.replies.append((reply_to, response))
        self.fallbacks.append(if_failed)

    def write(
        self,
        records: Iterable[Record],
        on_durable: DurableHook | None = None,
        on_failed: FailedHook | None = None,
    ) -> None:
        before = len(self.records)
        self.records.extend(records)
        if len(self.records) == before:
            raise ValueError("a write needs at least one record")
        if on_durable is not None:
            self.durable_hooks.append(on_durable)
        if on_failed is not None:
            self.failed_hooks.append(on_failed)

    def after_durable(self, on_durable: DurableHook) -> None:
        """Run ``on_durable`` once the records this operation writes (at least one) are durable."""
        if not self.records:
            raise ValueError("nothing is written: nothing becomes durable")
        self.durable_hooks.append(on_durable)

    def is_empty(self) -> bool:
        return not self.records and not self.replies


class ResultBuilder:
    """Turns Effects into Results whose continuations run at the shard's clock; once the shard
    is unloaded, durable records change nothing in it any more (their replies still go out)."""

    __slots__ = ("clock", "serving")

    def __init__(self, clock: ShardClock) -> None:
        self.clock = clock
        self.serving = True

    def to_result(self, fx: Effects) -> Result:
        if not fx.records:
            return Result(replies=list(fx.replies))
        replies = list(fx.replies)
        fallbacks = list(zip(fx.replies, fx.fallbacks, strict=True))
        durable_hooks = list(fx.durable_hooks)
        failed_hooks = list(fx.failed_hooks)

        def on_durable(now_ms: int) -> Result:
            self.clock.now_ms = now_ms
            out = Effects()
            if self.serving:
                for hook in durable_hooks:
                    hook(out)
            return self.to_result(out)

        def on_failed(now_ms: int, error_code: int) -> Result:
            self.clock.now_ms = now_ms
            out = Effects()
            for (reply_to, response), if_failed in fallbacks:
                out.reply(reply_to, response if if_failed is None else if_failed(error_code))
            if self.serving:
                for hook in failed_hooks:
                    hook(out, error_code)
            return self.to_result(out)

        return Result(records=list(fx.records), replies=replies, on_durable=on_durable, on_failed=on_failed)
