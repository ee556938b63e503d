"""SASL authentication of connections on SASL_PLAINTEXT / SASL_SSL listeners (Kafka's
SaslServerAuthenticator), at the API layer.

* Before authentication a connection may send ApiVersions, SaslHandshake and SaslAuthenticate;
  anything else closes it (Kafka: IllegalSaslStateException).
* SaslHandshake v1 + SaslAuthenticate v0-2 carry the mechanism's tokens; after SaslHandshake v0
  the tokens travel as bare length-prefixed frames (the pre-KIP-152 protocol).
* A failed authentication answers SASL_AUTHENTICATION_FAILED (58) with a message, logs one
  WARNING line and closes the connection; an unknown mechanism answers
  UNSUPPORTED_SASL_MECHANISM (33) with the enabled ones.
* KIP-368: with ``connections.max.reauth.ms`` > 0, SaslAuthenticate v1+ reports the session
  lifetime; a connection whose session expired may only re-authenticate (SaslHandshake +
  SaslAuthenticate, as the same user); any other request closes it.
* Credentials are read from the storage (``load_credentials(user)``, behind the cache of
  ``login_guard``), so users added or deleted with ``coordinator users`` apply within a second
  without a restart.
* An address with too many failed logins (``login_guard.FailedLoginLimit``) has its logins
  refused at once, without a storage look-up, until its window has passed.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from coordinator.security.scram import (
    SCRAM_MECHANISMS,
    Authenticator,
    SaslFailure,
    ScramCredential,
    new_authenticator,
)
from coordinator.server.login_guard import FailedLoginLimit
from coordinator.server.sasl_session import SaslSession
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeResponse
from protocol.wire import Request
from storage.records import UserCredentialRecord

if TYPE_CHECKING:
    from coordinator.server.connection import Connection, PendingReply

log = logging.getLogger(__name__)

SASL_APIS: Final = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_BEFORE_AUTHENTICATION: Final = frozenset(
    {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
)
_LENGTH: Final = struct.Struct(">i")

CredentialLoader = Callable[[str], Awaitable[list[UserCredentialRecord]]]


def first_message_user(mechanism: str, data: bytes) -> str | None:
    """The user name a mechanism's first client message names (to fetch its credentials)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if mechanism == "PLAIN":
        parts = text.split("\0")
        return parts[1] if len(parts) == 3 else None
    for attribute in text.split(",")[2:]:
        if attribute.startswith("n="):
            return attribute[2:].replace("=2C", ",").replace("=3D", "=")
    return None


