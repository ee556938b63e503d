"""Learning transaction outcomes in gateway mode (docs/transactions.md).

The upstream transaction coordinator writes its commit and abort markers to the upstream's
``__consumer_offsets``, which the gateway never reads. The producer's transactional requests
pass through the gateway instead, and tell it what it needs:

- AddOffsetsToTxn (forwarded): on success, (transactional id, producer id, epoch) has a
  transaction that may carry offsets to a group here;
- TxnOffsetCommit (served here): the offsets, pending in the core for (group, producer id);
- EndTxn (forwarded): once upstream answers NONE the outcome is decided; the pending offsets
  are materialised (commit) or discarded (abort), and only when that is durable does the
  EndTxn response go back to the client. A write that fails closes the client's connection
  instead: the producer retries EndTxn, upstream answers it again, the gateway tries again;
- InitProducerId (forwarded) for a transactional id, answered NONE: any transaction of that id
  still open upstream has been aborted by it (a fenced zombie, a restarted producer, or an
  abortable error's epoch bump). Transactions this gateway saw opened (AddOffsetsToTxn) and
  never saw an EndTxn for are discarded. One whose EndTxn went upstream without its answer
  coming back may have committed: it stays pending (docs/transactions.md, open cases).

Pending offsets of a transaction neither seen open nor ending here (loaded after a restart)
hold back every transactional request of their transactional id (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: answered CONCURRENT_TRANSACTIONS, which clients
retry) until upstream has answered the resolver about it, so that the answer is about that
transaction and not a later one at the same producer epoch (docs/transactions.md, the hold).

The forwarder asks ``held_answer`` first, calls ``request`` for the frames of these APIs and
hands their responses to ``response``; everything else passes through untouched.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.txn_offsets import Resolution
from coordinator.gateway.versions import ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID
from coordinator.server.runtime import Runtime
from protocol.errors import ErrorCode
from protocol.gateway_wire import decode_forwarded
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from protocol.messages.end_txn import EndTxnResponse
from protocol.messages.init_producer_id import InitProducerIdResponse
from protocol.primitives import DecodeError, read_uvarint, skip_tagged_fields
from protocol.wire import decode_request, decode_response

log = logging.getLogger(__name__)

LOADING_RETRY_MS: Final = 50
OBSERVED: Final = frozenset({ADD_OFFSETS_TO_TXN, END_TXN, INIT_PRODUCER_ID})
# The transactional requests a transaction of unknown state holds back (docs/transactions.md, the
# hold). Clients send AddPartitionsToTxn up to v3; v4+ are the brokers' own (KIP-890).
HELD_APIS: Final = frozenset({ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, INIT_PRODUCER_ID})
ADD_PARTITIONS_CLIENT_MAX: Final = 3
_INT16: Final = struct.Struct(">h")
_INIT_PRODUCER_ID_ANSWER: Final = struct.Struct(">ihqh")  # throttle, error, producer id, epoch
# EndTxn errors Kafka's transaction coordinator answers before changing the transaction.
_REFUSED_UNCHANGED: Final = frozenset(
    {
        int(ErrorCode.INVALID_PRODUCER_EPOCH),
        int(ErrorCode.PRODUCER_FENCED),
        int(ErrorCode.INVALID_TXN_STATE),
        int(ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    }
)
_MALFORMED: Final = (DecodeError, struct.error, IndexError, UnicodeDecodeError, ValueError)

OPEN: Final = "open"
ENDING: Final = "ending"
HELD: Final = "held"
UNKNOWN: Final = "unknown"
DESCRIBE_TRANSACTIONS_NAME: Final = "DescribeTransactions"

Release = Callable[[bool], None]  # True: send the response to the client; False: close instead
ProducerEpoch = tuple[int, int]  # (producer id, producer epoch)


@dataclass(frozen=True, slots=True)
class Observed:
    """What a forwarded transactional request said, kept until its response arrives."""

    api_key: int
    api_version: int
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    committed: bool = False


@dataclass(slots=True)
class TransactionStats:
    """Resolutions by outcome and by how the gateway learned it (docs/observability.md)."""

    committed_by_end_txn: int = 0
    aborted_by_end_txn: int = 0
    aborted_by_init_producer_id: int = 0
    committed_by_describe: int = 0
    aborted_by_describe: int = 0
    partitions_committed: int = 0
    partitions_aborted: int = 0
    resolution_write_failures: int = 0


@dataclass(slots=True)
class TransactionOutcomes:
    coordinator: GroupCoordinator
    runtime: Runtime
    # Whether groups are still being loaded (a restart loads them in the background): an
    # outcome waits for the load, else the pending offsets it resolves would not be there yet.
    loading: Callable[[], bool] = lambda: False
    # transactional id -> (producer id, epoch) of transactions opened through this gateway
    # (AddOffsetsToTxn answered NONE) that no EndTxn may have ended yet.
    opened: dict[str, set[ProducerEpoch]] = field(default_factory=dict)
    # Transactions opened here with EndTxns forwarded and not answered NONE (in flight, lost,
    # or answered an error that may hide a decision), counted: only an EndTxn answer resolves
    # them. One refused before it changed anything upstream is uncounted, and at zero the
    # transaction is taken as open again.
    ending: dict[ProducerEpoch, int] = field(default_factory=dict)
    ending_since: dict[ProducerEpoch, int] = field(default_factory=dict)  # first EndTxn forwarded
    # Ending transactions that were open before their EndTxn: open again if every EndTxn is
    # refused unchanged (one that was never seen open stays unknown).
    reopen: set[ProducerEpoch] = field(default_factory=set)
    stats: TransactionStats = field(default_factory=TransactionStats)
    # Transactions whose outcome is being written (the resolver leaves them alone meanwhile).
    resolving: set[ProducerEpoch] = field(default_factory=set)
    # Transactions neither seen open nor ending here whose hold is over: upstream's answer to
    # the resolver's first question decided them, or upstream can never answer it (no
    # DescribeTransactions, no permission). Any other such transaction is HELD.
    released: set[ProducerEpoch] = field(default_factory=set)
    # transactional id -> its HELD transactions, as last computed (None: to compute again; while
    # groups load every transactional request is held, the pending offsets not known yet).
    holding: dict[str, set[ProducerEpoch]] | None = None
    # Transactional ids whose hold was logged (once per hold, not per request).
    hold_logged: set[str] = field(default_factory=set)
    # Called when a request was held (the resolver asks upstream now).
    wake: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        self.coordinator.accepts_transactional_offsets = True

    # ---- requests ----------------------------------------------------------------------------
    def request(self, api_key: int, version: int, frame: bytes) -> Observed | None:
        """The request of an observed API (None: not observed, or nothing to learn from it)."""
        if api_key not in OBSERVED:
            return None
        try:
            if api_key == INIT_PRODUCER_ID:
                transactional_id = _init_producer_id_transactional_id(frame, version)
                return None if not transactional_id else Observed(api_key, version, transactional_id)
            body = decode_request(frame).body
        except _MALFORMED:
            return None  # upstream answers the malformed request; nothing is learned from it
        if api_key == END_TXN:
            # From here the transaction's outcome may be decided upstream: a fencing
            # InitProducerId no longer proves an abort (until upstream refuses this EndTxn).
            # Every EndTxn is counted, also of a transaction this process did not see opened
            # (pending offsets loaded after a restart): the resolver must not take it as open.
            key = (body.producer_id, body.producer_epoch)
            if self._forget(body.transactional_id, key):
                self.reopen.add(key)
            self.ending[key] = self.ending.get(key, 0) + 1
            self.ending_since.setdefault(key, self.runtime.clock.now_ms())
            return Observed(
                api_key,
                version,
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                bool(body.committed),
            )
        return Observed(api_key, version, body.transactional_id, body.producer_id, body.producer_epoch)

    def held_answer(self, api_key: int, version: int, frame: bytes) -> object | None:
        """The answer (CONCURRENT_TRANSACTIONS, retriable) for a transactional request that must
        wait instead of being forwarded; None to forward it. Its transactional id has pending
        offsets of a transaction neither seen open nor ending here (a restart lost that) and
        upstream has not answered about it yet: forwarded now, the request could end that
        transaction upstream (InitProducerId, EndTxn) or, under transaction version 1, open a
        later one at the same producer epoch (AddPartitionsToTxn, AddOffsetsToTxn), and the
        resolver could no longer tell ours from it (docs/transactions.md, the hold)."""
        if api_key not in HELD_APIS:
            return None
        holding = self._holding()
        if holding is not None and not holding:
            return None  # nothing held: no decoding on the common path
        try:
            transactional_id, body = _transactional_id(api_key, version, frame)
        except _MALFORMED:
            return None  # upstream answers the malformed request
        if not transactional_id:
            return None
        if holding is None:
            why = "the groups are loading"
        elif transactional_id in holding:
            why = f"upstream has not answered about {sorted(holding[transactional_id])} yet"
        else:
            return None
        if transactional_id not in self.hold_logged:
            self.hold_logged.add(transactional_id)
            log.info(
                "transactional id %s: its transactional requests are answered "
                "CONCURRENT_TRANSACTIONS (retriable) until the pending transaction of unknown "
                "state is asked about upstream: %s",
                transactional_id, why,
            )  # fmt: skip
        self.wake()
        return _concurrent_transactions(api_key, body)

    def held(self, transactional_id: str) -> bool:
        """Whether the transactional id's requests are held now (the resolver's and tests' view)."""
        holding = self._holding()
        return holding is None or transactional_id in holding

    def _holding(self) -> dict[str, set[ProducerEpoch]] | None:
        if self.loading():
            self.holding = None
            return None
        if self.holding is None:
            self.refresh_holding()
        return self.holding

    def refresh_holding(self) -> None:
        """Recomputes which transactional ids are held (the resolver does at every pass)."""
        if self.loading():
            self.holding = None
            return
        pending = self.coordinator.open_transactions()
        keys = {(txn.producer_id, txn.producer_epoch) for txn in pending}
        self.released &= keys
        holding: dict[str, set[ProducerEpoch]] = {}
        for txn in pending:
            key = (txn.producer_id, txn.producer_epoch)
            if self.status(txn.transactional_id, key) == HELD:
                holding.setdefault(txn.transactional_id, set()).add(key)
        self.hold_logged &= holding.keys()
        self.holding = holding

    def release(self, transactional_id: str, key: ProducerEpoch) -> None:
        """The resolver's first question about a HELD transaction was answered (or can never be):
        its transactional id's requests go on, and later answers are read without the hold."""
        self.released.add(key)
        self._unhold(transactional_id, key)

    def _unhold(self, transactional_id: str, key: ProducerEpoch) -> None:
        holding = self.holding
        if holding is None or key not in holding.get(transactional_id, ()):
            return
        holding[transactional_id].discard(key)
        if not holding[transactional_id]:
            del holding[transactional_id]
            if transactional_id in self.hold_logged:
                self.hold_logged.discard(transactional_id)
                log.info("transactional id %s: its transactional requests go on", transactional_id)

    # ---- responses ---------------------------------------------------------------------------
    def response(self, seen: Observed, frame: bytes, release: Release) -> None:
        """``frame``: the upstream response with its length prefix. ``release`` is called once,
        when the client may have it."""
        try:
            if seen.api_key == INIT_PRODUCER_ID:
                error_code, producer_id, epoch = _init_producer_id_answer(frame[4:], seen.api_version)
            else:
                error_code = decode_response(seen.api_key, seen.api_version, frame[4:])[1].error_code
        except _MALFORMED:
            release(True)  # the client gets upstream's bytes and judges them; nothing learned
            return
        if error_code != 0:
            if seen.api_key == END_TXN:
                self._end_txn_refused(seen, error_code)
            release(True)
            return
        if seen.api_key == ADD_OFFSETS_TO_TXN:
            self.opened.setdefault(seen.transactional_id, set()).add((seen.producer_id, seen.producer_epoch))
            release(True)
        elif seen.api_key == END_TXN:
            self._ended((seen.producer_id, seen.producer_epoch))
            self._resolve(seen.producer_id, seen.producer_epoch, seen.committed, "EndTxn", release)
        else:
            self._fenced(seen.transactional_id, producer_id, epoch, release)

    def _fenced(self, transactional_id: str, producer_id: int, epoch: int, release: Release) -> None:
        """InitProducerId answered NONE: the id's open transactions were aborted upstream."""
        aborted = sorted(self.opened.pop(transactional_id, set()))
        if not aborted:
            release(True)
            return
        log.info(
            "transactional id %s re-initialised (producer id %d epoch %d): aborting %s",
            transactional_id, producer_id, epoch, aborted,
        )  # fmt: skip
        remaining = len(aborted)
        failed = False

        def one_done(ok: bool) -> None:
            nonlocal remaining, failed
            remaining -= 1
            failed = failed or not ok
            if remaining == 0:
                release(not failed)

        for pid, old_epoch in aborted:
            self._resolve(pid, old_epoch, False, "InitProducerId", one_done)

    def _resolve(self, producer_id: int, epoch: int, committed: bool, how: str, release: Release) -> None:
        if self.loading():
            self.runtime.call_later(
                LOADING_RETRY_MS, lambda: self._resolve(producer_id, epoch, committed, how, release)
            )
            return
        stats = self.stats
        clock = self.runtime.clock
        key = (producer_id, epoch)
        self.resolving.add(key)

        def resolved(resolution: Resolution) -> None:
            self.resolving.discard(key)
            if resolution.error_code:
                stats.resolution_write_failures += 1
                log.warning(
                    "transaction of producer %d epoch %d: the %s outcome could not be written "
                    "(error %d); the client retries",
                    producer_id, epoch, "commit" if committed else "abort", resolution.error_code,
                )  # fmt: skip
                release(False)
                return
            if how == DESCRIBE_TRANSACTIONS_NAME:
                if committed:
                    stats.committed_by_describe += 1
                else:
                    stats.aborted_by_describe += 1
            elif committed:
                stats.committed_by_end_txn += 1
            elif how == "EndTxn":
                stats.aborted_by_end_txn += 1
            else:
                stats.aborted_by_init_producer_id += 1
            if committed:
                stats.partitions_committed += resolution.partitions
            else:
                stats.partitions_aborted += resolution.partitions
            release(True)

        result = self.coordinator.complete_transaction(
            producer_id, epoch, committed, _Callback(resolved), clock.now_ms(), clock.wall_ms()
        )
        self.runtime.apply(result)

    def _end_txn_refused(self, seen: Observed, error_code: int) -> None:
        """An EndTxn refused before it changed anything upstream leaves the transaction open as
        it was; any other error may hide a decision (a timeout, a coordinator move)."""
        key = (seen.producer_id, seen.producer_epoch)
        if error_code not in _REFUSED_UNCHANGED or key not in self.ending:
            return
        self.ending[key] -= 1
        if self.ending[key] == 0:
            was_open = key in self.reopen
            self._ended(key)
            if was_open:
                self.opened.setdefault(seen.transactional_id, set()).add(key)

    def _ended(self, key: ProducerEpoch) -> None:
        self.ending.pop(key, None)
        self.ending_since.pop(key, None)
        self.reopen.discard(key)

    # ---- what the resolver learns (transaction_resolver.py) ----------------------------------
    def status(self, transactional_id: str, key: ProducerEpoch) -> str:
        """OPEN: seen open (AddOffsetsToTxn, or upstream describing it Ongoing) and no EndTxn
        forwarded since; ENDING: an EndTxn forwarded and not answered NONE (or its outcome being
        written); HELD: neither (loaded after a restart, or never seen opened) and upstream has
        not answered about it yet, its transactional id's requests held meanwhile; UNKNOWN:
        neither, and released from the hold (docs/transactions.md, the hold)."""
        if key in self.ending or key in self.resolving:
            return ENDING
        if key in self.opened.get(transactional_id, ()):
            return OPEN
        if key in self.released:
            return UNKNOWN
        return HELD

    def seen_open(self, transactional_id: str, key: ProducerEpoch) -> None:
        """Upstream describes the transaction Ongoing and no EndTxn was forwarded for it."""
        if key not in self.ending:
            self.opened.setdefault(transactional_id, set()).add(key)
            self._unhold(transactional_id, key)

    def described(self, transactional_id: str, key: ProducerEpoch, committed: bool, release: Release) -> None:
        """Upstream's DescribeTransactions decided the transaction (transaction_resolver.py). A
        HELD transaction stays held until its outcome is durable (a failed write asks again)."""
        self._forget(transactional_id, key)
        self._ended(key)

        def written(ok: bool) -> None:
            if ok:
                self._unhold(transactional_id, key)
            release(ok)

        self._resolve(key[0], key[1], committed, DESCRIBE_TRANSACTIONS_NAME, written)

    def forget_ending(self, keep: Callable[[ProducerEpoch], bool]) -> None:
        """Drops EndTxns counted for transactions with no pending offsets here any more."""
        for key in [k for k in self.ending if not keep(k)]:
            self._ended(key)

    def _forget(self, transactional_id: str, producer_epoch: ProducerEpoch) -> bool:
        """Whether the transaction was open (and is no longer taken as such)."""
        opened = self.opened.get(transactional_id)
        if opened is None or producer_epoch not in opened:
            return False
        opened.discard(producer_epoch)
        if not opened:
            del self.opened[transactional_id]
        return True


