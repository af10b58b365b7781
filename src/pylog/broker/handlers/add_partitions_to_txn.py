"""AddPartitionsToTxn (key 24), versions 0-5.

v0-3 (producers; v3 flexible): one transactional id, producer id and epoch, and the
partitions the producer is about to write in its transaction. The transaction coordinator
(``broker.txns``) adds them and answers once the new state is in ``__transaction_state``;
the one error code is given to every partition. A partition that does not exist fails the
whole request: it gets UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED
(nothing is added). PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for v0-1.

v4+ (broker to broker, KIP-890): many transactions per request, each answered on its own;
``verify_only`` entries only check that the partitions are already in the producer's open
transaction (NONE, else TRANSACTION_ABORTABLE), which is what a partition leader asks before
it appends a producer's first transactional batch (``broker.txn_verify``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import (
    AclOperation,
    ResourceType,
    allowed,
    denied,
    require_cluster,
)
from pylog.log.internal_topics import is_internal
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import AddPartitionsToTxnResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = AddPartitionsToTxnResponse
TopicPartition = tuple[str, int]


def _partitions(topics: Any) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    seen = set()
    for t in topics:
        for p in t.partitions:
            if (t.name, p) not in seen:
                seen.add((t.name, p))
                out.append((t.name, p))
    return out


def _topic_results(codes: dict[TopicPartition, int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(
            _R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return [_R.AddPartitionsToTxnTopicResult(name=name, results_by_partition=parts)
            for name, parts in by_topic.items()]


async def _one(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
               topics: Any, verify_only: bool) -> dict[TopicPartition, int]:
    tps = _partitions(topics)
    txns = ctx.broker.txns
    if not verify_only and ctx.broker.authorizer is not None:  # a client's (v3 and below)
        if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return dict.fromkeys(tps, errors.TransactionalIdAuthorizationFailedError.code)
        unauthorized = denied(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                              (t for t, _p in tps if not is_internal(t)))
        if unauthorized:
            return {tp: (errors.TopicAuthorizationFailedError.code if tp[0] in unauthorized
                         else errors.OperationNotAttemptedError.code) for tp in tps}
    # The cluster's partitions in cluster mode (the metadata cache), else this broker's.
    missing = {tp for tp in tps if not txns.partition_exists(*tp)}
    if missing:
        return {tp: (errors.UnknownTopicOrPartitionError.code if tp in missing
                     else errors.OperationNotAttemptedError.code) for tp in tps}
    if verify_only:
        return txns.verify_partitions(transactional_id, producer_id, producer_epoch, tps)
    code = await txns.add_partitions(transactional_id, producer_id, producer_epoch, tps)
    if code == errors.ProducerFencedError.code and ctx.api_version < 2:
        code = errors.InvalidProducerEpochError.code
    return dict.fromkeys(tps, code)


async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version < 4:
        codes = await _one(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                           request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        return _R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(codes))
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)  # v4+: brokers verifying, not clients
    if any(t.transactional_id is None for t in request.transactions):
        raise errors.InvalidRequestError("a transactional id cannot be null")
    results = await asyncio.gather(*(
        _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
        for t in request.transactions))
    return _R(throttle_time_ms=0, error_code=0, results_by_transaction=[
        _R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topic_results(codes))
        for t, codes in zip(request.transactions, results, strict=True)])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    if ctx.api_version < 4:
        codes = dict.fromkeys(_partitions(request.v3_and_below_topics), code)
        return _R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(codes))
    return _R(throttle_time_ms=0, error_code=code, results_by_transaction=[])
