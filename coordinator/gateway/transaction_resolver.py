"""Asking the upstream transaction coordinator about pending transactional offsets whose outcome
the gateway did not learn from the requests passing through it (docs/transactions.md, the
resolver).

An EndTxn answer can be lost (the client died after the gateway forwarded EndTxn, the gateway
was restarted in between), and after a restart the gateway does not know which transactions
were open. Every few seconds the resolver takes the pending transactions (producer id, epoch,
transactional id and transaction version are stored with the pending offsets) and asks the
transactional id's coordinator (FindCoordinator, key type TRANSACTION) with
DescribeTransactions. ``decide`` turns the answer into an outcome only where it is unambiguous;
everything else waits, or stays pending for an operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from coordinator.core.txn_offsets import OpenTransaction
from coordinator.gateway.transactions import ENDING, HELD, OPEN, UNKNOWN, ProducerEpoch, TransactionOutcomes
from coordinator.gateway.upstream import CLIENT_ID, UpstreamConnection, UpstreamError
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.gateway.versions import DESCRIBE_TRANSACTIONS
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.gateway_wire import decode_forwarded_response, encode_forwarded
from protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    TransactionState,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.primitives import DecodeError

log = logging.getLogger(__name__)

PASS_INTERVAL_S: Final = 2.0
LOADING_POLL_S: Final = 0.05
# How long an EndTxn's answer may take before upstream is asked instead.
ENDING_AGE_MS: Final = 5_000
# An open transaction is asked about once it is this old (upstream may have timed it out).
OPEN_AGE_MS: Final = 15_000
# A transaction upstream's answer cannot decide is asked about again this rarely.
UNDECIDED_RETRY_MS: Final = 60_000
# After a pass that could not reach upstream, the next waits at least this long (held requests,
# retried by their clients, wake the resolver far more often).
FAILED_PASS_GAP_S: Final = 0.5
# Answers that say upstream could answer later: a HELD transaction stays held meanwhile. Any
# other error (no DescribeTransactions, no permission) can never be answered, and holding its
# producer's requests would stop the application for good: it is released, undecided.
_ASK_AGAIN: Final = frozenset(
    {
        int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
        int(ErrorCode.NOT_COORDINATOR),
        int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        int(ErrorCode.REQUEST_TIMED_OUT),
        int(ErrorCode.NETWORK_EXCEPTION),
        int(ErrorCode.CONCURRENT_TRANSACTIONS),
    }
)
TRANSACTION_KEY_TYPE: Final = 1
_HEADER: Final = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_LENGTH: Final = struct.Struct(">i")
_CORRELATION: Final = itertools.count(1)

ONGOING: Final = "Ongoing"
PREPARING: Final = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
COMPLETE_COMMIT: Final = "CompleteCommit"
COMPLETE_ABORT: Final = "CompleteAbort"


class Verdict(Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    OPEN = "open"  # Ongoing at its epoch and no EndTxn forwarded: no EndTxn reached upstream
    WAIT = "wait"  # being decided, or the question failed: ask again later
    UNDECIDED = "undecided"  # upstream moved on and cannot tell commit from abort


def decide(
    producer_id: int,
    epoch: int,
    transaction_version: int,
    status: str,
    answer: TransactionState,
) -> Verdict:
    """The outcome of the transaction (producer id, epoch) that DescribeTransactions' answer
    proves (docs/transactions.md, the resolver's table). ``status``: what the gateway knows
    (OPEN, ENDING, HELD, UNKNOWN: transactions.py)."""
    # Seen open and no EndTxn forwarded since: it cannot have committed (every EndTxn of the
    # application passes through the gateway), so once upstream moved past it, it was aborted
    # (a fencing InitProducerId, a transaction timeout).
    moved_on = Verdict.ABORTED if status == OPEN else Verdict.UNDECIDED
    if answer.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return moved_on
    if answer.error_code != ErrorCode.NONE:
        return Verdict.WAIT
    if answer.producer_id != producer_id:
        return moved_on
    state, described_epoch = answer.transaction_state, answer.producer_epoch
    # Version 1 keeps the epoch from one transaction to the next: what upstream shows at our
    # epoch is ours only if no later transaction can have started since ours ended. Open here,
    # ending here or HELD (every transactional request of the id held since it was loaded),
    # none can (docs/transactions.md, the hold); released from the hold, one may have.
    same_epoch_is_ours = transaction_version != 1 or status != UNKNOWN
    if described_epoch == epoch and state == ONGOING:
        if status == ENDING:
            return Verdict.WAIT
        return Verdict.OPEN if same_epoch_is_ours else Verdict.UNDECIDED
    if state in PREPARING and described_epoch in (epoch, epoch + 1):
        return Verdict.WAIT
    # Version 1: the completion at our epoch is ours (as above). Version 2 completes every
    # transaction at epoch + 1 (KIP-890) and a later one at epoch + 2 or more.
    completes_at = epoch if transaction_version == 1 else epoch + 1
    if described_epoch == completes_at and state in (COMPLETE_COMMIT, COMPLETE_ABORT):
        if not same_epoch_is_ours:
            return Verdict.UNDECIDED
        return Verdict.COMMITTED if state == COMPLETE_COMMIT else Verdict.ABORTED
    return moved_on


@dataclass(slots=True)
class TransactionResolver:
    outcomes: TransactionOutcomes
    upstream: UpstreamCluster
    loading: Callable[[], bool]
    _task: asyncio.Task[None] | None = None
    # (producer id, epoch) -> when upstream's answer last left it undecided (monotonic ms).
    _undecided: dict[ProducerEpoch, int] = field(default_factory=dict)
    _in_flight: set[ProducerEpoch] = field(default_factory=set)
    _woken: asyncio.Event | None = None
    _unreachable_logged: bool = False

    def start(self) -> None:
        self._woken = asyncio.Event()
        self.outcomes.wake = self._woken.set
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        woken = self._woken
        assert woken is not None
        while True:
            # A restart: the first pass as soon as the groups are loaded (transactions whose
            # state was lost hold back their producers' transactional requests until asked about).
            if self.loading():
                await asyncio.sleep(LOADING_POLL_S)
                continue
            woken.clear()
            failed = False
            try:
                await self.resolve_once()
            except (UpstreamError, DecodeError, OSError) as exc:
                failed = True
                self._unreachable(exc)
            except Exception:
                failed = True
                log.exception("asking upstream about pending transactions failed")
            else:
                if self._unreachable_logged:
                    self._unreachable_logged = False
                    log.info("upstream answers about pending transactions again")
            if failed:
                await asyncio.sleep(FAILED_PASS_GAP_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), PASS_INTERVAL_S)

    def _unreachable(self, exc: Exception) -> None:
        """Logged once until upstream answers again (a pass fails every few seconds meanwhile)."""
        if self._unreachable_logged:
            log.debug("asking upstream about pending transactions failed: %s", exc)
            return
        self._unreachable_logged = True
        holding = self.outcomes.holding
        held = "all (the groups are loading)" if holding is None else sorted(holding) or "none"
        log.warning(
            "asking upstream about pending transactions failed: %s; they stay pending, and the "
            "transactional requests of transactional ids %s are answered CONCURRENT_TRANSACTIONS "
            "(retriable) until upstream answers",
            exc, held,
        )  # fmt: skip

    def due(self, now_ms: int) -> list[OpenTransaction]:
        """The pending transactions to ask upstream about now, one per (producer id, epoch)."""
        outcomes = self.outcomes
        pending = outcomes.coordinator.open_transactions()
        keys = {(t.producer_id, t.producer_epoch) for t in pending}
        outcomes.forget_ending(lambda key: key in keys)
        for key in [k for k in self._undecided if k not in keys]:
            del self._undecided[key]
        outcomes.refresh_holding()
        chosen: dict[ProducerEpoch, OpenTransaction] = {}
        for txn in pending:
            key = (txn.producer_id, txn.producer_epoch)
            if key in chosen or key in self._in_flight:
                continue
            undecided_ms = self._undecided.get(key)
            if undecided_ms is not None and now_ms - undecided_ms < UNDECIDED_RETRY_MS:
                continue
            status = outcomes.status(txn.transactional_id, key)
            if status == ENDING:
                since = outcomes.ending_since.get(key, now_ms)
                if now_ms - since < ENDING_AGE_MS:
                    continue
            elif status == OPEN and outcomes.runtime.clock.wall_ms() - txn.first_commit_ms < OPEN_AGE_MS:
                continue
            chosen[key] = txn
        return list(chosen.values())

    async def resolve_once(self) -> None:
        clock = self.outcomes.runtime.clock
        for txn in self.due(clock.now_ms()):
            key = (txn.producer_id, txn.producer_epoch)
            answer = await self.describe(txn.transactional_id)  # raises: asked again next pass
            status = self.outcomes.status(txn.transactional_id, key)
            verdict = decide(txn.producer_id, txn.producer_epoch, txn.transaction_version, status, answer)
            self._apply(txn, status, verdict, answer)
            if status == HELD:
                self._end_hold(txn, verdict, answer)

    def _end_hold(self, txn: OpenTransaction, verdict: Verdict, answer: TransactionState) -> None:
        """After the first answer about a HELD transaction: an OPEN or a decided one left the hold
        in ``_apply`` (a decided one once its outcome is durable); an undecided one is released;
        a WAIT stays held, unless upstream can never answer."""
        key = (txn.producer_id, txn.producer_epoch)
        if verdict is Verdict.UNDECIDED:
            self.outcomes.release(txn.transactional_id, key)
        elif verdict is Verdict.WAIT and answer.error_code not in (ErrorCode.NONE, *_ASK_AGAIN):
            log.warning(
                "transaction %s (producer id %d epoch %d) has pending offsets of unknown state and "
                "upstream cannot describe it (error %d): its transactional id's requests go on, "
                "and its offsets stay pending until an EndTxn answer or an operator decides",
                txn.transactional_id, txn.producer_id, txn.producer_epoch, answer.error_code,
            )  # fmt: skip
            self.outcomes.release(txn.transactional_id, key)

    def _apply(self, txn: OpenTransaction, status: str, verdict: Verdict, answer: TransactionState) -> None:
        key = (txn.producer_id, txn.producer_epoch)
        outcomes = self.outcomes
        if verdict is Verdict.OPEN:
            outcomes.seen_open(txn.transactional_id, key)
        elif verdict is Verdict.UNDECIDED:
            if key not in self._undecided:
                log.warning(
                    "transaction %s (producer id %d epoch %d, version %d, %s) has pending offsets "
                    "and upstream describes it %s at producer id %d epoch %d: the outcome cannot be "
                    "told; the offsets stay pending for an operator",
                    txn.transactional_id, txn.producer_id, txn.producer_epoch,
                    txn.transaction_version, status, answer.transaction_state or answer.error_code,
                    answer.producer_id, answer.producer_epoch,
                )  # fmt: skip
            self._undecided[key] = outcomes.runtime.clock.now_ms()
        elif verdict in (Verdict.COMMITTED, Verdict.ABORTED):
            committed = verdict is Verdict.COMMITTED
            log.info(
                "transaction %s (producer id %d epoch %d) %s upstream (DescribeTransactions): "
                "its pending offsets are %s",
                txn.transactional_id, txn.producer_id, txn.producer_epoch,
                "committed" if committed else "aborted", "applied" if committed else "discarded",
            )  # fmt: skip
            self._in_flight.add(key)
            outcomes.described(txn.transactional_id, key, committed, lambda ok: self._in_flight.discard(key))

    async def describe(self, transactional_id: str) -> TransactionState:
        """DescribeTransactions of one transactional id at its coordinator (an error answer
        when the coordinator cannot be found)."""
        upstream = self.upstream
        timeout_s = upstream.timeout_s
        known = upstream.api_versions
        if known is not None and DESCRIBE_TRANSACTIONS not in known:
            return TransactionState(error_code=ErrorCode.UNSUPPORTED_VERSION)  # the offsets wait
        find_version = upstream.version_for(ApiKey.FIND_COORDINATOR)
        if find_version >= 4:
            find = FindCoordinatorRequest(key_type=TRANSACTION_KEY_TYPE, coordinator_keys=[transactional_id])
        else:
            find = FindCoordinatorRequest(key=transactional_id, key_type=TRANSACTION_KEY_TYPE)
        any_broker = await upstream.connection_to(None)
        found = await any_broker.request(ApiKey.FIND_COORDINATOR, find_version, find, timeout_s)
        if find_version >= 4:
            if not found.coordinators:
                return TransactionState(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
            error_code, node_id = found.coordinators[0].error_code, found.coordinators[0].node_id
        else:
            error_code, node_id = found.error_code, found.node_id
        if error_code != ErrorCode.NONE:
            return TransactionState(error_code=error_code)
        coordinator = await upstream.connection_to(node_id)
        response = await _describe_transactions(coordinator, transactional_id, timeout_s)
        for state in response.transaction_states:
            if state.transactional_id == transactional_id:
                return state
        return TransactionState(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)


async def _describe_transactions(
    connection: UpstreamConnection, transactional_id: str, timeout_s: float
) -> DescribeTransactionsResponse:
    """DescribeTransactions v0 (flexible; its codec is the gateway's, protocol/gateway_wire.py)."""
    client_id = CLIENT_ID.encode()
    header = _HEADER.pack(DESCRIBE_TRANSACTIONS, 0, next(_CORRELATION), len(client_id)) + client_id + b"\x00"
    request = DescribeTransactionsRequest(transactional_ids=[transactional_id])
    frame = encode_forwarded(header, len(header), request)
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def done(answer: bytes) -> None:
        if not future.done():
            future.set_result(answer)

    connection.send(_LENGTH.pack(len(frame)) + frame, done)
    try:
        answer = await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        connection.close(f"no DescribeTransactions answer within {timeout_s:.0f} s")
        raise UpstreamError(f"{connection.label} did not answer DescribeTransactions") from None
    body: DescribeTransactionsResponse = decode_forwarded_response(DESCRIBE_TRANSACTIONS, 0, answer)[1]
    return body


__all__ = ["ENDING", "HELD", "OPEN", "UNKNOWN", "TransactionResolver", "Verdict", "decide"]
