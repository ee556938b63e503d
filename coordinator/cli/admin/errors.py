"""The two ways an admin command fails: a Kafka error (exit 1) or bad usage (exit 2)."""

from __future__ import annotations

from protocol.errors import DESCRIPTIONS, ErrorCode, error_name


def describe_error(code: int) -> str:
    """Kafka's one-line description of an error code ('' for codes we do not know)."""
    try:
        return DESCRIPTIONS.get(ErrorCode(code), "").rstrip(".")
    except ValueError:
        return ""


class KafkaError(Exception):
    """A Kafka error code (or a network failure, named as Kafka's clients name it) with context.

    Printed as 'NAME: context (Kafka's description)', e.g.
    "GROUP_ID_NOT_FOUND: group 'billing' does not exist (The group id does not exist)".
    """

    def __init__(self, code: int, context: str = "", explain: bool = True) -> None:
        self.code = code
        self.name = error_name(code)
        description = describe_error(code) if explain else ""
        text = f"{context} ({description})" if context and description else context or description
        super().__init__(f"{self.name}: {text}" if text else self.name)


class UsageError(Exception):
    """Input the command cannot work with (bad CSV, unknown partition, impossible request)."""
