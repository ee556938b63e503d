"""The hold (docs/transactions.md#the-hold-a-transaction-of-unknown-state): pending offsets of a
transaction neither seen open nor ending here (loaded after a restart) hold back every
transactional request of their transactional id until upstream has answered the resolver about
that transaction, so that the answer is about it and not about a later transaction at the same
producer epoch (transaction version 1)."""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

import pytest

from coordinator.gateway.transaction_resolver import OPEN_AGE_MS, TransactionResolver
from coordinator.gateway.transactions import HELD, OPEN, UNKNOWN, TransactionOutcomes
from coordinator.gateway.upstream import UpstreamError
from coordinator.gateway.versions import ADD_PARTITIONS_TO_TXN, FORWARDED_MAX
from protocol.errors import ErrorCode
from protocol.gateway_wire import (
    decode_forwarded_response,
    encode_forwarded_response,
)
from protocol.messages import GATEWAY_CODECS, GATEWAY_FLEXIBLE
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from protocol.messages.describe_transactions import TransactionState
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from protocol.wire import encode_request
from tests.coordinator.harness import Harness
from tests.gateway.test_transaction_outcomes import (
    ADD_OFFSETS,
    END_TXN,
    EPOCH,
    INIT_PRODUCER_ID,
    PID,
    _add_offsets,
    _outcomes,
    _pending,
    _resolver,
    _unstable,
    _Upstream,
)

ADD_PARTITIONS = ADD_PARTITIONS_TO_TXN
KEY = (PID, EPOCH)


@pytest.fixture
def h() -> Harness:
    return Harness()


def _request(api_key: int, version: int, body: Any) -> bytes:
    """A request frame (without length prefix) in the gateway's codecs, as a client sends it."""
    flexible = (api_key, version) in GATEWAY_FLEXIBLE
    out = bytearray(struct.pack(">hhih", api_key, version, 5, 1) + b"c" + (b"\x00" if flexible else b""))
    GATEWAY_CODECS[(api_key, version)][1](body, out)
    return bytes(out)


def _add_partitions(version: int = 3, transactional_id: str = "tx") -> bytes:
    body = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=PID,
        v3_and_below_producer_epoch=EPOCH,
        v3_and_below_topics=[AddPartitionsToTxnTopic("out", [0, 1])],
    )
    return _request(ADD_PARTITIONS, version, body)


def _init(version: int, transactional_id: str | None = "tx") -> bytes:
    """InitProducerId built by hand (the gateway reads it without a codec)."""
    flexible = version >= 2
    header = struct.pack(">hhih", INIT_PRODUCER_ID, version, 3, 1) + b"c" + (b"\x00" if flexible else b"")
    if transactional_id is None:
        body = b"\x00" if flexible else struct.pack(">h", -1)
    elif flexible:
        body = bytes([len(transactional_id) + 1]) + transactional_id.encode()
    else:
        body = struct.pack(">h", len(transactional_id)) + transactional_id.encode()
    body += struct.pack(">i", 60000) + (struct.pack(">qh", -1, -1) if version >= 3 else b"")
    return header + body + (b"\x00" if flexible else b"")


def _frame(api_key: int, version: int, transactional_id: str = "tx") -> bytes:
    if api_key == ADD_PARTITIONS:
        return _add_partitions(version, transactional_id)
    if api_key == ADD_OFFSETS:
        body: Any = AddOffsetsToTxnRequest(transactional_id, PID, EPOCH, "g")
    elif api_key == END_TXN:
        body = EndTxnRequest(transactional_id, PID, EPOCH, True)
    else:
        return _init(version, transactional_id)
    return encode_request(api_key, version, 5, "c", body)[4:]


def _held_errors(outcomes: TransactionOutcomes, api_key: int, version: int, frame: bytes) -> list[int] | None:
    """The error codes the client gets for a held request, as encoded on the wire (None: it is
    forwarded)."""
    answer = outcomes.held_answer(api_key, version, frame)
    if answer is None:
        return None
    wire = encode_forwarded_response(api_key, version, 5, answer)
    body = decode_forwarded_response(api_key, version, wire)[1]
    if api_key == ADD_PARTITIONS:
        return [
            p.partition_error_code for t in body.results_by_topic_v3_and_below for p in t.results_by_partition
        ]
    return [body.error_code]


