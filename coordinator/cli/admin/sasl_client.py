"""The client side of SASL/PLAIN and SCRAM-SHA-256/512 (RFC 5802/7677) for the admin commands."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable

from coordinator.cli.admin.errors import KafkaError
from protocol.errors import ErrorCode

# One round trip: the client's message in, the server's answer out.
Exchange = Callable[[bytes], bytes]


def authenticate(mechanism: str, username: str, password: str, exchange: Exchange) -> None:
    if mechanism == "PLAIN":
        exchange(f"\0{username}\0{password}".encode())
        return
    _scram(mechanism, username, password, exchange)


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> dict[str, str]:
    return {part[0]: part[2:] for part in message.split(",") if len(part) >= 2 and part[1] == "="}


def _scram(mechanism: str, username: str, password: str, exchange: Exchange) -> None:
    algorithm = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    nonce = base64.b64encode(secrets.token_bytes(24)).decode()
    first_bare = f"n={_escape(username)},r={nonce}"
    server_first = exchange(f"n,,{first_bare}".encode()).decode()
    found = _attributes(server_first)
    if "e" in found or not found.get("r", "").startswith(nonce) or "s" not in found or "i" not in found:
        raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, f"unexpected SCRAM answer {server_first!r}")
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), base64.b64decode(found["s"]), int(found["i"]))
    client_key = hmac.digest(salted, b"Client Key", algorithm)
    stored_key = hashlib.new(algorithm, client_key).digest()
    final_bare = f"c=biws,r={found['r']}"
    auth_message = f"{first_bare},{server_first},{final_bare}".encode()
    signature = hmac.digest(stored_key, auth_message, algorithm)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_final = _attributes(
        exchange(f"{final_bare},p={base64.b64encode(proof).decode()}".encode()).decode()
    )
    server_key = hmac.digest(salted, b"Server Key", algorithm)
    expected = base64.b64encode(hmac.digest(server_key, auth_message, algorithm)).decode()
    if not hmac.compare_digest(server_final.get("v", ""), expected):
        raise KafkaError(
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "the broker's SCRAM signature does not match: it does not know this password",
            explain=False,
        )
