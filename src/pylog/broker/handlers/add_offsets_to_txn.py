"""AddOffsetsToTxn (key 25), versions 0-4.

A transactional producer about to commit consumer offsets in its transaction
(``send_offsets_to_transaction``) adds the group's ``__consumer_offsets`` partition
(``abs(hashCode(group_id)) % offsets.topic.num.partitions``) to the transaction, through the
same path as AddPartitionsToTxn, so that the COMMIT or ABORT marker also goes there.
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for v0-1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import AclOperation, ResourceType, allowed
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import AddOffsetsToTxnResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis


async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=errors.TransactionalIdAuthorizationFailedError.code)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(
            throttle_time_ms=0, error_code=errors.GroupAuthorizationFailedError.code)
    tp = (GROUP_METADATA_TOPIC_NAME, ctx.broker.groups.partition_for(request.group_id))
    code = await ctx.broker.txns.add_partitions(request.transactional_id, request.producer_id,
                                                request.producer_epoch, [tp])
    if code == errors.ProducerFencedError.code and ctx.api_version < 2:
        code = errors.InvalidProducerEpochError.code
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)