def _state(state: str, epoch: int = EPOCH, error: int = 0) -> TransactionState:
    return TransactionState(
        error_code=error,
        transactional_id="tx",
        transaction_state=state,
        producer_id=PID,
        producer_epoch=epoch,
    )


def _committed_offset(h: Harness) -> int:
    return int(h.fetch("g", {"t": [0]}, version=7).wire.topics[0].partitions[0].committed_offset)


CONCURRENT = int(ErrorCode.CONCURRENT_TRANSACTIONS)
HELD_REQUESTS = [
    (api_key, version)
    for api_key in (ADD_PARTITIONS, ADD_OFFSETS, END_TXN, INIT_PRODUCER_ID)
    for version in range(min(FORWARDED_MAX[api_key], 3 if api_key == ADD_PARTITIONS else 99) + 1)
]


@pytest.mark.parametrize(("api_key", "version"), HELD_REQUESTS)
def test_every_transactional_request_of_an_id_with_a_loaded_transaction_is_held(
    h: Harness, api_key: int, version: int
) -> None:
    outcomes = _outcomes(h)
    woken: list[bool] = []
    outcomes.wake = lambda: woken.append(True)
    _pending(h)  # loaded after a restart: neither seen open nor ending here
    assert outcomes.status("tx", KEY) == HELD
    errors = _held_errors(outcomes, api_key, version, _frame(api_key, version))
    assert errors == ([CONCURRENT, CONCURRENT] if api_key == ADD_PARTITIONS else [CONCURRENT])
    assert woken  # the resolver asks now
    assert _held_errors(outcomes, api_key, version, _frame(api_key, version, "other")) is None
    outcomes.seen_open("tx", KEY)  # upstream described it Ongoing: the hold is over
    assert _held_errors(outcomes, api_key, version, _frame(api_key, version)) is None


def test_nothing_is_held_for_transactions_seen_open_here_nor_for_other_requests(h: Harness) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)  # AddOffsetsToTxn seen: open, as on every transaction without a restart
    assert outcomes.status("tx", KEY) == OPEN and not outcomes.held("tx")
    assert outcomes.held_answer(ADD_PARTITIONS, 3, _add_partitions()) is None
    outcomes2 = _outcomes(Harness())
    batch = AddPartitionsToTxnRequest(
        transactions=[
            AddPartitionsToTxnTransaction("tx", PID, EPOCH, True, [AddPartitionsToTxnTopic("o", [0])])
        ]
    )
    # A broker's verification batch (v4+) and an idempotent producer's InitProducerId: never held.
    outcomes2.loading = lambda: True
    assert outcomes2.held_answer(ADD_PARTITIONS, 4, _request(ADD_PARTITIONS, 4, batch)) is None
    assert outcomes2.held_answer(INIT_PRODUCER_ID, 4, _init(4, None)) is None
    txn_offset_commit = TxnOffsetCommitRequest(
        "tx", "g", PID, EPOCH, -1, "", None,
        [TxnOffsetCommitRequestTopic("t", partitions=[TxnOffsetCommitRequestPartition(0, 10)])],
    )  # fmt: skip
    assert outcomes2.held_answer(28, 3, encode_request(28, 3, 1, "c", txn_offset_commit)[4:]) is None


def test_while_the_groups_load_every_transactional_request_is_held(h: Harness) -> None:
    """The pending offsets are not known before the load: any transactional id may have some."""
    loading = [True]
    outcomes = TransactionOutcomes(h.coordinator, _outcomes(h).runtime, lambda: loading[0])
    assert _held_errors(outcomes, ADD_OFFSETS, 3, _frame(ADD_OFFSETS, 3, "any")) == [CONCURRENT]
    assert outcomes.held("any")
    _pending(h)  # what the load finds
    loading[0] = False
    assert _held_errors(outcomes, ADD_OFFSETS, 3, _frame(ADD_OFFSETS, 3, "any")) is None
    assert _held_errors(outcomes, ADD_OFFSETS, 3, _frame(ADD_OFFSETS, 3)) == [CONCURRENT]


