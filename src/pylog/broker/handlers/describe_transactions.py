"""DescribeTransactions (key 65), version 0: the coordinator's view of transactional ids.

Per id: its state name (Empty, Ongoing, PrepareCommit, ...), timeout, the start time of the
open transaction (-1 none), producer id and epoch, and the partitions in the transaction.
Unknown (or expiring) ids get TRANSACTIONAL_ID_NOT_FOUND, "" gets INVALID_REQUEST, ids whose
``__transaction_state`` partition is loading COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import DescribeTransactionsResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = DescribeTransactionsResponse


def _state(d: Any) -> Any:
    by_topic: dict[str, list[int]] = {}
    for topic, p in d.partitions:
        by_topic.setdefault(topic, []).append(p)
    return _R.TransactionState(
        error_code=d.error_code, transactional_id=d.transactional_id, transaction_state=d.state,
        transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_time_ms,
        producer_id=d.producer_id, producer_epoch=d.producer_epoch,
        topics=[_R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()])


async def handle_describe_transactions(ctx: RequestContext, request: Any) -> Any:
    txns = ctx.broker.txns
    return _R(throttle_time_ms=0, transaction_states=[
        _state(txns.describe(t)) if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t)
        else _R.TransactionState(
            error_code=errors.TransactionalIdAuthorizationFailedError.code, transactional_id=t,
            transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
            producer_id=-1, producer_epoch=-1, topics=[])
        for t in request.transactional_ids])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _R(throttle_time_ms=0, transaction_states=[
        _R.TransactionState(error_code=code, transactional_id=t, transaction_state="", transaction_timeout_ms=0,
                            transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
        for t in request.transactional_ids])
