"""The client connection is the only writer of its socket (docs/architecture.md#the-connection-state-machine):
no gateway module touches a client connection's transport or its queue of frames; the gateway hands
answers to the connection (PendingReply.send_frame, Connection.stream) instead."""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[2] / "coordinator" / "gateway"


def _foreign_uses(tree: ast.AST, attributes: set[str]) -> list[tuple[int, str]]:
    """``x.transport``-style uses where ``x`` is not ``self`` (an upstream connection's own socket)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in attributes:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id == "self"):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_gateway_module_writes_to_a_client_socket_or_requeues_frames() -> None:
    offences = {
        path.name: uses
        for path in sorted(GATEWAY.glob("*.py"))
        if (
            uses := _foreign_uses(
                ast.parse(path.read_text(encoding="utf-8")), {"transport", "queue", "queued_bytes"}
            )
        )
    }
    assert offences == {}


def test_the_check_sees_a_write_to_a_client_transport() -> None:
    tree = ast.parse(
        "def f(connection):\n    connection.transport.write(b'x')\n    connection.queue.appendleft(b'y')\n"
    )
    assert [use for _, use in _foreign_uses(tree, {"transport", "queue"})] == [
        "connection.transport",
        "connection.queue",
    ]