class _TransactionCoordinator:
    """Upstream's view of transactional id "tx" under transaction version 1, as in the failing
    restart run: the loaded transaction (epoch 0 here EPOCH) was committed by an EndTxn the
    gateway never saw answered; an AddPartitionsToTxn that reaches upstream opens a NEW
    transaction at the same producer id and epoch, which upstream later times out (CompleteAbort
    at the same epoch, as the failing run showed)."""

    def __init__(self) -> None:
        self.state = _state("CompleteCommit")
        self.forwarded = 0

    def add_partitions(self, outcomes: TransactionOutcomes) -> bool:
        """The client's (retried) AddPartitionsToTxn; whether it reached upstream."""
        if outcomes.held_answer(ADD_PARTITIONS, 3, _add_partitions()) is not None:
            return False
        self.forwarded += 1
        if self.state.transaction_state != "Ongoing":
            self.state = _state("Ongoing")
        return True

    def time_out(self) -> None:
        if self.state.transaction_state == "Ongoing":
            self.state = _state("CompleteAbort")


def test_the_restart_case_a_retried_add_partitions_cannot_make_a_committed_transaction_aborted(
    h: Harness,
) -> None:
    """The exact sequence of the failing restart run: a transaction loaded after the restart, its
    commit decided upstream behind the gateway; the client's AddPartitionsToTxn arrives before
    the resolver asked. It is held, so upstream's first answer is the commit; only then does
    the client's new transaction start, and its Ongoing and its timeout at the same epoch are
    not taken for the loaded transaction's."""
    outcomes = _outcomes(h)
    _pending(h)  # version 1 (TxnOffsetCommit v3)
    upstream = _TransactionCoordinator()
    answers = _Upstream({})
    resolver = _resolver(outcomes, answers)

    def ask() -> None:
        answers.answers["tx"] = upstream.state
        asyncio.run(resolver.resolve_once())

    assert not upstream.add_partitions(outcomes)  # before the resolver asked: held
    ask()
    assert answers.asked == ["tx"] and not _unstable(h) and _committed_offset(h) == 10
    assert outcomes.stats.committed_by_describe == 1 and not outcomes.held("tx")
    assert upstream.add_partitions(outcomes)  # the retry goes on: a new transaction upstream
    ask()  # nothing of "tx" is pending: the new transaction's Ongoing is not asked about
    upstream.time_out()
    h.now_ms += 120_000
    h.wall_ms += 120_000
    ask()
    assert answers.asked == ["tx"] and _committed_offset(h) == 10
    assert outcomes.stats.aborted_by_describe == 0


def test_a_first_answer_still_being_decided_keeps_the_hold(h: Harness) -> None:
    outcomes = _outcomes(h)
    _pending(h)
    upstream = _Upstream({"tx": _state("PrepareCommit")})
    resolver = _resolver(outcomes, upstream)
    asyncio.run(resolver.resolve_once())
    assert outcomes.status("tx", KEY) == HELD and outcomes.held("tx")
    assert _held_errors(outcomes, ADD_PARTITIONS, 3, _add_partitions()) == [CONCURRENT, CONCURRENT]
    upstream.answers["tx"] = _state("CompleteAbort")
    asyncio.run(resolver.resolve_once())
    assert upstream.asked == ["tx", "tx"] and not _unstable(h) and _committed_offset(h) == -1
    assert _held_errors(outcomes, ADD_PARTITIONS, 3, _add_partitions()) is None


