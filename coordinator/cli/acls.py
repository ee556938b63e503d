"""`coordinator acls add|list|delete`: ACLs through the server's Kafka ACL APIs
(CreateAcls / DescribeAcls / DeleteAcls), so a running server applies them at once and stores them.

On a SASL listener pass ``--username`` with ``--password-file`` (or COORDINATOR_ADMIN_PASSWORD[_FILE])
for SASL/PLAIN over plaintext TCP, or ``--command-config FILE`` for SCRAM and TLS. The user must be a super user
or hold ALTER (add/delete) / DESCRIBE (list) on the CLUSTER resource.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from coordinator.cli.admin.command_config import Security, load_security
from coordinator.cli.admin.connection import BrokerConnection, parse_address
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.security.acl import CLUSTER_NAME, Operation, PatternType, Permission, ResourceType
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, CreateAclsRequest
from protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from protocol.messages.describe_acls import DescribeAclsRequest

_OPERATIONS = [op.name for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)]


def add_acls_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    acls = sub.add_parser("acls", help="manage ACLs (Kafka's model) through the server's ACL APIs")
    commands = acls.add_subparsers(dest="acls_command", required=True, metavar="COMMAND")
    for name, text in (("add", "add ACLs"), ("delete", "delete matching ACLs"), ("list", "list ACLs")):
        parser = commands.add_parser(name, help=text)
        parser.add_argument(
            "--bootstrap", default="127.0.0.1:9092", help="server address (default 127.0.0.1:9092)"
        )
        parser.add_argument(
            "--username", help="SASL/PLAIN user (super user or ALTER/DESCRIBE on the cluster)"
        )
        secret = parser.add_mutually_exclusive_group()
        secret.add_argument(
            "--password",
            help="its password; visible to other users in `ps`: prefer --password-file or "
            "COORDINATOR_ADMIN_PASSWORD[_FILE]",
        )
        secret.add_argument("--password-file", metavar="FILE", help="a file holding the password")
        parser.add_argument(
            "--command-config",
            metavar="FILE",
            help="Kafka client properties (security.protocol, sasl.*, ssl.*), as the groups commands take",
        )
        parser.add_argument("--timeout", type=float, default=10.0)
        target = parser.add_mutually_exclusive_group(required=name != "list")
        target.add_argument("--group", help="GROUP resource name")
        target.add_argument("--topic", help="TOPIC resource name")
        target.add_argument("--cluster", action="store_true", help=f"the CLUSTER resource ({CLUSTER_NAME})")
        parser.add_argument(
            "--pattern",
            choices=["literal", "prefixed"],
            default=None,
            help="resource pattern (default literal)",
        )
        parser.add_argument("--principal", required=name == "add", help="User:name or User:*")
        parser.add_argument("--host", default=None, help="client host (default * for add)")
        parser.add_argument("--operation", action="append", choices=_OPERATIONS, type=str.upper,
                            required=name == "add", help="repeatable")  # fmt: skip
        parser.add_argument("--deny", action="store_true", help="a DENY binding (default ALLOW)")
    acls.set_defaults(func=run_acls)


def _resource(args: argparse.Namespace) -> tuple[int, str | None]:
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _connect(args: argparse.Namespace) -> BrokerConnection:
    host, port = parse_address(args.bootstrap)
    security = load_security(args.command_config, os.environ)
    if args.username:  # --username: SASL/PLAIN on a plaintext listener, as before --command-config
        if args.password_file:
            password = Path(args.password_file).read_text(encoding="utf-8").rstrip("\r\n")
        else:
            if args.password is not None:
                print(
                    "coordinator: warning: --password is visible to other users in `ps`; use "
                    "--password-file, $COORDINATOR_ADMIN_PASSWORD_FILE or $COORDINATOR_ADMIN_PASSWORD",
                    file=sys.stderr,
                )
            password = args.password or security.password or ""
        security = Security("SASL_PLAINTEXT", "PLAIN", args.username, password)
    return BrokerConnection(host, port, args.timeout, "coordinator-acls", security)


def run_acls(args: argparse.Namespace) -> int:
    try:
        conn = _connect(args)
        try:
            return _run(conn, args)
        finally:
            conn.close()
    except KafkaError as exc:
        print(exc, file=sys.stderr)
        return 1
    except (UsageError, OSError) as exc:
        print(f"coordinator acls: error: {exc}", file=sys.stderr)
        return 2


def _run(conn: BrokerConnection, args: argparse.Namespace) -> int:
    resource_type, name = _resource(args)
    permission = Permission.DENY if args.deny else Permission.ALLOW
    if args.acls_command == "add":
        pattern = PatternType.PREFIXED if args.pattern == "prefixed" else PatternType.LITERAL
        assert name is not None
        creations = [AclCreation(resource_type, name, pattern, args.principal, args.host or "*", Operation[op], permission)
                     for op in args.operation]  # fmt: skip
        response = conn.request(ApiKey.CREATE_ACLS, CreateAclsRequest(creations))
        failed = [r for r in response.results if r.error_code]
        for r in failed:
            print(f"{ErrorCode(r.error_code).name}: {r.error_message}", file=sys.stderr)
        if not failed:
            print(f"added {len(creations)} ACL(s)")
        return 1 if failed else 0
    pattern_filter = {
        "literal": PatternType.LITERAL,
        "prefixed": PatternType.PREFIXED,
        None: PatternType.ANY,
    }[args.pattern]
    operations = [Operation[op] for op in args.operation] if args.operation else [Operation.ANY]
    any_permission = Permission.ANY if args.acls_command == "list" and not args.deny else permission
    if args.acls_command == "delete":
        filters = [DeleteAclsFilter(resource_type, name, pattern_filter, args.principal, args.host, op, any_permission)
                   for op in operations]  # fmt: skip
        response = conn.request(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters))
        count = 0
        for result in response.filter_results:
            if result.error_code:
                print(f"{ErrorCode(result.error_code).name}: {result.error_message}", file=sys.stderr)
                return 1
            count += len(result.matching_acls)
        print(f"deleted {count} ACL(s)")
        return 0
    listed = conn.request(
        ApiKey.DESCRIBE_ACLS,
        DescribeAclsRequest(
            resource_type, name, pattern_filter, args.principal, args.host, Operation.ANY, any_permission
        ),
    )
    if listed.error_code:
        print(f"{ErrorCode(listed.error_code).name}: {listed.error_message}", file=sys.stderr)
        return 1
    for resource in listed.resources:
        for a in resource.acls:
            print("\t".join([ResourceType(resource.resource_type).name, resource.resource_name,
                             PatternType(resource.pattern_type).name, a.principal, a.host,
                             Operation(a.operation).name, Permission(a.permission_type).name]))  # fmt: skip
    return 0
