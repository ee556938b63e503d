"""Settings declared once: a settings class's body is the table of its settings.

Each row is one dataclass field::

    group_max_size: int = setting(2**31 - 1, "members per group", at_least(1), kafka=True)

giving the name, the type (the annotation), the default, the validator and the doc. From the
rows follow the command-line flag (``--group-max-size``), the environment variable
(``COORDINATOR_GROUP_MAX_SIZE``), the TOML keys (``group.max.size`` or ``group_max_size``), the
name used in error messages (Kafka's dotted name for ``kafka=True`` settings, else the flag
without dashes) and the README's settings table. Validators run when the object is built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

T = TypeVar("T")
# (label, value) -> the whole error message, or None when the value is fine.
Validator = Callable[[str, Any], str | None]

_META: Final = "setting"


class ConfigError(ValueError):
    """A setting is unknown or has an invalid value; the message names it."""


@dataclass(frozen=True, slots=True)
class SettingInfo:
    doc: str
    validate: Validator | None
    kafka: bool  # one of Apache Kafka's broker settings, under its name
    shown_default: str | None  # the default as the docs show it, when not the plain value


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of a settings table, as read back from the class."""

    name: str  # the field name
    annotation: str
    default: Any
    info: SettingInfo

    @property
    def label(self) -> str:
        """The name in messages and docs: Kafka's ``group.max.size``, else ``metrics-port``."""
        return self.name.replace("_", ".") if self.info.kafka else self.flag[2:]

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "COORDINATOR_" + self.name.upper()

    @property
    def shown_default(self) -> str:
        if self.info.shown_default is not None:
            return self.info.shown_default
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, tuple):
            return ",".join(self.default)
        return "" if self.default is None else str(self.default)


def setting(
    default: T,
    doc: str,
    validate: Validator | None = None,
    *,
    kafka: bool = False,
    shown_default: str | None = None,
) -> T:
    """A settings-table row (a dataclass field with its default, doc and validator)."""
    info = SettingInfo(doc, validate, kafka, shown_default)
    field: T = dataclasses.field(default=default, metadata={_META: info})
    return field


def settings_of(cls_or_obj: Any) -> Iterator[Setting]:
    for f in dataclasses.fields(cls_or_obj):
        info = f.metadata.get(_META)
        if info is not None:
            yield Setting(f.name, str(f.type), f.default, info)


def check_settings(obj: Any) -> None:
    """Run every setting's validator; raises ConfigError with the first message."""
    for s in settings_of(obj):
        if s.info.validate is not None:
            message = s.info.validate(s.label, getattr(obj, s.name))
            if message is not None:
                raise ConfigError(message)


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


# ---- validators -------------------------------------------------------------------------


def positive(label: str, value: int) -> str | None:
    return None if value >= 1 else f"{label} must be positive"


def non_negative(label: str, value: int) -> str | None:
    return None if value >= 0 else f"{label} must be >= 0"


def at_least(minimum: int) -> Validator:
    def check(label: str, value: int) -> str | None:
        return None if value >= minimum else f"{label} must be at least {minimum}"

    return check


def one_of(*choices: str, normalise: Callable[[str], str] = str) -> Validator:
    def check(label: str, value: str) -> str | None:
        return None if normalise(value) in choices else f"{label} must be {' or '.join(choices)}"

    return check


def tcp_port(label: str, value: int) -> str | None:
    return None if 0 <= value <= 65535 else f"{label} {value} is not a TCP port"


def names_among(known: Callable[[], Sequence[str]], what: str) -> Validator:
    """A non-empty list whose every name is among ``known()``."""

    def check(label: str, value: tuple[str, ...]) -> str | None:
        names = known()
        unknown = [v for v in value if v not in names]
        if value and not unknown:
            return None
        return f"{label} must list {what} among {', '.join(names)}" + (
            f"; unknown: {', '.join(unknown)}" if unknown else ""
        )

    return check
