"""`coordinator users add|delete|list`: SASL/SCRAM credentials, written straight to the storage,
or with --bootstrap through a running broker's AlterUserScramCredentials (coordinator.cli.users_network).

Only the salted SCRAM keys are stored (RFC 5802/7677); the password (typed at the prompt, read
from a file with --password-file, from COORDINATOR_USER_PASSWORD, or given with --password,
which other local users can see in the process list) is never stored nor printed. A running
server reads the credentials from the storage, caching them for a second, so changes apply
within a second without a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from typing import Any

from coordinator.cli.admin.connection import parse_address
from coordinator.cli.users_network import run_network
from coordinator.security.scram import DEFAULT_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISMS, make_credential
from storage.base import Store, StoreError
from storage.records import UserCredentialRecord, UserCredentialTombstone
from storage.url import open_store

DEFAULT_STORAGE = "sqlite:///coordinator.db"


def add_users_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    users = sub.add_parser(
        "users",
        help="manage SASL/SCRAM users (stored salted, never in clear)",
        description="Manage the SASL users of a coordinator. SCRAM-SHA-256/512 credentials are stored "
        "salted and hashed in the coordinator's storage; PLAIN logins are checked against them.",
    )
    commands = users.add_subparsers(dest="users_command", required=True, metavar="COMMAND")
    add = commands.add_parser("add", help="add a user or change its password")
    add.add_argument("name")
    secret = add.add_mutually_exclusive_group()
    secret.add_argument(
        "--password-file",
        help="read the password from the first line of this file ('-' for standard input)",
    )
    secret.add_argument(
        "--password",
        help="the password; visible to other local users in the process list, prefer --password-file, "
        "COORDINATOR_USER_PASSWORD or the prompt (the default when neither is given)",
    )
    add.add_argument(
        "--mechanism",
        action="append",
        choices=sorted(SCRAM_MECHANISMS),
        help="SCRAM mechanism; repeat for both (default SCRAM-SHA-512 and SCRAM-SHA-256)",
    )
    add.add_argument(
        "--iterations", type=int, default=DEFAULT_ITERATIONS, help=f"PBKDF2 iterations (>= {MIN_ITERATIONS})"
    )
    delete = commands.add_parser("delete", help="delete a user (all mechanisms unless --mechanism)")
    delete.add_argument("name")
    delete.add_argument("--mechanism", action="append", choices=sorted(SCRAM_MECHANISMS))
    listing = commands.add_parser("list", help="list users and their mechanisms")
    for parser in (add, delete, listing):
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--storage", default=None, help=f"storage URL (default {DEFAULT_STORAGE})")
        where.add_argument(
            "--bootstrap",
            metavar="HOST:PORT",
            type=_address,
            help="a running broker instead of the storage: the Kafka protocol's SCRAM credential APIs "
            "(this coordinator, or any Kafka broker); needs ALTER/DESCRIBE on the cluster where ACLs are on",
        )
        parser.add_argument(
            "--command-config", metavar="FILE", help="with --bootstrap: Kafka client properties (SASL, TLS)"
        )
        parser.add_argument(
            "--timeout", type=float, default=10.0, metavar="SECONDS", help="with --bootstrap: request timeout"
        )
    users.set_defaults(func=run_users)


def _address(text: str) -> str:
    try:
        parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def run_users(args: argparse.Namespace) -> int:
    if args.bootstrap is None and args.command_config is not None:
        print("coordinator users: --command-config goes with --bootstrap", file=sys.stderr)
        return 2
    if args.users_command == "add" and args.iterations < MIN_ITERATIONS:
        print(f"coordinator users: --iterations must be at least {MIN_ITERATIONS}", file=sys.stderr)
        return 2
    try:
        if args.bootstrap is not None:
            password = _password(args) if args.users_command == "add" else None
            return run_network(args, password)
        return asyncio.run(_run(args))
    except (StoreError, ValueError, OSError) as exc:
        print(f"coordinator users: {exc}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace) -> int:
    store: Store = open_store(getattr(args, "storage", None) or DEFAULT_STORAGE)
    await store.open()
    try:
        if args.users_command == "add":
            return await _add(store, args)
        if args.users_command == "delete":
            return await _delete(store, args)
        return await _list(store)
    finally:
        await store.close()


def _password(args: argparse.Namespace) -> str:
    if args.password_file:
        with open(
            0 if args.password_file == "-" else args.password_file,
            encoding="utf-8",
            closefd=args.password_file != "-",
        ) as file:
            line = file.readline().rstrip("\r\n")
        if not line:
            raise ValueError(f"no password in {args.password_file}")
        return line
    if args.password:
        return str(args.password)
    from_env = os.environ.get("COORDINATOR_USER_PASSWORD")
    if from_env:
        return from_env
    return getpass.getpass(f"password for {args.name}: ")


async def _add(store: Store, args: argparse.Namespace) -> int:
    password = _password(args)
    mechanisms = args.mechanism or ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    records: list[Any] = []
    for mechanism in dict.fromkeys(mechanisms):
        c = make_credential(mechanism, password, args.iterations)
        records.append(
            UserCredentialRecord(args.name, mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
        )
    await store.write(records)
    print(f"user {args.name}: {', '.join(r.mechanism for r in records)} stored")
    return 0


async def _credentials(store: Store, user: str | None = None) -> list[UserCredentialRecord]:
    return await store.load_credentials(user)


async def _delete(store: Store, args: argparse.Namespace) -> int:
    existing = {c.mechanism for c in await _credentials(store, args.name)}
    wanted = set(args.mechanism or existing)
    gone = sorted(existing & wanted)
    if not gone:
        print(f"coordinator users: no such user: {args.name}", file=sys.stderr)
        return 1
    await store.write([UserCredentialTombstone(args.name, m) for m in gone])
    print(f"user {args.name}: {', '.join(gone)} deleted")
    return 0


async def _list(store: Store) -> int:
    by_user: dict[str, list[str]] = {}
    for c in await _credentials(store):
        by_user.setdefault(c.user, []).append(f"{c.mechanism} (iterations {c.iterations})")
    for user in sorted(by_user):
        print(f"{user}\t{', '.join(sorted(by_user[user]))}")
    return 0
