"""EndTxn (key 26), versions 0-4: commit or abort a producer's transaction.

The transaction coordinator (``broker.txns``) writes PrepareCommit or PrepareAbort to
``__transaction_state`` and answers NONE once it is there; the COMMIT/ABORT markers are then
written on every partition of the transaction and CompleteCommit/CompleteAbort follows. A
retry after success gets NONE, a retry while the markers are being written
CONCURRENT_TRANSACTIONS, the opposite outcome INVALID_TXN_STATE. PRODUCER_FENCED becomes
INVALID_PRODUCER_EPOCH for v0-1. (v5, transaction.version 2, is not offered.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import require_transactional_id
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import EndTxnResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.END_TXN
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


async def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    require_transactional_id(ctx, request.transactional_id)  # WRITE on the id
    code = await ctx.broker.txns.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                         request.committed)
    if code == errors.ProducerFencedError.code and ctx.api_version < 2:
        code = errors.InvalidProducerEpochError.code
    return EndTxnResponse(throttle_time_ms=0, error_code=code)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
