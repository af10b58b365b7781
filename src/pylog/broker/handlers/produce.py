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

Where steps 2-5 run: on an I/O thread (``broker.io``, ``num.io.threads``) in arrival order
per partition, unless the append is cheap enough for the event loop (``_inline``: small,
uncompressed, no recompression, no roll of any kind, no leader-epoch write, no fsync
policy, and nothing for that partition queued on a thread). The partitions of one request
are appended concurrently. The event loop never waits for file work of other threads:
logcore holds a log's append lock only for memory work and the append's own write.

acks=0 gets no response at all; when any partition fails, the connection is closed after
logging the errors (the client's only way to learn of them, and to refresh metadata).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Any

import logcore
from pylog import errors
from pylog.broker.handlers._common import LEADER_EPOCH, lookup_topic
from pylog.log.internal_topics import is_internal
from pylog.protocol.messages import ProduceResponse

if TYPE_CHECKING:
    from pylog.broker.handlers import RequestContext

API_KEY = 0
VERSIONS = (0, 11)
MIN_SERVED_VERSION = 3

log = logging.getLogger("pylog.broker.produce")

# Appends up to this size (uncompressed, see _inline) run on the event loop; larger ones on
# an I/O thread. benchmarks/inline_append.py (RESULTS.md): an uncompressed append inline
# holds the loop about 4 us + 0.3 us per KiB (52 us at 128 KiB, 320-360 us at 1 MiB:
# validation, CRC-32C, a copy into the page cache; never a disk wait, nor a wait for a
# lock held across one), handing it to a thread costs the loop 30-60 us and the producer
# 55-390 us; the loop costs meet near 64 KiB. End to end (benchmarks/e2e/harness.py, kcat
# on librdkafka 2.16, 1M x 100 B, 1 MB requests, two alternating pairs of 5-run medians
# against Tansu in the same runs): with 1 MB appends on threads the broker spent
# 0.113-0.116 us of CPU per record (0.445-0.448x Tansu) and produced 1.00-1.09x Tansu;
# inline 0.100-0.102 us (0.391-0.394x Tansu) and 1.11-1.17x Tansu. So 1 MiB: the CPU and
# throughput gain is worth an inline append's bounded ~0.4 ms of loop time. Compressed
# batches (decompression and validation can take milliseconds), rolls of every kind, new
# leader epochs and fsync policies always go to a thread (Log.append_needs_io).
INLINE_APPEND_MAX_BYTES = 1024 * 1024

_R = ProduceResponse

# RecordBatch v2 header fields read here (docs/formats.md; DefaultRecordBatch.java).
_BATCH_LENGTH = struct.Struct(">i")  # at byte 8
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23
_MAX_TIMESTAMP = struct.Struct(">q")  # at byte 35
_HEADER_SIZE = 61
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CODEC = 0x07  # in the low byte of attributes (byte 22)
_ATTR_CONTROL = 0x20


class AppendError(Exception):
    """A partition append refused with Kafka error ``code`` (and per-record errors)."""

    def __init__(self, code: int, message: str, record_errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.record_errors = record_errors or []


def _check_shape(records: Any) -> None:
    """Exactly one magic-2 batch, not control (from the header only)."""
    n = len(records)
    if n == 0:
        raise AppendError(errors.InvalidRecordError.code,
                              "Produce requests must contain exactly one record batch per partition")
    if n < _HEADER_SIZE:
        raise AppendError(errors.CorruptMessageError.code,
                              f"record set of {n} bytes is shorter than a batch header")
    magic = records[16]
    if magic != 2:
        raise AppendError(
            errors.InvalidRecordError.code,
            f"Produce requests with version 3+ may only contain record batches with magic 2 (got {magic})")
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, 8)
    size = 12 + batch_length
    if size > n:
        raise AppendError(errors.CorruptMessageError.code,
                              f"batch declares {size} bytes, the record set has {n}")
    if size < n:
        raise AppendError(errors.InvalidRecordError.code,
                              "Produce requests with version 3+ must contain exactly one record batch per partition")
    (attributes,) = _ATTRIBUTES.unpack_from(records, 21)
    if attributes & _ATTR_CONTROL:
        raise AppendError(errors.InvalidRecordError.code, "Clients may not write control batches")


def _timestamp_error(exc: logcore.InvalidTimestampError) -> AppendError:
    """INVALID_TIMESTAMP with Kafka's per-record errors (``batch_index`` = the record's
    index in the one batch), from the offending records logcore found on its error path."""
    low, high = exc.low, exc.high
    bad = [
        _R.BatchIndexAndErrorMessage(
            batch_index=i,
            batch_index_error_message=f"Timestamp {ts} of message with offset {i} is out of range. "
            f"The timestamp should be within [{low}, {high}]",
        )
        for i, ts in exc.violations
    ]
    if not bad:  # not raised by the timestamp check itself: still name the batch
        bad.append(_R.BatchIndexAndErrorMessage(batch_index=0, batch_index_error_message=str(exc)))
    return AppendError(errors.InvalidTimestampError.code,
                           "One or more records have been rejected due to invalid timestamp", bad)


def _keyless_error(partition: Any, records: Any, exc: logcore.InvalidRecordError) -> AppendError:
    """INVALID_RECORD for records without a key on a compacted topic, as Kafka answers it:
    one ``record_errors`` entry per keyless record (its index in the batch), and a message
    that counts them and shows the first three (``LogValidator.processRecordErrors``).
    logcore names the first keyless record; this error path finds the others."""
    what = (f"Compacted topic cannot accept message without key in topic partition "
            f"{partition.topic}-{partition.index}")
    try:
        valid = logcore.decode_columns(records).key_valid
        indexes = [int(i) for i in (~valid).nonzero()[0]]
    except logcore.CorruptRecordError:
        indexes = []
    if not indexes:
        indexes = [max(exc.record_index, 0)]
    bad = [_R.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=what) for i in indexes]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{what}')" for i in indexes[:3])
    return AppendError(
        errors.InvalidRecordError.code,
        f"One or more records have been rejected due to {len(indexes)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]", bad)


