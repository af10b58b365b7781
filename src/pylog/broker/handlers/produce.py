"""Produce (key 0): versions 0-11 advertised, 3-11 served.

Versions 0-2 are advertised but refused on use with UNSUPPORTED_VERSION: older librdkafka
only compresses when Produce v0 is in the broker's range (KAFKA-18659; Kafka 4.x does the
same). Per partition, in Kafka's order (``ReplicaManager.appendRecords``,
``ProduceRequest.validateRecords``, ``LogValidator``):

1. the topic exists (auto-created when enabled) and the partition exists;
2. acks=-1 needs ``min.insync.replicas`` <= 1 on a single node (NOT_ENOUGH_REPLICAS); a
   replicated partition (cluster mode, ``broker.replicas``) is appended to by its leader
   only (NOT_LEADER_OR_FOLLOWER), acks=-1 needs its ISR at min ISR, the batch gets the
   leader epoch, and acks=-1 answers once the high watermark passes the batch
   (docs/replication.md, "The replica manager");
3. the record set is exactly one magic-2 batch (v3+), not a control batch ("Clients may
   not write control batches"): INVALID_RECORD otherwise. A transactional batch (0x10)
   is accepted; the first one of a producer on a partition (no open transaction there)
   is first verified with the transaction coordinator when the broker has a
   ``txn_verify`` hook (KIP-890 part 1: ``await broker.txn_verify(transactional_id,
   producer_id, producer_epoch, topic, partition)`` -> error code, 0 = go on);
4. a topic whose ``compression.type`` is not ``producer`` gets the batch rewritten with
   its codec (slow path, only for such topics);
5. one ``Log.append`` call: CRC, sizes and record count are checked, offsets assigned in
   place and LogAppendTime stamped by logcore; CORRUPT_MESSAGE, MESSAGE_TOO_LARGE; a batch
   with a producer id (idempotent producer) is checked against the partition's producer
   state: a retried batch (same epoch and sequences as one of the producer's last five)
   answers NONE with the offset it got the first time and writes nothing; an older epoch
   is INVALID_PRODUCER_EPOCH, a sequence that does not follow OUT_OF_ORDER_SEQUENCE_NUMBER; with
   CreateTime, logcore also checks EVERY record's timestamp against
   ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` and the broker
   clock (the smallest and largest come out of validation, so the happy path costs two
   comparisons): INVALID_TIMESTAMP with one ``record_errors`` entry per offending record;
   on a compacted topic (``cleanup.policy`` includes ``compact``) a record without a key is
   INVALID_RECORD, again with one ``record_errors`` entry per keyless record and Kafka's
   texts (``LogValidator.validateKey``, ``processRecordErrors``); a non-transactional
   batch of a producer with an open transaction is INVALID_TXN_STATE;
6. fetches waiting on the partition are woken.

Steps 2 and 4-6 are the partition append path, ``pylog.replication.append.append_records``
(Kafka's ``ReplicaManager.appendRecords``, shared with the coordinators and the markers):
it runs on an I/O thread in arrival order per partition unless the append is cheap enough
for the event loop; this handler does the request's side (the internal-topic refusal, the
transaction check, the response). The partitions of one request are appended concurrently. The event loop never waits for file work of other threads:
logcore holds a log's append lock only for memory work and the append's own write.

Quotas: the request's size counts against the client's ``producer_byte_rate`` after the
appends, and its time against ``request_percentage`` (not with acks=0); a violation sets
``throttle_time_ms`` and mutes the connection (``pylog.broker.quotas``).

acks=0 gets no response at all; when any partition fails, the connection is closed after
logging the errors (the client's only way to learn of them, and to refresh metadata).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Any

from pylog import errors
from pylog.broker.handlers._authz import (
    AclOperation,
    ResourceType,
    allowed,
    denied,
    topic_denied_error,
)
from pylog.broker.handlers._common import lookup_topic
from pylog.broker.quotas import produce_throttle
from pylog.log.internal_topics import is_internal
from pylog.protocol.messages import ProduceResponse
from pylog.replication.append import AppendError, append_records, must_wait_for_acks

if TYPE_CHECKING:
    from pylog.broker.handlers import RequestContext

API_KEY = 0
VERSIONS = (0, 11)
MIN_SERVED_VERSION = 3

log = logging.getLogger("pylog.broker.produce")

_R = ProduceResponse

# RecordBatch v2 header fields read here (docs/formats.md; DefaultRecordBatch.java).
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_HEADER_SIZE = 61
_ATTR_TRANSACTIONAL = 0x10
_PRODUCER = struct.Struct(">qh")  # producer id, epoch at byte 43
#: Verification answers a Produce gets as NOT_ENOUGH_REPLICAS (Kafka's ReplicaManager).
_VERIFY_RETRIABLE = frozenset({
    errors.ConcurrentTransactionsError.code, errors.NetworkError.code,
    errors.CoordinatorLoadInProgressError.code, errors.CoordinatorNotAvailableError.code,
    errors.NotCoordinatorError.code,
})


async def _verify_txn(ctx: RequestContext, transactional_id: str | None, partition: Any,
                      records: Any) -> None:
    """Transactional batches need the request's transactional id (Kafka's
    ``KafkaApis.handleProduceRequest``: TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise).
    KIP-890 part 1: the first transactional batch of a producer on this partition is
    verified with the coordinator through ``broker.txn_verify`` when the broker has one.

    Raises:
        AppendError: with the refusal's code.
    """
    if (len(records) < _HEADER_SIZE
            or not _ATTRIBUTES.unpack_from(records, 21)[0] & _ATTR_TRANSACTIONAL):
        return
    if transactional_id is None:
        raise AppendError(errors.TransactionalIdAuthorizationFailedError.code,
                          "transactional batches need the Produce request's transactional_id "
                          "(use a producer configured with transactional.id)")
    verify = getattr(ctx.broker, "txn_verify", None)
    if verify is None:
        return
    producer_id, producer_epoch = _PRODUCER.unpack_from(records, 43)
    entry = partition.log.producer_state.producers.get(producer_id)
    if entry is not None and entry.txn_first_offset >= 0 and entry.epoch == producer_epoch:
        return  # already in a transaction here: nothing to verify
    code = await verify(transactional_id, producer_id, producer_epoch, partition.topic,
                        partition.index)
    if code:
        # As Kafka's ReplicaManager: fencing shows as INVALID_PRODUCER_EPOCH; clients before
        # Produce v11 do not know TRANSACTION_ABORTABLE and get INVALID_TXN_STATE.
        if code == errors.ProducerFencedError.code:
            code = errors.InvalidProducerEpochError.code
        elif code in _VERIFY_RETRIABLE:
            # Kafka's ReplicaManager: the coordinator is moving, loading or busy; a code every
            # client retries a Produce on without a metadata refresh.
            code = errors.NotEnoughReplicasError.code
        elif code == errors.TransactionAbortableError.code and ctx.api_version < 11:
            code = errors.InvalidTxnStateError.code
        raise AppendError(code, f"transaction verification of producer {producer_id} epoch "
                          f"{producer_epoch} for {partition.topic}-{partition.index} failed "
                          f"with error {code}: add the partition to the transaction first")


async def _produce_partition(ctx: RequestContext, topic: Any, pd: Any, acks: int,
                             transactional_id: str | None = None, timeout_ms: int = 30000) -> Any:
    resp = _R.PartitionProduceResponse(index=pd.index, error_code=0, base_offset=-1,
                                       log_append_time_ms=-1, log_start_offset=-1)
    if not 0 <= pd.index < len(topic.partitions):
        resp.error_code = errors.UnknownTopicOrPartitionError.code
        resp.error_message = "This server does not host this topic-partition."
        return resp
    partition = topic.partitions[pd.index]
    if is_internal(topic.name):
        # Kafka's ReplicaManager: only the coordinators append to their topics.
        resp.error_code = errors.InvalidTopicError.code
        resp.error_message = f"Cannot append to internal topic {topic.name}"
        return resp
    records = pd.records if pd.records is not None else b""
    # Kafka's BrokerTopicMetrics, per partition of the request (pylog.metrics.registry).
    stats = ctx.broker.metrics.topic(topic.name)
    stats.total_produce_requests += 1
    try:
        await _verify_txn(ctx, transactional_id, partition, records)
        info = await append_records(ctx.broker, partition, records, acks)
    except AppendError as exc:
        stats.failed_produce_requests += 1
        resp.error_code = exc.code
        resp.error_message = str(exc)
        resp.record_errors = exc.record_errors
        resp.log_start_offset = partition.log.log_start_offset
        if exc.code == errors.NotLeaderOrFollowerError.code:
            # KIP-951 (v10+): the leader the client should go to.
            state = ctx.broker.replicas.partitions.get((partition.topic, partition.index))
            if state is not None:
                resp.current_leader = _R.LeaderIdAndEpoch(leader_id=state.leader_id,
                                                          leader_epoch=state.leader_epoch)
        log.debug("produce to %s-%d from %s refused: %s", partition.topic, partition.index,
                  ctx.peer, exc)
        return resp
    if not info.duplicate:  # a retried batch the log already holds appends nothing
        stats.messages_in += info.record_count
        stats.bytes_in += len(records)
    resp.base_offset = info.first_offset
    resp.log_append_time_ms = info.log_append_time_ms
    resp.log_start_offset = info.log_start_offset
    replicas = ctx.broker.replicas
    if acks == -1 and must_wait_for_acks(ctx.broker, (partition.topic, partition.index)):
        # acks=all on a replicated partition: wait until the high watermark passes the
        # batch (remote time; partitions wait concurrently, so their waits overlap).
        loop = asyncio.get_running_loop()
        waited = loop.time()
        resp.error_code = await replicas.wait_for_acks((partition.topic, partition.index),
                                                       info.last_offset + 1, timeout_ms)
        ctx.remote_s = max(ctx.remote_s, loop.time() - waited)
        if resp.error_code:
            stats.failed_produce_requests += 1
    return resp


async def handle_produce(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version < MIN_SERVED_VERSION:
        return error_response(ctx, request, errors.UnsupportedVersionError.code,
                              f"Produce v{version} is not supported; use v3 or later")
    acks = request.acks
    if acks not in (-1, 0, 1):
        return error_response(ctx, request, errors.InvalidRequiredAcksError.code, f"invalid acks {acks}")
    unauthorized: set[str] = set()
    if ctx.broker.authorizer is not None:  # WRITE on the transactional id, then per topic
        tid = request.transactional_id
        if tid is not None and not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return error_response(ctx, request, errors.TransactionalIdAuthorizationFailedError.code,
                                  "Transactional Id authorization failed.")
        unauthorized = denied(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                              (td.name for td in request.topic_data))
    # Topics are looked up (and auto-created) in request order; then every partition's
    # append runs at once: those that go to I/O threads overlap.
    lookups: list[tuple[Any, Any, errors.ApiError | None]] = []
    for topic_data in request.topic_data:
        if topic_data.name in unauthorized:  # never auto-created
            lookups.append((topic_data, None, topic_denied_error(topic_data.name)))
            continue
        try:
            lookups.append((topic_data, await lookup_topic(ctx, topic_data.name, auto_create=True), None))
        except errors.ApiError as exc:
            lookups.append((topic_data, None, exc))
    jobs = []
    for topic_data, topic, topic_error in lookups:
        for pd in topic_data.partition_data:
            if topic_error is not None:
                untracked = ctx.broker.metrics.untracked  # no entry for a missing topic
                untracked.total_produce_requests += 1
                untracked.failed_produce_requests += 1
                jobs.append(_failed(pd.index, topic_error))
            else:
                jobs.append(_produce_partition(ctx, topic, pd, acks, request.transactional_id,
                                               request.timeout_ms))
    if len(jobs) == 1:
        parts = [await jobs[0]]
    else:
        parts = list(await asyncio.gather(*jobs))
    responses = []
    i = 0
    for topic_data, _, _ in lookups:
        n = len(topic_data.partition_data)
        responses.append(_R.TopicProduceResponse(name=topic_data.name, partition_responses=parts[i:i + n]))
        i += n
    # Quotas (KIP-219): after the append, the request's bytes against producer_byte_rate;
    # the response goes out at once and the connection is muted for the throttle time.
    quotas = ctx.broker.quotas
    if quotas.produce.enabled or quotas.request.enabled:
        size = ctx.request_size or sum(len(pd.records or b"") for td in request.topic_data
                                       for pd in td.partition_data)
        produce_throttle(ctx, size, acks)
    if acks == 0:
        failed = [f"{td.name}-{pr.index}: {pr.error_message or pr.error_code}"
                  for td in responses for pr in td.partition_responses if pr.error_code]
        if failed:
            _close_after_acks0_error(ctx, "; ".join(failed))
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


async def _failed(index: int, exc: errors.ApiError) -> Any:
    return _R.PartitionProduceResponse(index=index, error_code=exc.code, error_message=str(exc),
                                       base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)


def _close_after_acks0_error(ctx: RequestContext, what: str) -> None:
    """acks=0 gets no response, so an error can only be signalled by closing the
    connection: the client then reconnects and refreshes its metadata (Kafka's
    ``KafkaApis.handleProduceRequest`` does the same)."""
    log.info("closing connection %s after an error in a produce request with acks=0 "
             "(correlation id %d, client id %r): %s", ctx.peer, ctx.correlation_id,
             ctx.client_id, what)
    ctx.close_connection = True


def error_response(ctx: RequestContext, request: Any, code: int, message: str) -> Any:
    if request.acks == 0 and code != errors.UnsupportedVersionError.code:
        _close_after_acks0_error(ctx, f"error {code}: {message}")
        return None
    return ProduceResponse(
        responses=[
            _R.TopicProduceResponse(
                name=td.name,
                partition_responses=[
                    _R.PartitionProduceResponse(index=pd.index, error_code=code, base_offset=-1,
                                                log_append_time_ms=-1, log_start_offset=-1,
                                                error_message=message)
                    for pd in td.partition_data
                ],
            )
            for td in request.topic_data
        ],
        throttle_time_ms=0,
    )
