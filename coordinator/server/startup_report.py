"""What the server tells the operator at start: where its data lives and the settings in force.

A relative SQLite path is resolved against the working directory, so a server started from
another directory silently opens another (new, empty) database; the log names the absolute path
and whether the file is new. Secrets (passwords, the password in a storage URL) are redacted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final
from urllib.parse import unquote

from coordinator.server.config import SETTINGS, Config
from storage.redact import redact_url

REDACTED: Final = "[hidden]"


def is_secret(field_name: str) -> bool:
    return "password" in field_name or "secret" in field_name


def sqlite_path(url: str) -> Path | None:
    """The absolute path of a sqlite:/// URL's database file (None for other stores)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() != "sqlite" or not rest.startswith("/"):
        return None
    raw = unquote(rest[1:].partition("?")[0])
    return Path(os.path.abspath(raw)) if raw else None


def storage_location(url: str) -> str:
    """The absolute path of a SQLite file, else the URL with its password hidden."""
    path = sqlite_path(url)
    return redact_url(url) if path is None else str(path)


def effective_settings(config: Config) -> list[tuple[str, str]]:
    """Every setting with the value in force, by the name an operator sets it with."""
    settings: list[tuple[str, str]] = []
    for setting in SETTINGS:
        value = getattr(config, setting.name)
        if setting.name == "storage":
            shown = redact_url(value)
        elif is_secret(setting.name):
            shown = REDACTED if value else ""
        elif isinstance(value, bool):
            shown = str(value).lower()
        elif isinstance(value, tuple):
            shown = ",".join(map(str, value))
        else:
            shown = "" if value is None else str(value)
        settings.append((setting.label, shown))
    return settings


def settings_block(config: Config) -> str:
    """Kafka's 'KafkaConfig values:' block: one `name = value` line per setting, sorted."""
    return "\n".join(f"\t{name} = {value}" for name, value in sorted(effective_settings(config)))