def _too_large(partition: Any, exc: logcore.RecordTooLargeError) -> AppendError:
    """MESSAGE_TOO_LARGE for a batch over ``max.message.bytes`` (checked first, in
    validation), RECORD_LIST_TOO_LARGE for one that passed it but cannot fit in a segment
    (Kafka's ``UnifiedLog.append`` throws RecordBatchTooLargeException after validation)."""
    size = exc.size
    config = partition.config
    if size is not None and size <= config["max.message.bytes"] and size > config["segment.bytes"]:
        return AppendError(
            errors.RecordListTooLargeError.code,
            f"The record batch of {size} bytes is larger than the segment size "
            f"segment.bytes={config['segment.bytes']} of {partition.topic}-{partition.index}")
    return AppendError(errors.MessageTooLargeError.code, str(exc))


def _recompress(records: Any, codec: str) -> Any:
    """Rewrite the batch with the topic's ``compression.type`` (Kafka's LogValidator does the
    same when it differs from the producer's). A slow path by design: only topics that set
    a codec pay for it; the default ``producer`` keeps the producer's bytes untouched."""
    try:
        batch = logcore.RecordBatch(records)
        if batch.compression == codec:
            return records
        builder = logcore.BatchBuilder(
            compression=codec, timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        )
        for rec in batch:
            builder.append(rec.value, key=rec.key, timestamp_ms=rec.timestamp, headers=rec.headers)
        return builder.build()
    except logcore.CorruptRecordError as exc:
        raise AppendError(errors.CorruptMessageError.code, str(exc)) from None


def _append_now(partition: Any, records: Any, acks: int, leader_epoch: int = LEADER_EPOCH) -> Any:
    """Steps 2-5 for one partition. Thread-safe (Log.append serialises on the log's lock);
    runs on an I/O thread unless ``_inline`` allows the loop."""
    config = partition.config
    if acks == -1 and config["min.insync.replicas"] > 1:
        raise AppendError(
            errors.NotEnoughReplicasError.code,
            f"The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of "
            f"{config['min.insync.replicas']} for partition {partition.topic}-{partition.index}",
        )
    _check_shape(records)
    codec = config["compression.type"].lower()
    if codec != "producer":
        records = _recompress(records, "none" if codec == "uncompressed" else codec)
    try:
        return partition.log.append(records, leader_epoch=leader_epoch)
    except logcore.InvalidTimestampError as exc:
        raise _timestamp_error(exc) from None
    except logcore.InvalidRecordError as exc:
        raise _keyless_error(partition, records, exc) from None
    except logcore.RecordTooLargeError as exc:
        raise _too_large(partition, exc) from None
    except (logcore.CorruptRecordError, logcore.LogDirError,
            logcore.InvalidProducerEpochError, logcore.OutOfOrderSequenceError,
            logcore.InvalidTxnStateError) as exc:
        raise AppendError(errors.code_for_exception(exc), str(exc)) from None


def _inline(partition: Any, records: Any, leader_epoch: int) -> bool:
    """Whether an append is cheap enough for the event loop: small, uncompressed, not
    rewritten, and doing no file work beyond its write: no roll of any kind (size,
    ``segment.ms`` with its jitter, a full index, an offset overflow), no leader-epoch
    file write, no fsync policy (``Log.append_needs_io``, from the batch header).
    Anything else may wait for a disk or crunch for long, and goes to an I/O thread."""
    n = len(records)
    if n > INLINE_APPEND_MAX_BYTES or n < _HEADER_SIZE or records[22] & _ATTR_CODEC:
        return False
    if partition.config["compression.type"] != "producer":
        return False
    (last_offset_delta,) = _LAST_OFFSET_DELTA.unpack_from(records, 23)
    (max_timestamp,) = _MAX_TIMESTAMP.unpack_from(records, 35)
    return not partition.log.append_needs_io(n, max_timestamp, last_offset_delta, leader_epoch)


