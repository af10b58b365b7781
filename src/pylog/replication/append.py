"""The partition append path (Kafka's ``ReplicaManager.appendRecords``): one record batch
onto a local partition, the way every writer of this broker appends.

Produce, the coordinators' writes to their internal topics (``pylog.coordinator``) and the
transaction markers (``pylog.replication.markers``) all go through here, so that what
covers one (leader-only appends, the ISR and min ISR, the leader epoch stamped on the
batch, the acks=all wait, arrival order per partition, waking long-polling fetches) covers
all. The Produce handler keeps only the request and response work.

Per partition, in Kafka's order (``ProduceRequest.validateRecords``, ``LogValidator``):

1. acks=-1 needs ``min.insync.replicas`` <= 1 on a single node (NOT_ENOUGH_REPLICAS); a
   replicated partition (cluster mode, ``broker.replicas``) is appended to by its leader
   only (NOT_LEADER_OR_FOLLOWER), acks=-1 needs its ISR at min ISR and the batch gets the
   leader epoch;
2. the record set is exactly one magic-2 batch, not a control batch (INVALID_RECORD or
   CORRUPT_MESSAGE otherwise);
3. a topic whose ``compression.type`` is not ``producer`` gets the batch rewritten with its
   codec (slow path, only for such topics);
4. one ``Log.append`` call (validation, offsets, producer state, the write), its logcore
   errors mapped to Kafka's codes with Kafka's per-record errors;
5. fetches waiting on the partition are woken and the leader's follower state learns the
   new log end offset.

Where steps 1-4 run: on an I/O thread (``broker.io``, ``num.io.threads``) in arrival order
per partition, unless the append is cheap enough for the event loop (``_inline``: small,
uncompressed, no recompression, no roll of any kind, no leader-epoch write, no fsync
policy, and nothing for that partition queued on a thread).

The broker is passed in (``broker.io``, ``broker.replicas``, ``broker.waiters``,
``broker.cluster``): this module never imports ``pylog.broker``.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

import logcore
from pylog import errors
from pylog.protocol.messages import ProduceResponse

__all__ = ["INLINE_APPEND_MAX_BYTES", "LEADER_EPOCH", "AppendError", "append_records",
           "append_replicated", "must_wait_for_acks", "try_append_inline"]

log = logging.getLogger("pylog.replication.append")

# A single node is the leader of every partition from its creation on, in epoch 0.
LEADER_EPOCH = 0

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
_ATTR_CODEC = 0x07  # in the low byte of attributes (byte 22)
_ATTR_CONTROL = 0x20
#: Topic codecs under which an uncompressed batch is stored as it is (no rewrite):
#: ``__transaction_state`` is created ``uncompressed``, as Kafka creates it.
_KEEPS_UNCOMPRESSED = frozenset({"producer", "uncompressed"})


class AppendError(Exception):
    """A partition append refused with Kafka error ``code`` (and per-record errors)."""

    def __init__(self, code: int, message: str, record_errors: list[Any] | None = None, *,
                 appended: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.record_errors = record_errors or []
        # True when the batch is in the leader's log but the wait for the ISR failed.
        self.appended = appended


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
    if codec != "producer" and not (codec == "uncompressed" and not records[22] & _ATTR_CODEC):
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
    rewritten (the topic's ``compression.type`` is ``producer`` or ``uncompressed``), and
    doing no file work beyond its write: no roll of any kind (size,
    ``segment.ms`` with its jitter, a full index, an offset overflow), no leader-epoch
    file write, no fsync policy (``Log.append_needs_io``, from the batch header).
    Anything else may wait for a disk or crunch for long, and goes to an I/O thread."""
    n = len(records)
    if n > INLINE_APPEND_MAX_BYTES or n < _HEADER_SIZE or records[22] & _ATTR_CODEC:
        return False
    if partition.config["compression.type"] not in _KEEPS_UNCOMPRESSED:
        return False
    (last_offset_delta,) = _LAST_OFFSET_DELTA.unpack_from(records, 23)
    (max_timestamp,) = _MAX_TIMESTAMP.unpack_from(records, 35)
    return not partition.log.append_needs_io(n, max_timestamp, last_offset_delta, leader_epoch)


