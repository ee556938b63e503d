"""Store URLs with their password hidden, for logs and error messages."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for logs and error messages)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port is not None else "")
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return url.partition("://")[0] + "://<unparseable>"