class SaslServer:
    def __init__(
        self,
        mechanisms: tuple[str, ...],
        reauth_ms: int,
        load_credentials: CredentialLoader,
        now_ms: Callable[[], int] = lambda: int(time.monotonic() * 1000),
        failed_authentication_delay_ms: int = 100,
        login_limit: FailedLoginLimit | None = None,
    ) -> None:
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self.login_limit = login_limit
        self.mechanisms = mechanisms
        self.reauth_ms = reauth_ms
        self.load_credentials = load_credentials
        self.now_ms = now_ms
        self.tasks: set[asyncio.Task[None]] = set()
        self.failures = 0
        self.failures_by_reason: dict[
            str, int
        ] = {}  # bad_credentials, too_many_failures, credentials_unavailable

    # ---- gate ------------------------------------------------------------------------------
    def admit(self, connection: Connection, session: SaslSession, request: Request) -> bool:
        """May this request be served on this connection? Closes the connection when not."""
        if session.authenticated:
            if session.expires_at_ms is None or request.api_key in _BEFORE_AUTHENTICATION:
                return True
            if self.now_ms() < session.expires_at_ms:
                return True
            connection.abort("SASL session expired (connections.max.reauth.ms) without re-authentication")
            return False
        if request.api_key in _BEFORE_AUTHENTICATION:
            return True
        connection.abort(f"unauthenticated request (api key {request.api_key}) on a SASL listener")
        return False

    # ---- SaslHandshake / SaslAuthenticate ------------------------------------------------------
    def handle(self, connection: Connection, reply: PendingReply, request: Request) -> None:
        session = connection.sasl
        if request.api_key == ApiKey.SASL_HANDSHAKE:
            self._handshake(connection, session, reply, request)
        else:
            self._authenticate(connection, session, reply, request)

    def _handshake(
        self, connection: Connection, session: SaslSession | None, reply: PendingReply, request: Request
    ) -> None:
        mechanism = request.body.mechanism
        if session is None:
            reply.send(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
            return
        if mechanism not in self.mechanisms:
            log.warning(
                "failed authentication from %s: unsupported SASL mechanism %r (enabled: %s)",
                connection.peer, mechanism, ", ".join(self.mechanisms),
            )  # fmt: skip
            reply.send(
                SaslHandshakeResponse(
                    error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(self.mechanisms)
                )
            )
            self._close_later(connection)
            return
        session.authenticator = new_authenticator(mechanism, _no_credentials)
        session.raw_tokens = request.api_version == 0
        reply.send(SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=list(self.mechanisms)))

    def _authenticate(
        self, connection: Connection, session: SaslSession | None, reply: PendingReply, request: Request
    ) -> None:
        version = request.api_version
        if session is None or session.authenticator is None or session.raw_tokens:
            reply.send(
                SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE,
                    error_message="Unexpected SaslAuthenticate request: "
                    + (
                        "this listener does not use SASL"
                        if session is None
                        else "no SaslHandshake v1 before it"
                    ),
                )
            )
            if session is not None:
                self._close_later(connection)
            return

        def respond(token: bytes | None, failure: str | None) -> None:
            if failure is not None:
                reply.send(
                    SaslAuthenticateResponse(
                        error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=failure
                    )
                )
                self._close_later(connection)
                return
            lifetime = 0
            if session.authenticated and session.expires_at_ms is not None and version >= 1:
                lifetime = max(session.expires_at_ms - self.now_ms(), 0)
            reply.send(SaslAuthenticateResponse(auth_bytes=token or b"", session_lifetime_ms=lifetime))

        self._step(connection, session, request.body.auth_bytes, respond)

    def raw_token(self, connection: Connection, frame: bytes) -> None:
        """A bare SASL token after SaslHandshake v0; the answer is a bare length-prefixed token."""
        session = connection.sasl
        assert session is not None
        hold = connection.hold()

        def respond(token: bytes | None, failure: str | None) -> None:
            if failure is not None:
                self._close_later(connection)  # v0 has no way to tell the client why
            else:
                if session.authenticated:
                    session.raw_tokens = False
                hold.send_frame(_LENGTH.pack(len(token or b"")) + (token or b""))
            hold.finish_without_response()

        self._step(connection, session, frame, respond)

    def _close_later(self, connection: Connection) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the client reads the error first."""
        connection.stop_reading()
        if self.failed_authentication_delay_ms <= 0:
            connection.close()
        else:
            asyncio.get_running_loop().call_later(
                self.failed_authentication_delay_ms / 1000, connection.close
            )

    # ---- one step of the exchange ----------------------------------------------------------------
    def _step(
        self,
        connection: Connection,
        session: SaslSession,
        data: bytes,
        respond: Callable[[bytes | None, str | None], None],
    ) -> None:
        authenticator = session.authenticator
        assert authenticator is not None
        limit = self.login_limit
        if limit is not None and not session.authenticated and limit.blocked(connection.client_host):
            self._count_failure("too_many_failures")
            respond(
                None,
                "Authentication failed: too many failed authentications from this address, try again later",
            )
            return
        user = first_message_user(authenticator.mechanism, data) if _needs_lookup(authenticator) else None
        if user is None:
            self._finish_step(connection, session, authenticator, data, respond)
            return
        task = asyncio.get_running_loop().create_task(
            self._lookup_and_step(connection, session, authenticator, user, data, respond)
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _lookup_and_step(
        self,
        connection: Connection,
        session: SaslSession,
        authenticator: Authenticator,
        user: str,
        data: bytes,
        respond: Callable[[bytes | None, str | None], None],
    ) -> None:
        try:
            records = await self.load_credentials(user)
        except Exception as exc:  # storage down: the client retries the login later
            log.error("cannot read the credentials of %r for %s: %s", user, connection.peer, exc)
            self._count_failure("credentials_unavailable")
            respond(None, "Authentication failed: credentials are unavailable, try again later")
            return
        found = {r.mechanism: ScramCredential(r.mechanism, r.salt, r.stored_key, r.server_key, r.iterations)
                 for r in records if r.user == user and r.mechanism in SCRAM_MECHANISMS}  # fmt: skip
        authenticator.lookup = lambda name, mechanism: found.get(mechanism) if name == user else None
        if connection.closed:
            return
        if authenticator.mechanism == "PLAIN":  # PBKDF2 of the password: off the event loop
            loop = asyncio.get_running_loop()
            try:
                result = await loop.run_in_executor(None, authenticator.step, data)
            except SaslFailure as failure:
                self._fail(connection, authenticator, str(failure), respond)
                return
            self._complete(connection, session, result, respond)
            return
        self._finish_step(connection, session, authenticator, data, respond)

    def _finish_step(
        self,
        connection: Connection,
        session: SaslSession,
        authenticator: Authenticator,
        data: bytes,
        respond: Callable[[bytes | None, str | None], None],
    ) -> None:
        try:
            result = authenticator.step(data)
        except SaslFailure as failure:
            self._fail(connection, authenticator, str(failure), respond)
            return
        self._complete(connection, session, result, respond)

    def _fail(
        self,
        connection: Connection,
        authenticator: Authenticator,
        message: str,
        respond: Callable[[bytes | None, str | None], None],
    ) -> None:
        self._count_failure("bad_credentials")
        log.warning(
            "failed authentication from %s (SASL %s): %s", connection.peer, authenticator.mechanism, message
        )
        limit = self.login_limit
        if limit is not None:
            limit.failed(connection.client_host)
            if limit.blocked(connection.client_host):
                log.warning(
                    "too many failed authentications from %s: refusing its logins for a while",
                    connection.client_host,
                )
        respond(None, message)

    def _count_failure(self, reason: str) -> None:
        self.failures += 1
        self.failures_by_reason[reason] = self.failures_by_reason.get(reason, 0) + 1

    def _complete(
        self,
        connection: Connection,
        session: SaslSession,
        result: tuple[bytes, str | None],
        respond: Callable[[bytes | None, str | None], None],
    ) -> None:
        token, user = result
        if user is not None:
            if session.authenticated and session.user != user:
                assert session.authenticator is not None
                self._fail(
                    connection, session.authenticator, "Re-authentication must keep the same user", respond
                )
                return
            session.authenticated = True
            session.user = user
            session.authenticator = None
            session.expires_at_ms = self.now_ms() + self.reauth_ms if self.reauth_ms > 0 else None
            connection.principal = f"User:{user}"
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s authenticated as User:%s", connection.peer, user)
        respond(token, None)


def _needs_lookup(authenticator: Any) -> bool:
    return getattr(authenticator, "lookup", None) is _no_credentials


def _no_credentials(_user: str, _mechanism: str) -> ScramCredential | None:
    return None
