"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): Kafka's checks and
answers, pure. The server reads the stored credentials and writes the records these plan.

* A user named twice in a Describe gets DUPLICATE_RESOURCE; a named user without credentials
  RESOURCE_NOT_FOUND; no names (null or empty) lists every user.
* An Alter answers once per user. A (user, mechanism) altered twice in the request fails that user
  with DUPLICATE_RESOURCE; an empty user name or salt, or a salted password of the wrong length,
  with UNACCEPTABLE_CREDENTIAL; iterations outside [4096, 16384] with UNACCEPTABLE_CREDENTIAL;
  a mechanism other than SCRAM-SHA-256 (1) / SCRAM-SHA-512 (2) with UNSUPPORTED_SASL_MECHANISM;
  deleting a credential that does not exist with RESOURCE_NOT_FOUND. A user with any failure
  changes nothing; the other users' changes go ahead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

from coordinator.security.scram import MIN_ITERATIONS, SCRAM_MECHANISMS, credential_from_salted
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from protocol.messages.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from storage.records import UserCredentialRecord, UserCredentialTombstone

# Kafka's ScramMechanism type bytes.
MECHANISM_BY_TYPE: Final = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_BY_MECHANISM: Final = {name: code for code, name in MECHANISM_BY_TYPE.items()}
MAX_ITERATIONS: Final = 16384  # Kafka's ScramMechanism.maxIterations

CredentialChange = UserCredentialRecord | UserCredentialTombstone


def describe_response(
    req: DescribeUserScramCredentialsRequest, stored: Iterable[UserCredentialRecord]
) -> DescribeUserScramCredentialsResponse:
    by_user: dict[str, list[UserCredentialRecord]] = {}
    for credential in stored:
        if credential.mechanism in TYPE_BY_MECHANISM:
            by_user.setdefault(credential.user, []).append(credential)
    names = [u.name for u in req.users or []]
    if not names:
        results = [
            DescribeUserScramCredentialsResult(u, 0, None, _infos(by_user[u])) for u in sorted(by_user)
        ]
        return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)
    results = []
    counts = {name: names.count(name) for name in names}
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(
                DescribeUserScramCredentialsResult(
                    name,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                    [],
                )
            )
        elif name not in by_user:
            results.append(
                DescribeUserScramCredentialsResult(
                    name,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {name}",
                    [],
                )
            )
        else:
            results.append(DescribeUserScramCredentialsResult(name, 0, None, _infos(by_user[name])))
    return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)


def _infos(credentials: list[UserCredentialRecord]) -> list[CredentialInfo]:
    return [
        CredentialInfo(TYPE_BY_MECHANISM[c.mechanism], c.iterations)
        for c in sorted(credentials, key=lambda c: TYPE_BY_MECHANISM[c.mechanism])
    ]


def plan_alter(
    req: AlterUserScramCredentialsRequest, stored: Iterable[UserCredentialRecord]
) -> tuple[AlterUserScramCredentialsResponse, list[CredentialChange]]:
    """The answer, and the records to write for the users whose changes are all acceptable."""
    existing = {(c.user, c.mechanism) for c in stored}
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    pairs = [(d.name, d.mechanism) for d in req.deletions] + [(u.name, u.mechanism) for u in req.upsertions]
    duplicated = {name for name, mechanism in pairs if pairs.count((name, mechanism)) > 1}
    errors: dict[str, tuple[int, str]] = {}
    changes: dict[str, list[CredentialChange]] = {user: [] for user in users}

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    for user in duplicated:
        fail(
            user,
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    for d in req.deletions:
        mechanism = MECHANISM_BY_TYPE.get(d.mechanism)
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {d.mechanism}")
        elif (d.name, mechanism) not in existing:
            fail(
                d.name,
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        else:
            changes[d.name].append(UserCredentialTombstone(d.name, mechanism))
    for u in req.upsertions:
        mechanism = MECHANISM_BY_TYPE.get(u.mechanism)
        problem = _upsertion_problem(u.name, mechanism, u.iterations, u.salt, u.salted_password)
        if problem is not None:
            fail(u.name, *problem)
        elif mechanism is not None:
            c = credential_from_salted(mechanism, u.salt, u.salted_password, u.iterations)
            changes[u.name].append(
                UserCredentialRecord(u.name, mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
            )
    results = [
        AlterUserScramCredentialsResult(user, *errors[user])
        if user in errors
        else AlterUserScramCredentialsResult(user, 0, None)
        for user in users
    ]
    records = [change for user in users if user not in errors for change in changes[user]]
    return AlterUserScramCredentialsResponse(results=results), records


def _upsertion_problem(
    name: str, mechanism: str | None, iterations: int, salt: bytes, salted: bytes
) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations (the minimum is {MIN_ITERATIONS})"
    if iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations (the maximum is {MAX_ITERATIONS})"
    if not salt:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt must not be empty"
    if len(salted) != hashlib.new(SCRAM_MECHANISMS[mechanism]).digest_size:
        return (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"A {mechanism} salted password must be {hashlib.new(SCRAM_MECHANISMS[mechanism]).digest_size} bytes",
        )
    return None
