"""TxnOffsetCommit (key 28), versions 0-4: a transactional producer commits a group's offsets
inside its transaction (``send_offsets_to_transaction``).

In Kafka's order (``KafkaApis.handleTxnOffsetCommitRequest``,
``GroupCoordinatorService.commitTransactionalOffsets``):

1. partitions of unknown topics (or partition numbers) get UNKNOWN_TOPIC_OR_PARTITION;
   when none is left the answer goes out at once;
2. no ``__consumer_offsets`` yet -> COORDINATOR_NOT_AVAILABLE; empty group id ->
   INVALID_GROUP_ID;
3. KIP-890 verification (when the broker has a ``txn_verify`` hook and the producer has no
   open transaction in this ``__consumer_offsets`` partition): the transaction coordinator
   must confirm that the partition is part of the transaction. Its errors reach the client
   as Kafka maps them: PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE ->
   INVALID_TXN_STATE below v4, NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS;
4. the group coordinator's checks and write (``GroupCoordinator.txn_offset_commit``): the
   answer comes once the transactional batch is in the log.

Below v2, COORDINATOR_LOAD_IN_PROGRESS is answered as COORDINATOR_NOT_AVAILABLE (clients
before 2.0 did not expect it, KAFKA-7296).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers import _groups
from pylog.broker.handlers._authz import (
    AclOperation,
    ResourceType,
    denied,
    require_group,
    require_transactional_id,
)
from pylog.group.offsets import OffsetCommitPartition
from pylog.log.internal_topics import GROUP_METADATA_TOPIC_NAME
from pylog.protocol.apis import ADVERTISED, ApiKey
from pylog.protocol.messages import TxnOffsetCommitResponse

if TYPE_CHECKING:
    from pylog.broker.handlers._context import RequestContext

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = ADVERTISED[API_KEY]  # the one table: pylog.protocol.apis

_R = TxnOffsetCommitResponse


def verification_error(code: int, api_version: int) -> int:
    """The error a TxnOffsetCommit client gets for a failed transaction verification
    (``AddPartitionsToTxnManager``, ``CoordinatorOperationExceptionHelper``)."""
    if code == errors.ProducerFencedError.code:
        return errors.InvalidProducerEpochError.code
    if code == errors.TransactionAbortableError.code and api_version < 4:
        return errors.InvalidTxnStateError.code
    if code == errors.NetworkError.code:
        return errors.CoordinatorLoadInProgressError.code
    return code


async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    require_transactional_id(ctx, request.transactional_id)  # WRITE on the id,
    require_group(ctx, AclOperation.READ, request.group_id)  # READ on the group,
    unauthorized = denied(ctx, AclOperation.READ, ResourceType.TOPIC,  # READ per topic
                          (t.name for t in request.topics))
    v = ctx.api_version
    codes: dict[tuple[str, int], int] = {}
    wanted: list[OffsetCommitPartition] = []
    for t in request.topics:
        for p in t.partitions:
            if t.name in unauthorized:
                codes[(t.name, p.partition_index)] = errors.TopicAuthorizationFailedError.code
                continue
            if not _groups.partition_exists(ctx, t.name, p.partition_index):
                codes[(t.name, p.partition_index)] = errors.UnknownTopicOrPartitionError.code
                continue
            wanted.append(OffsetCommitPartition(
                t.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata))
    if wanted:
        code = await _verify(ctx, request)
        if code:
            for w in wanted:
                codes[(w.topic, w.partition)] = code
        else:
            coord = _groups.coordinator(ctx, request.group_id)
            assert coord is not None  # checked by _verify
            pending = coord.txn_offset_commit(
                request.group_id, request.producer_id, request.producer_epoch, wanted,
                request.generation_id if v >= 3 else -1, request.member_id if v >= 3 else "",
                request.group_instance_id if v >= 3 else None)
            for r in await _groups.wait(ctx, coord, pending):
                codes[(r.topic, r.partition)] = r.error_code
    return _response(request, v, lambda topic, partition: codes.get((topic, partition), 0))


async def _verify(ctx: RequestContext, request: Any) -> int:
    """Steps 2 and 3 of the module docstring: an error code for every partition, or 0."""
    coord = _groups.coordinator(ctx, request.group_id)
    if coord is None:
        return _groups.not_hosted(ctx)
    if not request.group_id:
        return errors.InvalidGroupIdError.code
    verify = getattr(ctx.broker, "txn_verify", None)
    if verify is None or coord.loading or coord.has_open_transaction(request.producer_id):
        return 0
    partition = ctx.broker.groups.partition_for(request.group_id)
    code = await verify(request.transactional_id, request.producer_id, request.producer_epoch,
                        GROUP_METADATA_TOPIC_NAME, partition)
    return verification_error(int(code), ctx.api_version)


def _response(request: Any, version: int, code_of: Any) -> Any:
    def fix(code: int) -> int:
        if version < 2 and code == errors.CoordinatorLoadInProgressError.code:
            return errors.CoordinatorNotAvailableError.code
        return code

    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        _R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            _R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                error_code=fix(code_of(t.name, p.partition_index)))
            for p in t.partitions])
        for t in request.topics])


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    return _response(request, ctx.api_version, lambda topic, partition: code)
