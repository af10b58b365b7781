"""ListTransactions (key 66), versions 0-1: the transactions this broker coordinates.

Filters: state names (``StateFilters``; names Kafka does not know are echoed back in
``UnknownStateFilters``), producer ids, and (v1) ``DurationFilter``: only transactions running
longer than that many ms (-1: no filter). Expired ids are never listed. While a
``__transaction_state`` partition loads the answer is COORDINATOR_LOAD_IN_PROGRESS. Before the
topic exists the list is empty (there are no transactions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import ListTransactionsResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = ListTransactionsResponse


async def handle_list_transactions(ctx: RequestContext, request: Any) -> Any:
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    result = ctx.broker.txns.list_transactions(request.state_filters, request.producer_id_filters, duration)
    return _R(throttle_time_ms=0, error_code=result.error_code, unknown_state_filters=result.unknown_state_filters,
              transaction_states=[_R.TransactionState(transactional_id=t, producer_id=pid, transaction_state=s)
                                  for t, pid, s in result.transactions
                                  # only the ids the principal may DESCRIBE (Kafka)
                                  if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t,
                                             log_denied=False)])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[])
