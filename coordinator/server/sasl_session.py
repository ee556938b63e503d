"""The SASL state one connection carries (set on SASL listeners, driven by authn)."""

from __future__ import annotations

from coordinator.security.scram import Authenticator


class SaslSession:
    """The SASL state of one connection."""

    __slots__ = ("authenticated", "authenticator", "expires_at_ms", "raw_tokens", "user")

    def __init__(self) -> None:
        self.authenticated = False
        self.authenticator: Authenticator | None = None
        self.expires_at_ms: int | None = None
        self.raw_tokens = False
        self.user: str | None = None
