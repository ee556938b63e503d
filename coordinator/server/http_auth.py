"""Who may read the HTTP port (docs/observability.md#who-may-read-the-http-port).

The console and its JSON API show every group's members, assignments and offsets. With the
authorizer on they need a credential: the bearer token read at start-up from the file
``console-token-file``, sent as ``Authorization: Bearer <token>`` or as the password of HTTP
Basic (any user name; browsers ask for it after the 401's ``WWW-Authenticate: Basic``). With the
authorizer on and no token file the console and the API are refused (403). A token file given
without the authorizer protects them too. ``metrics-token-required`` puts ``/metrics`` behind the
same token. ``/healthz`` and ``/readyz`` stay open (probes carry no credentials).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from enum import Enum
from pathlib import Path

from coordinator.server.config import Config, ConfigError


class Access(Enum):
    ALLOWED = "allowed"
    NO_CREDENTIAL = "401"  # ask for one
    DISABLED = "403"  # no credential can help


class HttpGuard:
    def __init__(self, token: str | None, console_protected: bool, metrics_protected: bool) -> None:
        self._token = token.encode() if token is not None else None
        self.console_protected = console_protected
        self.metrics_protected = metrics_protected

    def console(self, authorization: str | None) -> Access:
        return self._check(self.console_protected, authorization)

    def metrics(self, authorization: str | None) -> Access:
        return self._check(self.metrics_protected, authorization)

    def _check(self, protected: bool, authorization: str | None) -> Access:
        if not protected:
            return Access.ALLOWED
        if self._token is None:
            return Access.DISABLED
        presented = _presented_token(authorization)
        if presented is not None and hmac.compare_digest(presented, self._token):
            return Access.ALLOWED
        return Access.NO_CREDENTIAL


def _presented_token(authorization: str | None) -> bytes | None:
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip().encode()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        _, colon, password = decoded.partition(b":")
        return password if colon else None
    return None


def http_guard(config: Config) -> HttpGuard:
    """The guard of a configuration; ConfigError when the token file cannot be used."""
    token = None
    if config.console_token_file:
        try:
            token = Path(config.console_token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"console-token-file: cannot read {config.console_token_file}: {exc}") from None
        if len(token) < 16:
            raise ConfigError("console-token-file: the token must be at least 16 characters")
    if config.metrics_token_required and token is None:
        raise ConfigError("metrics-token-required needs console-token-file")
    console_protected = config.authorizer_enabled or token is not None
    return HttpGuard(token, console_protected, config.metrics_token_required)
