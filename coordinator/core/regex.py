"""Topic regular expressions of KIP-848 subscriptions (SubscribedTopicRegex), with RE2's limits.

Kafka evaluates these with RE2/J: a pattern must match the *whole* topic name, and the
constructs RE2 cannot run in linear time are errors. We compile with Python's ``re`` after
rejecting exactly those constructs -- lookahead/lookbehind, backreferences, conditionals,
atomic groups and possessive quantifiers -- so a pattern accepted here means the same as in
Kafka for topic names (which are ASCII: letters, digits, ``.``, ``_``, ``-``). RE2-only syntax
Python lacks (``\\pN``, ``\\C``, ``[[:alpha:]]`` classes) is rejected as invalid too.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from typing import Any, Final

MAX_PATTERN_LENGTH: Final = 4096

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


def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """Compile ``pattern`` for ``fullmatch`` against topic names, or raise RegexError."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexError(f"longer than {MAX_PATTERN_LENGTH} characters")
    if "[[:" in pattern:
        raise RegexError("POSIX character classes are not supported")
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        raise RegexError(str(exc)) from None
    _check(parsed)
    try:
        return re.compile(pattern)
    except re.error as exc:  # pragma: no cover - parse() already accepted it
        raise RegexError(str(exc)) from None


def _check(node: Any) -> None:
    for op, argument in node:
        reason = _UNSUPPORTED.get(op)
        if reason is not None:
            raise RegexError(f"{reason} are not supported (RE2 syntax)")
        for item in argument if isinstance(argument, (list, tuple)) else ():
            if isinstance(item, sre_parse.SubPattern):
                _check(item)
            elif isinstance(item, list):
                for sub in item:
                    if isinstance(sub, sre_parse.SubPattern):
                        _check(sub)
                    elif isinstance(sub, tuple):
                        _check([sub])
