"""What the gateway learns from the transactional requests it forwards (docs/transactions.md):
EndTxn answered NONE resolves, a refused EndTxn leaves the transaction open, an ambiguous error
leaves it undecided, InitProducerId discards what was open; frames as clients send them."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any, cast

import pytest

from coordinator.gateway.transaction_resolver import ENDING_AGE_MS, OPEN_AGE_MS, TransactionResolver
from coordinator.gateway.transactions import ENDING, HELD, OPEN, UNKNOWN, TransactionOutcomes
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.server.runtime import Runtime
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from protocol.messages.describe_transactions import TransactionState
from protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from protocol.wire import encode_request, encode_response
from tests.coordinator.harness import Harness

ADD_OFFSETS, END_TXN, INIT_PRODUCER_ID = 25, 26, 22
PID, EPOCH = 4000, 2


class _Clock:
    def __init__(self, h: Harness) -> None:
        self.h = h

    def now_ms(self) -> int:
        return self.h.now_ms

    def wall_ms(self) -> int:
        return self.h.wall_ms


class _Runtime:
    """The runtime's two methods the gateway uses, over the core test harness."""

    def __init__(self, h: Harness) -> None:
        self.clock = _Clock(h)
        self.apply = h.apply
        self.later: list[Callable[[], None]] = []

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> None:
        self.later.append(callback)


@pytest.fixture
def h() -> Harness:
    return Harness()


def _outcomes(h: Harness) -> TransactionOutcomes:
    outcomes = TransactionOutcomes(h.coordinator, cast(Runtime, _Runtime(h)))
    assert h.coordinator.accepts_transactional_offsets
    return outcomes


def _pending(h: Harness, epoch: int = EPOCH) -> None:
    request = TxnOffsetCommitRequest(
        "tx", "g", PID, epoch, -1, "", None,
        [TxnOffsetCommitRequestTopic("t", partitions=[TxnOffsetCommitRequestPartition(0, 10)])],
    )  # fmt: skip
    h._call(h.coordinator.txn_commit_offsets, 28, 3, request)


def _exchange(
    outcomes: TransactionOutcomes, api_key: int, version: int, request: bytes, response: bytes
) -> bool:
    """Forward one request and its response; whether the client got the response."""
    seen = outcomes.request(api_key, version, request[4:])
    assert seen is not None
    released: list[bool] = []
    outcomes.response(seen, response, released.append)
    assert len(released) == 1
    return released[0]


def _add_offsets(outcomes: TransactionOutcomes, epoch: int = EPOCH, version: int = 3) -> None:
    request = encode_request(ADD_OFFSETS, version, 1, "c", AddOffsetsToTxnRequest("tx", PID, epoch, "g"))
    assert _exchange(
        outcomes,
        ADD_OFFSETS,
        version,
        request,
        encode_response(ADD_OFFSETS, version, 1, AddOffsetsToTxnResponse()),
    )


def _end_txn(outcomes: TransactionOutcomes, committed: bool, error: int = 0, version: int = 4) -> bool:
    request = encode_request(END_TXN, version, 2, "c", EndTxnRequest("tx", PID, EPOCH, committed))
    response = encode_response(END_TXN, version, 2, EndTxnResponse(error_code=error))
    return _exchange(outcomes, END_TXN, version, request, response)


def _init_producer_id(
    outcomes: TransactionOutcomes, version: int, transactional_id: str | None = "tx"
) -> bool:
    """InitProducerId frames built by hand (no codec: the gateway reads them without one)."""
    flexible = version >= 2
    header = struct.pack(">hhih", INIT_PRODUCER_ID, version, 3, 1) + b"c" + (b"\x00" if flexible else b"")
    if transactional_id is None:
        body = b"\x00" if flexible else struct.pack(">h", -1)
    elif flexible:
        body = bytes([len(transactional_id) + 1]) + transactional_id.encode()
    else:
        body = struct.pack(">h", len(transactional_id)) + transactional_id.encode()
    body += struct.pack(">i", 60000) + (struct.pack(">qh", -1, -1) if version >= 3 else b"")
    body += b"\x00" if flexible else b""
    answer = (
        struct.pack(">i", 3) + (b"\x00" if flexible else b"") + struct.pack(">ihqh", 0, 0, PID, EPOCH + 1)
    )
    answer += b"\x00" if flexible else b""
    request = header + body
    seen = outcomes.request(INIT_PRODUCER_ID, version, request)
    if transactional_id is None:
        assert seen is None
        return True
    assert seen is not None and seen.transactional_id == transactional_id
    released: list[bool] = []
    outcomes.response(seen, struct.pack(">i", len(answer)) + answer, released.append)
    return released[0]