async def append_records(broker: Any, partition: Any, records: Any, acks: int = -1) -> Any:
    """Append one record batch to ``partition`` the way Produce does (steps 2-6 above):
    the one partition-append path, also used by the group coordinator for
    ``__consumer_offsets`` (so that what covers Produce, e.g. replication later, covers it).

    Returns logcore's ``LogAppendInfo``. Raises ``AppendError`` (``.code``: Kafka's error).
    """
    key = (partition.topic, partition.index)
    io = broker.io
    replicas = broker.replicas
    epoch = LEADER_EPOCH
    cluster = getattr(broker, "cluster", None)
    if replicas.active or cluster is not None:  # a single node never gets here
        state = replicas.partitions.get(key)
        if state is not None:
            acks, epoch = _replica_checks(broker, state, acks)
        elif cluster is not None:
            # A local log the controller has not given this broker a role for (before the
            # first LeaderAndIsr after a start, or after StopReplica): never appended to.
            raise AppendError(errors.NotLeaderOrFollowerError.code,
                              f"broker {broker.node_id} is neither leader nor follower of "
                              f"{partition.topic}-{partition.index}: refresh the metadata")
    # An append waiting or running on a thread for this partition keeps its place: later
    # ones queue behind it (arrival order per partition), even the cheap ones.
    if not io.busy(key) and _inline(partition, records, epoch):
        info = _append_now(partition, records, acks, epoch)
    else:
        info = await io.run_ordered(key, _append_now, partition, records, acks, epoch)
    if not info.duplicate:
        if replicas.active:
            replicas.on_local_append(key, partition.log.log_end_offset)
        broker.waiters.notify(key)
    return info


async def append_replicated(broker: Any, partition: Any, records: Any, timeout_ms: int) -> Any:
    """``append_records`` with acks=all, for the coordinators' internal topics: on a
    replicated partition, returns once the high watermark passes the batch (Kafka's
    coordinators append with required acks -1 and a timeout: ``offsets.commit.timeout.ms``
    for groups). On a single node it is ``append_records``.

    Raises ``AppendError``: the append's refusal, or NOT_ENOUGH_REPLICAS_AFTER_APPEND /
    NOT_LEADER_OR_FOLLOWER / REQUEST_TIMED_OUT from the wait (the batch is in the leader's
    log then, but not committed: the caller fails its request as Kafka does)."""
    info = await append_records(broker, partition, records, -1)
    replicas = broker.replicas
    key = (partition.topic, partition.index)
    if not info.duplicate and replicas.active and key in replicas.partitions:
        code = await replicas.wait_for_acks(key, info.last_offset + 1, timeout_ms)
        if code:
            raise AppendError(code, f"the append to {partition.topic}-{partition.index} at offset "
                                    f"{info.first_offset} was not replicated to the ISR "
                                    f"(error {code})")
    return info


def _replica_checks(broker: Any, state: Any, acks: int) -> tuple[int, int]:
    """A replicated partition: only its leader appends, acks=-1 needs the ISR at min ISR
    (checked here on the real ISR, so ``_append_now``'s single-node check is skipped).
    Returns the acks for ``_append_now`` and the leader epoch to stamp."""
    leader = state.leader
    if leader is None:
        raise AppendError(errors.NotLeaderOrFollowerError.code,
                          f"broker {broker.node_id} is not the leader of {state.topic}-{state.index} "
                          f"(broker {state.leader_id} is, in epoch {state.leader_epoch}): "
                          "refresh the metadata")
    try:
        leader.check_before_append(acks)
    except errors.NotEnoughReplicasError as exc:
        raise AppendError(exc.code, f"{exc} for partition {state.topic}-{state.index}") from None
    return 1, state.leader_epoch


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
    try:
        await _verify_txn(ctx, transactional_id, partition, records)
        info = await append_records(ctx.broker, partition, records, acks)
    except AppendError as exc:
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
    resp.base_offset = info.first_offset
    resp.log_append_time_ms = info.log_append_time_ms
    resp.log_start_offset = info.log_start_offset
    replicas = ctx.broker.replicas
    if acks == -1 and replicas.active and (partition.topic, partition.index) in replicas.partitions:
        # acks=all on a replicated partition: wait until the high watermark passes the batch.
        resp.error_code = await replicas.wait_for_acks((partition.topic, partition.index),
                                                       info.last_offset + 1, timeout_ms)
    return resp


async def handle_produce(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version < MIN_SERVED_VERSION:
        return error_response(ctx, request, errors.UnsupportedVersionError.code,
                              f"Produce v{version} is not supported; use v3 or later")
    acks = request.acks
    if acks not in (-1, 0, 1):
        return error_response(ctx, request, errors.InvalidRequiredAcksError.code, f"invalid acks {acks}")
    # Topics are looked up (and auto-created) in request order; then every partition's
    # append runs at once: those that go to I/O threads overlap.
    lookups: list[tuple[Any, Any, errors.ApiError | None]] = []
    for topic_data in request.topic_data:
        try:
            lookups.append((topic_data, await lookup_topic(ctx, topic_data.name, auto_create=True), None))
        except errors.ApiError as exc:
            lookups.append((topic_data, None, exc))
    jobs = []
    for topic_data, topic, topic_error in lookups:
        for pd in topic_data.partition_data:
            if topic_error is not None:
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
