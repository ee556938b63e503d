"""The client side of SASL PLAIN and SCRAM-SHA-256/512 (RFC 5802), for upstream brokers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from coordinator.security.scram import SCRAM_MECHANISMS


class SaslClientError(Exception):
    """The server's SCRAM messages are malformed or it failed to prove it knows the password."""


def plain_token(username: str, password: str) -> bytes:
    return b"\0" + username.encode() + b"\0" + password.encode()


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.algorithm = SCRAM_MECHANISMS[mechanism]
        self.username = username
        self.password = password
        self.nonce = secrets.token_urlsafe(24)
        self.client_first_bare = f"n={_escape(username)},r={self.nonce}"
        self.server_signature = b""
        self.state = "first"

    @property
    def done(self) -> bool:
        return self.state == "done"

    def first(self) -> bytes:
        return f"n,,{self.client_first_bare}".encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self.state == "first":
            self.state = "final"
            return self._final(challenge.decode())
        attributes = _attributes(challenge.decode())
        if "e" in attributes:
            raise SaslClientError(f"SCRAM error from the server: {attributes['e']}")
        if not hmac.compare_digest(base64.b64decode(attributes.get("v", "")), self.server_signature):
            raise SaslClientError("the server's SCRAM signature is wrong")
        self.state = "done"
        return None

    def _final(self, server_first: str) -> bytes:
        attributes = _attributes(server_first)
        try:
            nonce, salt, iterations = attributes["r"], base64.b64decode(attributes["s"]), int(attributes["i"])
        except (KeyError, ValueError) as exc:
            raise SaslClientError(f"malformed SCRAM server-first message: {exc}") from None
        if not nonce.startswith(self.nonce):
            raise SaslClientError("the server's SCRAM nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self.algorithm, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.algorithm).digest()
        stored_key = hashlib.new(self.algorithm, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.algorithm).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.algorithm).digest()
        self.server_signature = hmac.new(server_key, auth_message, self.algorithm).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out
