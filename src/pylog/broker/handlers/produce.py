"""Produce (key 0): versions 0-11 advertised, 3-11 served.

Versions 0-2 are advertised but refused on use with UNSUPPORTED_VERSION: older librdkafka
only compresses when Produce v0 is in the broker's range (KAFKA-18659; Kafka 4.x does the
same). Per partition, in Kafka's order (``ReplicaManager.appendRecords``,
``ProduceRequest.validateRecords``, ``LogValidator``):

1. the topic exists (auto-created when enabled) and the partition exists;
2. acks=-1 needs ``min.insync.replicas`` <= 1 on a single node (NOT_ENOUGH_REPLICAS);
3. the record set is exactly one magic-2 batch (v3+), not a control batch, not
   transactional (transactions are not implemented yet): INVALID_RECORD otherwise;
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
6. fetches waiting on the partition are woken.

acks=0 gets no response at all; when any partition fails, the connection is closed after
logging the errors (the client's only way to learn of them, and to refresh metadata).
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any

import logcore
from pylog import errors
from pylog.broker.handlers._common import LEADER_EPOCH, lookup_topic
from pylog.protocol.messages import ProduceResponse

if TYPE_CHECKING:
    from pylog.broker.handlers import RequestContext

API_KEY = 0
VERSIONS = (0, 11)
MIN_SERVED_VERSION = 3

log = logging.getLogger("pylog.broker.produce")

_R = ProduceResponse

# RecordBatch v2 header fields read here (DESIGN.md section 2; DefaultRecordBatch.java).
_BATCH_LENGTH = struct.Struct(">i")  # at byte 8
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_HEADER_SIZE = 61
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20


class _PartitionError(Exception):
    def __init__(self, code: int, message: str, record_errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.record_errors = record_errors or []


def _check_shape(records: Any) -> None:
    """Exactly one magic-2 batch, not control, not transactional (from the header only)."""
    n = len(records)
    if n == 0:
        raise _PartitionError(errors.InvalidRecordError.code,
                              "Produce requests must contain exactly one record batch per partition")
    if n < _HEADER_SIZE:
        raise _PartitionError(errors.CorruptMessageError.code,
                              f"record set of {n} bytes is shorter than a batch header")
    magic = records[16]
    if magic != 2:
        raise _PartitionError(
            errors.InvalidRecordError.code,
            f"Produce requests with version 3+ may only contain record batches with magic 2 (got {magic})")
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, 8)
    size = 12 + batch_length
    if size > n:
        raise _PartitionError(errors.CorruptMessageError.code,
                              f"batch declares {size} bytes, the record set has {n}")
    if size < n:
        raise _PartitionError(errors.InvalidRecordError.code,
                              "Produce requests with version 3+ must contain exactly one record batch per partition")
    (attributes,) = _ATTRIBUTES.unpack_from(records, 21)
    if attributes & _ATTR_CONTROL:
        raise _PartitionError(errors.InvalidRecordError.code, "Clients may not write control batches")
    if attributes & _ATTR_TRANSACTIONAL:
        raise _PartitionError(errors.InvalidRecordError.code, "transactional batches are not supported yet")


def _timestamp_error(exc: logcore.InvalidTimestampError) -> _PartitionError:
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
    return _PartitionError(errors.InvalidTimestampError.code,
                           "One or more records have been rejected due to invalid timestamp", bad)


def _too_large(partition: Any, exc: logcore.RecordTooLargeError) -> _PartitionError:
    """MESSAGE_TOO_LARGE for a batch over ``max.message.bytes`` (checked first, in
    validation), RECORD_LIST_TOO_LARGE for one that passed it but cannot fit in a segment
    (Kafka's ``UnifiedLog.append`` throws RecordBatchTooLargeException after validation)."""
    size = exc.size
    config = partition.config
    if size is not None and size <= config["max.message.bytes"] and size > config["segment.bytes"]:
        return _PartitionError(
            errors.RecordListTooLargeError.code,
            f"The record batch of {size} bytes is larger than the segment size "
            f"segment.bytes={config['segment.bytes']} of {partition.topic}-{partition.index}")
    return _PartitionError(errors.MessageTooLargeError.code, str(exc))


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
        raise _PartitionError(errors.CorruptMessageError.code, str(exc)) from None


def _append(ctx: RequestContext, partition: Any, records: Any, acks: int) -> Any:
    config = partition.config
    if acks == -1 and config["min.insync.replicas"] > 1:
        raise _PartitionError(
            errors.NotEnoughReplicasError.code,
            f"The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of "
            f"{config['min.insync.replicas']} for partition {partition.topic}-{partition.index}",
        )
    _check_shape(records)
    codec = config["compression.type"].lower()
    if codec != "producer":
        records = _recompress(records, "none" if codec == "uncompressed" else codec)
    try:
        info = partition.log.append(records, leader_epoch=LEADER_EPOCH)
    except logcore.InvalidTimestampError as exc:
        raise _timestamp_error(exc) from None
    except logcore.RecordTooLargeError as exc:
        raise _too_large(partition, exc) from None
    except (logcore.CorruptRecordError, logcore.LogDirError,
            logcore.InvalidProducerEpochError, logcore.OutOfOrderSequenceError) as exc:
        raise _PartitionError(errors.code_for_exception(exc), str(exc)) from None
    if not info.duplicate:
        ctx.broker.waiters.notify((partition.topic, partition.index))
    return info


async def handle_produce(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if version < MIN_SERVED_VERSION:
        return error_response(ctx, request, errors.UnsupportedVersionError.code,
                              f"Produce v{version} is not supported; use v3 or later")
    acks = request.acks
    if acks not in (-1, 0, 1):
        return error_response(ctx, request, errors.InvalidRequiredAcksError.code, f"invalid acks {acks}")
    if request.transactional_id is not None:
        return error_response(ctx, request, errors.TransactionalIdAuthorizationFailedError.code,
                              "transactions are not supported yet")
    responses = []
    for topic_data in request.topic_data:
        parts = []
        topic = None
        topic_error: errors.ApiError | None = None
        try:
            topic = await lookup_topic(ctx, topic_data.name, auto_create=True)
        except errors.ApiError as exc:
            topic_error = exc
        for pd in topic_data.partition_data:
            resp = _R.PartitionProduceResponse(index=pd.index, error_code=0, base_offset=-1,
                                               log_append_time_ms=-1, log_start_offset=-1)
            parts.append(resp)
            if topic_error is not None:
                resp.error_code = topic_error.code
                resp.error_message = str(topic_error)
                continue
            assert topic is not None
            if not 0 <= pd.index < len(topic.partitions):
                resp.error_code = errors.UnknownTopicOrPartitionError.code
                resp.error_message = "This server does not host this topic-partition."
                continue
            partition = topic.partitions[pd.index]
            try:
                info = _append(ctx, partition, pd.records if pd.records is not None else b"", acks)
            except _PartitionError as exc:
                resp.error_code = exc.code
                resp.error_message = str(exc)
                resp.record_errors = exc.record_errors
                resp.log_start_offset = partition.log.log_start_offset
                log.debug("produce to %s-%d from %s refused: %s", partition.topic, partition.index,
                          ctx.peer, exc)
                continue
            resp.base_offset = info.first_offset
            resp.log_append_time_ms = info.log_append_time_ms
            resp.log_start_offset = info.log_start_offset
        responses.append(_R.TopicProduceResponse(name=topic_data.name, partition_responses=parts))
    if acks == 0:
        failed = [f"{td.name}-{pr.index}: {pr.error_message or pr.error_code}"
                  for td in responses for pr in td.partition_responses if pr.error_code]
        if failed:
            _close_after_acks0_error(ctx, "; ".join(failed))
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


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
