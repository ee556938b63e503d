"""SASL mechanisms on the server side: PLAIN and SCRAM-SHA-256/512 (RFC 5802, RFC 7677).

Pure and synchronous: an authenticator is fed the client's bytes and returns the server's
answer, an exception (``SaslFailure``) or, at the end, the authenticated user name.

Credentials are stored salted and hashed exactly as SCRAM defines them (salt, iteration count,
StoredKey, ServerKey); a plain password is never stored nor logged. PLAIN logins are checked
against the user's SCRAM credential (the password is run through the same key derivation and
compared with StoredKey), so one stored credential serves both mechanisms.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

SCRAM_MECHANISMS: Final = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS: Final = ("PLAIN", *SCRAM_MECHANISMS)
MIN_ITERATIONS: Final = 4096
DEFAULT_ITERATIONS: Final = 8192


class SaslFailure(Exception):
    """Authentication failed; the message is safe to send to the client and to log."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash(mechanism: str) -> str:
    try:
        return SCRAM_MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism}") from None


def _hmac(algorithm: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, algorithm).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), _saslprep(password).encode(), salt, iterations)


def _keys(mechanism: str, salted: bytes) -> tuple[bytes, bytes]:
    algorithm = _hash(mechanism)
    client_key = _hmac(algorithm, salted, b"Client Key")
    stored_key = hashlib.new(algorithm, client_key).digest()
    server_key = _hmac(algorithm, salted, b"Server Key")
    return stored_key, server_key


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """A credential from a salted password (Hi(password, salt, i)), as AlterUserScramCredentials
    carries it: the client salts, the server derives StoredKey and ServerKey."""
    stored_key, server_key = _keys(mechanism, salted)
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"SCRAM iterations must be at least {MIN_ITERATIONS}")
    if not password:
        raise ValueError("the password must not be empty")
    salt = salt if salt is not None else os.urandom(32)
    stored_key, server_key = _keys(mechanism, salted_password(mechanism, password, salt, iterations))
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def check_password(credential: ScramCredential, password: str) -> bool:
    salted = salted_password(credential.mechanism, password, credential.salt, credential.iterations)
    stored_key, _ = _keys(credential.mechanism, salted)
    return hmac.compare_digest(stored_key, credential.stored_key)


def _saslprep(text: str) -> str:
    # Kafka's ScramFormatter does not apply SASLprep either (it uses the UTF-8 bytes); the
    # clients we serve do the same, so passwords are compared as UTF-8.
    return text


# (user name, mechanism) -> credential, or None when the user has none for that mechanism.
CredentialLookup = Callable[[str, str], ScramCredential | None]


class Authenticator:
    """One SASL exchange. ``step`` returns (server bytes, user name once authenticated)."""

    mechanism: str
    lookup: CredentialLookup

    def step(self, data: bytes) -> tuple[bytes, str | None]:
        raise NotImplementedError


class PlainAuthenticator(Authenticator):
    mechanism = "PLAIN"

    def __init__(self, lookup: CredentialLookup) -> None:
        self.lookup = lookup

    def step(self, data: bytes) -> tuple[bytes, str | None]:
        try:
            authzid, user, password = data.decode("utf-8").split("\0")
        except (UnicodeDecodeError, ValueError):
            raise SaslFailure("Invalid SASL/PLAIN request: expected authzid NUL user NUL password") from None
        if not user or not password:
            raise SaslFailure("Authentication failed: username and password must not be empty")
        if authzid and authzid != user:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = self.lookup(user, mechanism)
            if credential is not None:
                if check_password(credential, password):
                    return b"", user
                break
        raise SaslFailure("Authentication failed: Invalid username or password")


def _attributes(message: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise SaslFailure(f"Invalid SCRAM message: malformed attribute {part[:20]!r}")
        result.setdefault(key, value)
    return result


def _decode_name(value: str) -> str:
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise SaslFailure("Invalid SCRAM message: bad user name encoding")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramAuthenticator(Authenticator):
    """Server side of SCRAM (no channel binding; Kafka's clients send ``n,,``)."""

    def __init__(self, mechanism: str, lookup: CredentialLookup) -> None:
        self.mechanism = mechanism
        self.algorithm = _hash(mechanism)
        self.lookup = lookup
        self._state = 0
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._user = ""
        self._credential: ScramCredential | None = None

    def step(self, data: bytes) -> tuple[bytes, str | None]:
        try:
            message = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SCRAM message: not UTF-8") from None
        if self._state == 0:
            return self._client_first(message), None
        if self._state == 1:
            return self._client_final(message)
        raise SaslFailure("Invalid SCRAM exchange: unexpected message after completion")

    def _client_first(self, message: str) -> bytes:
        gs2, sep, rest = message.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise SaslFailure("Invalid SCRAM client-first message (channel binding is not supported)")
        attributes = _attributes(bare)
        if "m" in attributes or "n" not in attributes or "r" not in attributes:
            raise SaslFailure("Invalid SCRAM client-first message")
        user = _decode_name(attributes["n"])
        if authzid and _decode_name(authzid.removeprefix("a=")) != user:
            raise SaslFailure("Authentication failed: authorization id differs from the user name")
        # Kafka: extensions (e.g. tokenauth) are not supported here.
        self._user = user
        self._credential = self.lookup(user, self.mechanism)
        if self._credential is None:
            # Carry on with a fake salt so that unknown users are not told apart by the exchange:
            # the same for the same name, as a real user's salt is.
            salt, iterations = fake_salt(user, self.mechanism), DEFAULT_ITERATIONS
        else:
            salt, iterations = self._credential.salt, self._credential.iterations
        self._client_first_bare = bare
        self._nonce = attributes["r"] + secrets.token_urlsafe(24)
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self._state = 1
        return self._server_first.encode()

    def _client_final(self, message: str) -> tuple[bytes, str | None]:
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise SaslFailure("Invalid SCRAM client-final message: no proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise SaslFailure("Invalid SCRAM client-final message: nonce mismatch")
        if attributes.get("c") not in ("biws", "eSws"):  # base64 of "n,," / "y,,"
            raise SaslFailure("Invalid SCRAM client-final message: channel binding is not supported")
        self._state = 2
        credential = self._credential
        if credential is None:
            raise SaslFailure(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
            )
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise SaslFailure("Invalid SCRAM client-final message: bad proof encoding") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.algorithm, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslFailure(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
            )
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algorithm, client_key).digest(), credential.stored_key):
            raise SaslFailure(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
            )
        server_signature = _hmac(self.algorithm, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature), self._user


# Per process: fake salts are stable while the server runs; a restart changes them, as a
# password change changes a real user's salt.
_FAKE_SALT_KEY: Final = os.urandom(32)


def fake_salt(user: str, mechanism: str) -> bytes:
    """The salt shown for a user that does not exist: derived from the name and a server secret."""
    return hmac.new(_FAKE_SALT_KEY, f"{mechanism}\0{user}".encode(), hashlib.sha256).digest()


def new_authenticator(mechanism: str, lookup: CredentialLookup) -> Authenticator:
    if mechanism == "PLAIN":
        return PlainAuthenticator(lookup)
    return ScramAuthenticator(mechanism, lookup)
