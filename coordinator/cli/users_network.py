"""`coordinator users ... --bootstrap HOST:PORT`: SCRAM users through the Kafka protocol.

AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554), as kafka-configs.sh
--alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users does: the password is
salted and hashed here (PBKDF2, a random 32-byte salt) and only the salted password travels;
the broker derives and stores the SCRAM keys. Works against this coordinator (standalone or
gateway: its own users) and any Kafka broker.
"""

from __future__ import annotations

import argparse
import os
import sys

from coordinator.cli.admin.client import AdminClient
from coordinator.cli.admin.command_config import load_security
from coordinator.cli.admin.errors import KafkaError
from coordinator.security.scram import salted_password
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    UserName,
)

MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_TYPES.items()}


def run_network(args: argparse.Namespace, password: str | None) -> int:
    """One `users` command against the broker at --bootstrap; Kafka errors are exit 1."""
    try:
        security = load_security(args.command_config, os.environ)
        with AdminClient(args.bootstrap, timeout=args.timeout, security=security) as client:
            if args.users_command == "add":
                assert password is not None
                return _add(client, args, password)
            if args.users_command == "delete":
                return _delete(client, args)
            return _list(client)
    except KafkaError as exc:
        print(f"coordinator users: {exc}", file=sys.stderr)
        return 1


def describe(client: AdminClient, users: list[str] | None) -> DescribeUserScramCredentialsResponse:
    request = DescribeUserScramCredentialsRequest(
        users=None if users is None else [UserName(u) for u in users]
    )
    response: DescribeUserScramCredentialsResponse = client.bootstrap_connection().request(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request
    )
    if response.error_code != ErrorCode.NONE:
        raise KafkaError(response.error_code, response.error_message or "describing SCRAM users")
    return response


def _alter(client: AdminClient, request: AlterUserScramCredentialsRequest, user: str) -> None:
    response: AlterUserScramCredentialsResponse = client.bootstrap_connection().request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request
    )
    for result in response.results:
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(result.error_code, f"user {user}: {result.error_message or ''}".rstrip(": "))


def _add(client: AdminClient, args: argparse.Namespace, password: str) -> int:
    mechanisms = list(dict.fromkeys(args.mechanism or ["SCRAM-SHA-512", "SCRAM-SHA-256"]))
    upsertions = []
    for mechanism in mechanisms:
        salt = os.urandom(32)
        upsertions.append(
            ScramCredentialUpsertion(
                args.name,
                MECHANISM_TYPES[mechanism],
                args.iterations,
                salt,
                salted_password(mechanism, password, salt, args.iterations),
            )
        )
    _alter(client, AlterUserScramCredentialsRequest(deletions=[], upsertions=upsertions), args.name)
    print(f"user {args.name}: {', '.join(mechanisms)} stored")
    return 0


def _delete(client: AdminClient, args: argparse.Namespace) -> int:
    if args.mechanism:
        mechanisms = list(dict.fromkeys(args.mechanism))
    else:
        (found,) = describe(client, [args.name]).results
        if found.error_code == ErrorCode.RESOURCE_NOT_FOUND:
            print(f"coordinator users: no such user: {args.name}", file=sys.stderr)
            return 1
        if found.error_code != ErrorCode.NONE:
            raise KafkaError(found.error_code, f"user {args.name}: {found.error_message or ''}")
        mechanisms = [
            MECHANISM_NAMES[i.mechanism] for i in found.credential_infos if i.mechanism in MECHANISM_NAMES
        ]
    deletions = [ScramCredentialDeletion(args.name, MECHANISM_TYPES[m]) for m in mechanisms]
    _alter(client, AlterUserScramCredentialsRequest(deletions=deletions, upsertions=[]), args.name)
    print(f"user {args.name}: {', '.join(mechanisms)} deleted")
    return 0


def _list(client: AdminClient) -> int:
    for result in describe(client, None).results:
        infos = sorted(
            f"{MECHANISM_NAMES.get(i.mechanism, f'mechanism {i.mechanism}')} (iterations {i.iterations})"
            for i in result.credential_infos
        )
        print(f"{result.user}\t{', '.join(infos)}")
    return 0
