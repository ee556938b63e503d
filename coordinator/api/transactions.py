"""The transactional APIs in standalone mode (docs/transactions.md#standalone-mode).

A standalone coordinator holds no records and runs no transaction coordinator: no producer id
is ever assigned to a transactional id here, so AddOffsetsToTxn, EndTxn and TxnOffsetCommit are
answered as Kafka's transaction coordinator answers a producer id it does not know for the
transactional id, INVALID_PRODUCER_ID_MAPPING (FindCoordinator for a transactional id is already
refused). In gateway mode AddOffsetsToTxn and EndTxn are forwarded upstream and TxnOffsetCommit
reaches the core (``GroupCoordinator.accepts_transactional_offsets``, set by
coordinator/gateway/transactions.py).
"""

from __future__ import annotations

from typing import Any

from coordinator.api.amend import reply
from coordinator.api.routes import Handler, Routes
from coordinator.core.context import RequestContext
from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.result import Result
from protocol.apis import ApiKey
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

UNKNOWN_TRANSACTIONAL_ID = int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)


def _refuse(api_key: ApiKey) -> Handler[Any]:
    def handle(ctx: RequestContext, req: Any) -> Result:
        return reply(ctx, error_response(api_key, ctx.api_version, req, UNKNOWN_TRANSACTIONAL_ID))

    return handle


def txn_offset_commit_handler(coordinator: GroupCoordinator) -> Handler[TxnOffsetCommitRequest]:
    """TxnOffsetCommit, a group API of the route table (coordinator/api/table.py)."""
    refuse_commit = _refuse(ApiKey.TXN_OFFSET_COMMIT)

    def txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> Result:
        if not coordinator.accepts_transactional_offsets:
            return refuse_commit(ctx, req)
        return coordinator.txn_commit_offsets(ctx, req)

    return txn_offset_commit


def add_transaction_routes(routes: Routes) -> None:
    """AddOffsetsToTxn and EndTxn, which name no group this coordinator serves."""
    routes.add(ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest, _refuse(ApiKey.ADD_OFFSETS_TO_TXN))
    routes.add(ApiKey.END_TXN, EndTxnRequest, _refuse(ApiKey.END_TXN))
