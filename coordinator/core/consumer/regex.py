"""Topic regular expressions of KIP-848 subscriptions (SubscribedTopicRegex), run by RE2.

Kafka evaluates these with RE2/J: a pattern must match the *whole* topic name, and the
constructs RE2 cannot run in linear time are errors. We use RE2 itself (the ``google-re2``
binding), so the accepted syntax is exactly RE2's and matching takes time linear in the
topic name whatever the pattern: a pattern such as ``(a|a)*b`` cannot stall the server,
however often it is re-evaluated (at every catalog change and every load).

Where RE2 refuses a construct Python's ``re`` would accept (lookaround, backreferences,
conditionals, atomic groups, possessive quantifiers), the error names the construct.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from typing import Any, Final, Protocol

import re2  # type: ignore[import-untyped]

MAX_PATTERN_LENGTH: Final = 4096
# RE2's own bound on the memory of one compiled program (its default is 8 MiB).
_MAX_PROGRAM_BYTES: Final = 8 << 20

_UNSUPPORTED: Final = {
    sre_constants.ASSERT: "lookahead/lookbehind",
    sre_constants.ASSERT_NOT: "negative lookahead/lookbehind",
    sre_constants.GROUPREF: "backreferences",
    sre_constants.GROUPREF_EXISTS: "conditional groups",
    sre_constants.ATOMIC_GROUP: "atomic groups",
    sre_constants.POSSESSIVE_REPEAT: "possessive quantifiers",
}


class RegexError(ValueError):
    pass


class TopicPattern(Protocol):
    """A compiled subscription pattern; ``fullmatch`` is truthy when the whole name matches."""

    def fullmatch(self, text: str) -> object: ...


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the client's error, not a server log line
    options.max_mem = _MAX_PROGRAM_BYTES
    return options


_OPTIONS: Final = _options()


def compile_topic_regex(pattern: str) -> TopicPattern:
    """Compile ``pattern`` for ``fullmatch`` against topic names, or raise RegexError."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexError(f"longer than {MAX_PATTERN_LENGTH} characters")
    try:
        compiled: TopicPattern = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raise RegexError(_explain(pattern, exc)) from None
    return compiled


def _explain(pattern: str, exc: Exception) -> str:
    """RE2's reason, or the name of the non-linear construct when Python's parser can see it."""
    try:
        reason = _unsupported(sre_parse.parse(pattern))
    except (re.error, RecursionError, OverflowError):
        reason = None
    if reason is not None:
        return f"{reason} are not supported (RE2 syntax)"
    message = exc.args[0] if exc.args else str(exc)
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


def _unsupported(node: Any) -> str | None:
    for op, argument in node:
        reason = _UNSUPPORTED.get(op)
        if reason is not None:
            return reason
        for item in argument if isinstance(argument, (list, tuple)) else ():
            found = None
            if isinstance(item, sre_parse.SubPattern):
                found = _unsupported(item)
            elif isinstance(item, list):
                for sub in item:
                    if isinstance(sub, sre_parse.SubPattern):
                        found = found or _unsupported(sub)
                    elif isinstance(sub, tuple):
                        found = found or _unsupported([sub])
            if found is not None:
                return found
    return None