def test_a_first_answer_ongoing_is_ours_and_ends_the_hold(h: Harness) -> None:
    """Held since the load, the transaction upstream describes Ongoing at our epoch is ours: no
    later one can have started. It is taken as open (InitProducerId then discards it)."""
    outcomes = _outcomes(h)
    _pending(h)
    asyncio.run(_resolver(outcomes, _Upstream({"tx": _state("Ongoing")})).resolve_once())
    assert outcomes.status("tx", KEY) == OPEN and not outcomes.held("tx")
    assert _unstable(h)


def test_a_transaction_released_without_an_answer_is_never_taken_for_a_later_one(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Upstream cannot describe the transactional id (no permission): holding its requests would
    stop the application for good, so they go on, and from then on what upstream shows at our
    epoch may be a later transaction's (version 1): neither its Ongoing nor its abort is ours."""
    outcomes = _outcomes(h)
    _pending(h)
    upstream = _Upstream({"tx": _state("", error=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)})
    resolver = _resolver(outcomes, upstream)
    with caplog.at_level(logging.WARNING):
        asyncio.run(resolver.resolve_once())
    assert "cannot describe it" in caplog.text
    assert outcomes.status("tx", KEY) == UNKNOWN and not outcomes.held("tx")
    assert outcomes.held_answer(ADD_PARTITIONS, 3, _add_partitions()) is None  # a new transaction opens
    upstream.answers["tx"] = _state("Ongoing")
    asyncio.run(resolver.resolve_once())
    assert outcomes.status("tx", KEY) == UNKNOWN  # not taken as ours
    upstream.answers["tx"] = _state("CompleteAbort")  # the later transaction timed out
    h.now_ms += 120_000
    h.wall_ms += 120_000
    asyncio.run(resolver.resolve_once())
    assert _unstable(h) and outcomes.stats.aborted_by_describe == 0  # pending for an operator
    assert upstream.asked == ["tx", "tx", "tx"]


def test_while_upstream_cannot_be_asked_the_requests_stay_held_and_that_is_logged_once(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes = _outcomes(h)
    _pending(h)
    upstream = _Upstream({"tx": UpstreamError("upstream unreachable")})
    resolver = _resolver(outcomes, upstream)
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            with pytest.raises(UpstreamError):
                asyncio.run(resolver.resolve_once())
            resolver._unreachable(UpstreamError("upstream unreachable"))
            for api_key in (ADD_PARTITIONS, ADD_OFFSETS, END_TXN, INIT_PRODUCER_ID):
                assert _held_errors(outcomes, api_key, 3, _frame(api_key, 3)) is not None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "['tx']" in warnings[0].getMessage()
    holds = [r for r in caplog.records if "are answered CONCURRENT_TRANSACTIONS" in r.getMessage()]
    assert len(holds) == 2  # the hold, once (not per request), and the unreachable upstream, once
    assert outcomes.status("tx", KEY) == HELD and _unstable(h)
    upstream.answers["tx"] = _state("CompleteCommit")
    asyncio.run(resolver.resolve_once())
    assert _committed_offset(h) == 10 and outcomes.held_answer(ADD_OFFSETS, 3, _frame(ADD_OFFSETS, 3)) is None


def test_a_decided_transaction_stays_held_until_its_outcome_is_durable(h: Harness) -> None:
    outcomes = _outcomes(h)
    _pending(h)
    upstream = _Upstream({"tx": _state("CompleteCommit")})
    resolver = _resolver(outcomes, upstream)
    h.fail_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    asyncio.run(resolver.resolve_once())
    assert _unstable(h) and outcomes.held("tx") and outcomes.status("tx", KEY) == HELD
    h.fail_code = None
    asyncio.run(resolver.resolve_once())
    assert _committed_offset(h) == 10 and not outcomes.held("tx")


def test_a_transaction_pending_for_a_while_is_asked_at_once_only_when_held(h: Harness) -> None:
    """The resolver's order is unchanged for open transactions: those wait OPEN_AGE_MS."""
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    resolver: TransactionResolver = _resolver(outcomes, _Upstream({}))
    assert resolver.due(h.now_ms) == []
    h.wall_ms += OPEN_AGE_MS
    assert len(resolver.due(h.now_ms)) == 1