def _unstable(h: Harness) -> bool:
    reply = h.fetch("g", {"t": [0]}, version=7, require_stable=True)
    return bool(reply.wire.topics[0].partitions[0].error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT)


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_answered_none_resolves_before_the_client_hears_it(h: Harness, committed: bool) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    assert _end_txn(outcomes, committed)
    assert not _unstable(h)
    offset = h.fetch("g", {"t": [0]}, version=7).wire.topics[0].partitions[0].committed_offset
    assert offset == (10 if committed else -1)
    assert outcomes.stats.committed_by_end_txn == int(committed)


def test_a_failed_resolution_closes_the_client_connection_instead(h: Harness) -> None:
    outcomes = _outcomes(h)
    _pending(h)
    h.fail_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert not _end_txn(outcomes, True)
    assert _unstable(h) and outcomes.stats.resolution_write_failures == 1


@pytest.mark.parametrize("version", range(6))
def test_init_producer_id_discards_what_was_opened_here(h: Harness, version: int) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    assert _init_producer_id(outcomes, version, transactional_id=None)  # idempotent producer: ignored
    assert _unstable(h)
    assert _init_producer_id(outcomes, version)
    assert not _unstable(h)
    assert outcomes.stats.aborted_by_init_producer_id == 1


def test_a_refused_end_txn_leaves_the_transaction_open(h: Harness) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    assert _end_txn(outcomes, True, error=ErrorCode.PRODUCER_FENCED)
    assert _unstable(h)
    _init_producer_id(outcomes, 4)
    assert not _unstable(h)


def test_an_end_txn_whose_answer_is_ambiguous_is_not_aborted_by_init_producer_id(h: Harness) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    assert _end_txn(outcomes, True, error=ErrorCode.REQUEST_TIMED_OUT)  # may have been decided
    _init_producer_id(outcomes, 4)
    assert _unstable(h)  # upstream may have committed it: only an EndTxn answer resolves it
    assert _end_txn(outcomes, True)  # the client's retry
    assert not _unstable(h)


def test_an_end_txn_in_flight_is_not_aborted_by_init_producer_id(h: Harness) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    request = encode_request(END_TXN, 4, 2, "c", EndTxnRequest("tx", PID, EPOCH, True))
    assert outcomes.request(END_TXN, 4, request[4:]) is not None  # its answer never comes back
    _init_producer_id(outcomes, 4)
    assert _unstable(h)


def test_malformed_frames_teach_nothing(h: Harness) -> None:
    outcomes = _outcomes(h)
    assert outcomes.request(END_TXN, 4, b"\x00\x1a\x00\x04") is None
    seen = outcomes.request(
        ADD_OFFSETS,
        3,
        encode_request(ADD_OFFSETS, 3, 1, "c", AddOffsetsToTxnRequest("tx", PID, EPOCH, "g"))[4:],
    )
    assert seen is not None
    released: list[Any] = []
    outcomes.response(seen, b"\x00\x00\x00\x02\x00", released.append)
    assert released == [True] and outcomes.opened == {}


def test_an_outcome_waits_for_the_groups_to_be_loaded(h: Harness) -> None:
    runtime = _Runtime(h)
    loading = [True]
    outcomes = TransactionOutcomes(h.coordinator, cast(Runtime, runtime), lambda: loading[0])
    _pending(h)
    request = encode_request(END_TXN, 4, 2, "c", EndTxnRequest("tx", PID, EPOCH, True))
    seen = outcomes.request(END_TXN, 4, request[4:])
    assert seen is not None
    released: list[bool] = []
    outcomes.response(seen, encode_response(END_TXN, 4, 2, EndTxnResponse()), released.append)
    assert released == [] and _unstable(h)  # a restart still loading: the answer waits
    loading[0] = False
    while runtime.later:
        runtime.later.pop(0)()
    assert released == [True] and not _unstable(h)


# ---- what the resolver needs (transaction_resolver.py) --------------------------------------


