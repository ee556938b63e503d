"""The admin requests' writes (group configs, ACLs, credentials, the topic catalog) answer a
failed write with Kafka's mapping of a failed append, written once in coordinator.core.errors."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.admin_write import admin_write
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreationResult, CreateAclsResponse
from storage.records import AclRecord


class Sent:
    def __init__(self) -> None:
        self.responses: list[Any] = []

    def send(self, response: Any) -> None:
        self.responses.append(response)


def _acl() -> AclRecord:
    return AclRecord(2, "payments", 3, "User:alice", "*", 3, 3)


def _create(sent: Sent, applied: list[str]) -> tuple[Any, CreateAclsResponse]:
    response = CreateAclsResponse(results=[AclCreationResult(0, None), AclCreationResult(35, "refused")])

    def fail_entries(code: int) -> None:
        for result in response.results:
            if not result.error_code:
                result.error_code, result.error_message = code, "could not store the ACL"

    result = admin_write(
        sent, [_acl()], response, apply=lambda: applied.append("applied"), fail_entries=fail_entries
    )
    return result, response


def test_a_durable_write_applies_then_answers() -> None:
    sent, applied = Sent(), list[str]()
    result, response = _create(sent, applied)
    assert result.records == [_acl()]
    assert result.on_durable is not None
    follow_up = result.on_durable(0)
    assert applied == ["applied"]
    follow_up.deliver(0)
    assert sent.responses == [response]
    assert [r.error_code for r in response.results] == [0, 35]


@pytest.mark.parametrize(
    ("storage_code", "answered"),
    [
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_a_failed_write_fails_the_entries_that_were_to_succeed_with_the_mapped_code(
    storage_code: ErrorCode, answered: ErrorCode
) -> None:
    sent, applied = Sent(), list[str]()
    result, response = _create(sent, applied)
    assert result.on_failed is not None
    result.on_failed(0, int(storage_code)).deliver(0)
    assert applied == []
    assert sent.responses == [response]
    assert [r.error_code for r in response.results] == [int(answered), 35]
    assert response.results[0].error_message == "could not store the ACL"