class _Callback:
    """A ReplyTo that hands the core's Resolution to a function."""

    __slots__ = ("function",)

    def __init__(self, function: Callable[[Resolution], None]) -> None:
        self.function = function

    def send(self, response: object) -> None:
        if isinstance(response, Resolution):
            self.function(response)


def _transactional_id(api_key: int, version: int, frame: bytes) -> tuple[str | None, Any]:
    """(transactional id, decoded body) of a request of HELD_APIS (no body for InitProducerId,
    read without a codec)."""
    if api_key == INIT_PRODUCER_ID:
        return _init_producer_id_transactional_id(frame, version), None
    if api_key == ADD_PARTITIONS_TO_TXN and version > ADD_PARTITIONS_CLIENT_MAX:
        return None, None  # a broker's batch (verification), not a client's request
    body = decode_forwarded(frame)[1]  # the gateway's codecs: AddPartitionsToTxn is not served here
    if api_key == ADD_PARTITIONS_TO_TXN:
        return body.v3_and_below_transactional_id, body
    return body.transactional_id, body


def _concurrent_transactions(api_key: int, body: Any) -> object:
    """The CONCURRENT_TRANSACTIONS answer to a held request (what Kafka's transaction coordinator
    answers while an earlier state change of the transactional id completes; clients retry)."""
    error = int(ErrorCode.CONCURRENT_TRANSACTIONS)
    if api_key == INIT_PRODUCER_ID:
        return InitProducerIdResponse(error_code=error)
    if api_key == ADD_OFFSETS_TO_TXN:
        return AddOffsetsToTxnResponse(error_code=error)
    if api_key == END_TXN:
        return EndTxnResponse(error_code=error)
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(
                topic.name,
                [AddPartitionsToTxnPartitionResult(partition, error) for partition in topic.partitions],
            )
            for topic in body.v3_and_below_topics
        ]
    )


def _init_producer_id_transactional_id(frame: bytes, version: int) -> str | None:
    """InitProducerId's transactional id, read past the request header (v2+ are flexible)."""
    (client_id_length,) = _INT16.unpack_from(frame, 8)
    pos = 10 + max(client_id_length, 0)
    if version >= 2:
        pos = skip_tagged_fields(frame, pos)
        size, pos = read_uvarint(frame, pos)  # compact nullable string: length + 1
        if size == 0:
            return None
        return frame[pos : pos + size - 1].decode()
    (size,) = _INT16.unpack_from(frame, pos)
    if size < 0:
        return None
    return frame[pos + 2 : pos + 2 + size].decode()


def _init_producer_id_answer(frame: bytes, version: int) -> tuple[int, int, int]:
    """(error code, producer id, epoch) of an InitProducerId response (without length prefix)."""
    pos = 4  # correlation id
    if version >= 2:
        pos = skip_tagged_fields(frame, pos)
    _, error_code, producer_id, epoch = _INIT_PRODUCER_ID_ANSWER.unpack_from(frame, pos)
    return error_code, producer_id, epoch