def test_an_end_txn_of_a_transaction_never_seen_open_counts_as_ending(h: Harness) -> None:
    """Pending offsets loaded after a restart: the EndTxn forwarded now may decide them, so the
    resolver must not take an Ongoing answer as proof the transaction is open."""
    outcomes = _outcomes(h)
    _pending(h)
    assert outcomes.status("tx", (PID, EPOCH)) == HELD
    outcomes.release("tx", (PID, EPOCH))  # upstream answered about it (undecided): EndTxns pass
    assert outcomes.status("tx", (PID, EPOCH)) == UNKNOWN
    request = encode_request(END_TXN, 4, 2, "c", EndTxnRequest("tx", PID, EPOCH, True))
    seen = outcomes.request(END_TXN, 4, request[4:])
    assert seen is not None and outcomes.status("tx", (PID, EPOCH)) == ENDING
    outcomes.seen_open("tx", (PID, EPOCH))
    assert outcomes.status("tx", (PID, EPOCH)) == ENDING
    released: list[bool] = []
    refused = encode_response(END_TXN, 4, 2, EndTxnResponse(error_code=ErrorCode.PRODUCER_FENCED))
    outcomes.response(seen, refused, released.append)
    assert released == [True]
    assert outcomes.status("tx", (PID, EPOCH)) == UNKNOWN  # never seen open: not open now either
    _init_producer_id(outcomes, 4)
    assert _unstable(h)


def test_a_transaction_described_open_is_discarded_by_init_producer_id(h: Harness) -> None:
    outcomes = _outcomes(h)
    _pending(h)
    outcomes.seen_open("tx", (PID, EPOCH))
    assert outcomes.status("tx", (PID, EPOCH)) == OPEN
    assert _init_producer_id(outcomes, 4)
    assert not _unstable(h)


@pytest.mark.parametrize("committed", [True, False])
def test_an_outcome_described_upstream_resolves(h: Harness, committed: bool) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    released: list[bool] = []
    outcomes.described("tx", (PID, EPOCH), committed, released.append)
    assert released == [True] and not _unstable(h)
    offset = h.fetch("g", {"t": [0]}, version=7).wire.topics[0].partitions[0].committed_offset
    assert offset == (10 if committed else -1)
    assert (outcomes.stats.committed_by_describe, outcomes.stats.aborted_by_describe) == (
        (1, 0) if committed else (0, 1)
    )
    assert outcomes.opened == {} and not outcomes.held("tx")


class _Upstream:
    """DescribeTransactions answers by transactional id, counted (an exception: unreachable)."""

    def __init__(self, answers: dict[str, TransactionState | Exception]) -> None:
        self.answers = answers
        self.asked: list[str] = []


class _AskingFake(TransactionResolver):
    upstream_answers: _Upstream

    async def describe(self, transactional_id: str) -> TransactionState:
        self.upstream_answers.asked.append(transactional_id)
        answer = self.upstream_answers.answers[transactional_id]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _resolver(outcomes: TransactionOutcomes, upstream: _Upstream) -> TransactionResolver:
    resolver = _AskingFake(outcomes, cast(UpstreamCluster, None), lambda: False)
    resolver.upstream_answers = upstream
    return resolver


def test_the_resolver_asks_at_once_after_a_restart_and_decides(h: Harness) -> None:
    outcomes = _outcomes(h)
    _pending(h)
    committed = TransactionState(transactional_id="tx", transaction_state="CompleteCommit", producer_id=PID)
    committed.producer_epoch = EPOCH
    upstream = _Upstream({"tx": committed})
    asyncio.run(_resolver(outcomes, upstream).resolve_once())
    assert upstream.asked == ["tx"] and not _unstable(h)
    assert h.fetch("g", {"t": [0]}, version=7).wire.topics[0].partitions[0].committed_offset == 10


def test_the_resolver_leaves_young_open_and_ending_transactions_alone(h: Harness) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    upstream = _Upstream({})
    resolver = _resolver(outcomes, upstream)
    asyncio.run(resolver.resolve_once())
    request = encode_request(END_TXN, 4, 2, "c", EndTxnRequest("tx", PID, EPOCH, True))
    assert outcomes.request(END_TXN, 4, request[4:]) is not None  # its answer never comes back
    asyncio.run(resolver.resolve_once())
    assert upstream.asked == []
    h.now_ms += ENDING_AGE_MS
    upstream.answers["tx"] = TransactionState(
        transactional_id="tx", transaction_state="CompleteAbort", producer_id=PID, producer_epoch=EPOCH
    )
    asyncio.run(resolver.resolve_once())
    assert upstream.asked == ["tx"] and not _unstable(h)
    assert outcomes.stats.aborted_by_describe == 1


def test_a_transaction_seen_open_and_moved_past_upstream_is_aborted(h: Harness) -> None:
    outcomes = _outcomes(h)
    _add_offsets(outcomes)
    _pending(h)
    h.wall_ms += OPEN_AGE_MS
    upstream = _Upstream(
        {
            "tx": TransactionState(
                transactional_id="tx", transaction_state="Empty", producer_id=PID, producer_epoch=EPOCH + 1
            )
        }
    )
    asyncio.run(_resolver(outcomes, upstream).resolve_once())
    assert upstream.asked == ["tx"] and not _unstable(h)
    assert outcomes.stats.aborted_by_describe == 1