def _checks(broker: Any, partition: Any, key: tuple[str, int], acks: int) -> tuple[int, int]:
    """Step 1: the acks for ``_append_now`` and the leader epoch to stamp."""
    replicas = broker.replicas
    cluster = getattr(broker, "cluster", None)
    if replicas.active or cluster is not None:  # a single node never gets here
        state = replicas.partitions.get(key)
        if state is not None:
            return _replica_checks(broker, state, acks)
        if cluster is not None:
            # A local log the controller has not given this broker a role for (before the
            # first LeaderAndIsr after a start, or after StopReplica): never appended to.
            raise AppendError(errors.NotLeaderOrFollowerError.code,
                              f"broker {broker.node_id} is neither leader nor follower of "
                              f"{partition.topic}-{partition.index}: refresh the metadata")
    return acks, LEADER_EPOCH


def _appended(broker: Any, partition: Any, key: tuple[str, int], info: Any) -> None:
    """Step 5."""
    if not info.duplicate:
        replicas = broker.replicas
        if replicas.active:
            replicas.on_local_append(key, partition.log.log_end_offset)
        broker.waiters.notify(key)


async def append_records(broker: Any, partition: Any, records: Any, acks: int = -1) -> Any:
    """Append one record batch to ``partition`` (steps 1-5 above): the one partition-append
    path, used by Produce and by the coordinators for their internal topics.

    Returns logcore's ``LogAppendInfo``. Raises ``AppendError`` (``.code``: Kafka's error).
    """
    key = (partition.topic, partition.index)
    io = broker.io
    acks, epoch = _checks(broker, partition, key, acks)
    # An append waiting or running on a thread for this partition keeps its place: later
    # ones queue behind it (arrival order per partition), even the cheap ones.
    if not io.busy(key) and _inline(partition, records, epoch):
        info = _append_now(partition, records, acks, epoch)
    else:
        info = await io.run_ordered(key, _append_now, partition, records, acks, epoch)
    _appended(broker, partition, key, info)
    return info


def try_append_inline(broker: Any, partition: Any, records: Any, acks: int = -1) -> Any:
    """``append_records`` without a coroutine, for callers on the loop that would rather
    not wait a loop turn (the coordinators' writes): the ``LogAppendInfo`` when the append
    runs on the loop now (nothing for the partition queued on a thread, and ``_inline``),
    None when it must go to a thread (call ``append_records``; nothing was appended).

    Raises ``AppendError`` as ``append_records`` does."""
    key = (partition.topic, partition.index)
    acks, epoch = _checks(broker, partition, key, acks)
    if broker.io.busy(key) or not _inline(partition, records, epoch):
        return None
    info = _append_now(partition, records, acks, epoch)
    _appended(broker, partition, key, info)
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
    if not info.duplicate and must_wait_for_acks(broker, key):
        code = await replicas.wait_for_acks(key, info.last_offset + 1, timeout_ms)
        if code:
            raise AppendError(code, f"the append to {partition.topic}-{partition.index} at offset "
                                    f"{info.first_offset} was not replicated to the ISR "
                                    f"(error {code})", appended=True)
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


def must_wait_for_acks(broker: Any, key: tuple[str, int]) -> bool:
    """Whether an acks=-1 append to ``key`` waits for the ISR. In cluster mode always (an
    append is refused without a role, so a state gone by now was lost while appending:
    ``wait_for_acks`` answers NOT_LEADER_OR_FOLLOWER, the records may be truncated away);
    with LeaderAndIsr applied in-process, for the partitions it gave a role."""
    replicas = broker.replicas
    if not replicas.active:
        return False
    return key in replicas.partitions or getattr(broker, "cluster", None) is not None
