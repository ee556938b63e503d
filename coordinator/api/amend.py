"""Amending a response the core builds: the API layer's one way to add to or edit a reply.

When the API layer answers part of a request itself (partitions of unknown topics, topics or
groups the principal may not see) and passes the rest to the core, the two halves meet here: the
request's ReplyTo is wrapped, and the edit runs on the core's response just before it leaves --
whenever that is (a parked JoinGroup, a commit waiting for its write). Edits installed later run
first, so the outermost layer (authorization) has the last word.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordinator.core.context import ReplyTo, RequestContext
from coordinator.core.result import Result


class AmendedReply:
    """A ReplyTo that edits the response, then hands it on."""

    __slots__ = ("edit", "inner")

    def __init__(self, inner: ReplyTo, edit: Callable[[Any], None]) -> None:
        self.inner = inner
        self.edit = edit

    def send(self, response: Any) -> None:
        self.edit(response)
        self.inner.send(response)


def amend(ctx: RequestContext, edit: Callable[[Any], None]) -> None:
    """Run ``edit`` on this request's response before it is sent."""
    ctx.reply_to = AmendedReply(ctx.reply_to, edit)


def reply(ctx: RequestContext, response: Any) -> Result:
    """A Result answering this request at once."""
    return Result(replies=[(ctx.reply_to, response)])
