"""What upstream's DescribeTransactions answer proves about a pending transaction
(coordinator/gateway/transaction_resolver.py; docs/transactions.md, the resolver)."""

from __future__ import annotations

import pytest

from coordinator.gateway.transaction_resolver import ENDING, HELD, OPEN, UNKNOWN, Verdict, decide
from protocol.errors import ErrorCode
from protocol.messages.describe_transactions import TransactionState

PID, EPOCH = 4000, 7


def _state(state: str, producer_id: int = PID, epoch: int = EPOCH, error: int = 0) -> TransactionState:
    return TransactionState(
        error_code=error,
        transactional_id="t",
        transaction_state=state,
        producer_id=producer_id,
        producer_epoch=epoch,
    )


@pytest.mark.parametrize(
    ("version", "status", "answer", "verdict"),
    [
        # version 1: the transaction completes at its own epoch
        (1, HELD, _state("CompleteCommit"), Verdict.COMMITTED),
        (1, ENDING, _state("CompleteAbort"), Verdict.ABORTED),
        (1, OPEN, _state("CompleteCommit"), Verdict.COMMITTED),
        # ... unless the hold is over: a later transaction at the same epoch may have completed
        (1, UNKNOWN, _state("CompleteCommit"), Verdict.UNDECIDED),
        (1, UNKNOWN, _state("CompleteAbort"), Verdict.UNDECIDED),
        # ... and a completion at epoch + 1 may be a later transaction's (after a fence)
        (1, HELD, _state("CompleteCommit", epoch=EPOCH + 1), Verdict.UNDECIDED),
        (1, ENDING, _state("CompleteAbort", epoch=EPOCH + 1), Verdict.UNDECIDED),
        # version 2: every end bumps the epoch (a later transaction cannot be at ours)
        (2, HELD, _state("CompleteCommit", epoch=EPOCH + 1), Verdict.COMMITTED),
        (2, UNKNOWN, _state("CompleteCommit", epoch=EPOCH + 1), Verdict.COMMITTED),
        (2, ENDING, _state("CompleteAbort", epoch=EPOCH + 1), Verdict.ABORTED),
        (2, HELD, _state("CompleteCommit"), Verdict.UNDECIDED),
        (2, UNKNOWN, _state("CompleteCommit", epoch=EPOCH + 2), Verdict.UNDECIDED),
        # still open upstream: no EndTxn reached it (unless one is in flight)
        (1, HELD, _state("Ongoing"), Verdict.OPEN),
        (2, OPEN, _state("Ongoing"), Verdict.OPEN),
        (2, UNKNOWN, _state("Ongoing"), Verdict.OPEN),
        (1, ENDING, _state("Ongoing"), Verdict.WAIT),
        # ... but released from the hold, version 1's Ongoing at our epoch may be a later one's
        (1, UNKNOWN, _state("Ongoing"), Verdict.UNDECIDED),
        (1, UNKNOWN, _state("Ongoing", epoch=EPOCH + 1), Verdict.UNDECIDED),
        # being decided
        (1, ENDING, _state("PrepareCommit"), Verdict.WAIT),
        (2, ENDING, _state("PrepareAbort", epoch=EPOCH + 1), Verdict.WAIT),
        (1, OPEN, _state("PrepareEpochFence"), Verdict.WAIT),
        # upstream moved on: only a transaction seen open with no EndTxn forwarded is known aborted
        (1, OPEN, _state("Empty", epoch=EPOCH + 1), Verdict.ABORTED),
        (2, OPEN, _state("Ongoing", epoch=EPOCH + 2), Verdict.ABORTED),
        (1, OPEN, _state("Ongoing", producer_id=PID + 1, epoch=0), Verdict.ABORTED),
        (1, UNKNOWN, _state("Empty", epoch=EPOCH + 1), Verdict.UNDECIDED),
        (1, HELD, _state("Empty", epoch=EPOCH + 1), Verdict.UNDECIDED),
        (2, ENDING, _state("Ongoing", epoch=EPOCH + 2), Verdict.UNDECIDED),
        (1, ENDING, _state("Ongoing", producer_id=PID + 1, epoch=0), Verdict.UNDECIDED),
        # errors
        (1, OPEN, _state("", error=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND), Verdict.ABORTED),
        (1, UNKNOWN, _state("", error=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND), Verdict.UNDECIDED),
        (1, HELD, _state("", error=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND), Verdict.UNDECIDED),
        (1, HELD, _state("", error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), Verdict.WAIT),
        (2, OPEN, _state("", error=ErrorCode.NOT_COORDINATOR), Verdict.WAIT),
    ],
)
def test_what_an_answer_proves(version: int, status: str, answer: TransactionState, verdict: Verdict) -> None:
    assert decide(PID, EPOCH, version, status, answer) is verdict
