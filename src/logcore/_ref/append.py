"""Pure-Python twin of logcore._append: validate_for_append, the broker's append.

What it reads and writes in each batch of a produced record set (big-endian; the
header layout is Kafka's DefaultRecordBatch.java, see logcore._ref.reader):

    offset  field                   checked                     rewritten
    0       base_offset             -                           next offset
    8       batch_length            >= 49, fits, <= max bytes   -
    12      partition_leader_epoch  -                           if given
    16      magic                   = 2                         -
    17      crc                     CRC-32C of 21 .. end        when 21 .. end changed
    21      attributes              codec id <= 4               LogAppendTime bit
    23      last_offset_delta       = records_count - 1         -
    35      max_timestamp           -                           LogAppendTime, or the
                                                                records' real maximum
    57      records_count           >= 1                        -
    61      records                 every record parses, offset_delta i for record i

Nothing is written unless every batch passed.
"""

from __future__ import annotations

from .. import _compression
from ..errors import CorruptRecordError, RecordTooLargeError
from .crc32c import byte_view, crc32c
from .fields import (
    ATTR_CODEC_MASK,
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    I16,
    I32,
    I64,
    INT32_MAX,
    INT32_MIN,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    OFF_ATTRIBUTES,
    OFF_BASE_OFFSET,
    OFF_BATCH_LENGTH,
    OFF_CRC,
    OFF_LEADER_EPOCH,
    OFF_MAGIC,
    OFF_MAX_TIMESTAMP,
    U32,
    wrap64,
)
from .reader import RecordBatch
from .record import corrupt
from .varint import INT64_MAX, INT64_MIN


class AppendInfo:
    """What validate_for_append found and assigned (read-only attributes).

    first_offset / last_offset: offsets assigned to the first and last record.
    record_count, batch_count, size_in_bytes: totals over the record set.
    max_timestamp, offset_of_max_timestamp (first record holding the max),
    min_timestamp: LogAppendTime sets all three from log_append_time_ms / first_offset.
    shallow_offset_of_max_timestamp: the last offset of the first batch holding the max
    (Kafka's shallowOffsetOfMaxTimestamp, what the time index stores; LogAppendTime: the
    first batch's last offset).
    producer_id, producer_epoch, first_sequence: of the first batch; last_sequence: of the
    last batch (base_sequence + last_offset_delta, wrapping past 2**31 - 1 to 0; -1 when
    base_sequence is -1). is_transactional, is_control: of the first batch.
    timestamp_type: "create" or "log_append", as written.
    """

    __slots__ = (
        "_first_offset",
        "_last_offset",
        "_record_count",
        "_max_timestamp",
        "_offset_of_max_timestamp",
        "_shallow_offset_of_max_timestamp",
        "_min_timestamp",
        "_size_in_bytes",
        "_batch_count",
        "_producer_id",
        "_producer_epoch",
        "_first_sequence",
        "_last_sequence",
        "_is_transactional",
        "_is_control",
        "_timestamp_type",
    )

    def __init__(self, **fields) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, fields[name[1:]])

    first_offset = property(lambda self: self._first_offset)
    last_offset = property(lambda self: self._last_offset)
    record_count = property(lambda self: self._record_count)
    max_timestamp = property(lambda self: self._max_timestamp)
    offset_of_max_timestamp = property(lambda self: self._offset_of_max_timestamp)
    shallow_offset_of_max_timestamp = property(
        lambda self: self._shallow_offset_of_max_timestamp)
    min_timestamp = property(lambda self: self._min_timestamp)
    size_in_bytes = property(lambda self: self._size_in_bytes)
    batch_count = property(lambda self: self._batch_count)
    producer_id = property(lambda self: self._producer_id)
    producer_epoch = property(lambda self: self._producer_epoch)
    first_sequence = property(lambda self: self._first_sequence)
    last_sequence = property(lambda self: self._last_sequence)
    is_transactional = property(lambda self: self._is_transactional)
    is_control = property(lambda self: self._is_control)
    timestamp_type = property(lambda self: self._timestamp_type)

    def __setattr__(self, name, value):
        raise AttributeError(f"AppendInfo is read-only ({name})")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n[1:]}={getattr(self, n)!r}" for n in self.__slots__)
        return f"AppendInfo({fields})"


def _last_sequence(base_sequence: int, delta: int) -> int:
    # DefaultRecordBatch.incrementSequence: sequences wrap from Integer.MAX_VALUE to 0.
    if base_sequence == -1:
        return -1
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


class _Checked:
    """Pass-1 facts about one batch, needed by pass 2 and AppendInfo."""

    __slots__ = ("pos", "batch", "max_ts", "max_ts_delta", "min_ts")

    def __init__(self, pos, batch, max_ts, max_ts_delta, min_ts) -> None:
        self.pos = pos
        self.batch = batch
        self.max_ts = max_ts
        self.max_ts_delta = max_ts_delta  # offset delta of the first record holding max_ts
        self.min_ts = min_ts


def _check_for_append(view: memoryview, pos: int, index: int, max_message_bytes: int) -> _Checked:
    """Pass 1 for the batch at ``pos``, in the contract's order of checks."""
    avail = len(view) - pos
    if avail < HEADER_SIZE:
        raise corrupt(
            f"partial batch: {avail} bytes, a batch header needs {HEADER_SIZE}", index, pos
        )
    (batch_length,) = I32.unpack_from(view, pos + OFF_BATCH_LENGTH)
    if batch_length < MIN_BATCH_LENGTH:
        raise corrupt(
            f"batch_length {batch_length} is below the minimum {MIN_BATCH_LENGTH}", index, pos
        )
    size = LOG_OVERHEAD + batch_length
    if size > avail:
        raise corrupt(f"partial batch: declares {size} bytes, only {avail} present", index, pos)
    if size > max_message_bytes:
        raise RecordTooLargeError(
            f"batch {index} at byte {pos}: {size} bytes exceeds max_message_bytes "
            f"{max_message_bytes}",
            batch_index=index,
            position=pos,
            size=size,
            limit=max_message_bytes,
        )
    magic = view[pos + OFF_MAGIC]
    if magic != MAGIC:
        raise corrupt(f"unsupported magic {magic} (expected 2)", index, pos)
    batch = RecordBatch._at(view[pos : pos + size], pos, index)
    batch._check_crc()
    codec = batch.attributes & ATTR_CODEC_MASK
    if codec >= len(_compression.NAMES):
        raise batch._err(f"unknown compression codec id {codec}")
    count = batch.records_count
    if count < 1:
        raise batch._err(f"records_count {count}: a produced batch needs at least one record")
    if batch.last_offset_delta != count - 1:
        raise batch._err(
            f"last_offset_delta {batch.last_offset_delta} does not match records_count {count}"
        )
    log_append = bool(batch.attributes & ATTR_TIMESTAMP_TYPE)
    max_ts = min_ts = None
    max_ts_delta = 0
    for i, raw in enumerate(batch._raw_records(_compression.append_limit(size))):
        if raw.offset_delta != i:
            raise batch._err(f"record {i} has offset_delta {raw.offset_delta}, expected {i}")
        if log_append:
            ts = batch.max_timestamp
        else:
            ts = wrap64(batch.base_timestamp + raw.timestamp_delta)
        if max_ts is None or ts > max_ts:
            max_ts, max_ts_delta = ts, i
        if min_ts is None or ts < min_ts:
            min_ts = ts
    return _Checked(pos, batch, max_ts, max_ts_delta, min_ts)


def validate_for_append(
    buffer,
    *,
    next_offset: int,
    max_message_bytes: int,
    log_append_time_ms: int | None = None,
    partition_leader_epoch: int | None = None,
) -> AppendInfo:
    """Validate a produced record set and assign offsets in place (the broker's append).

    Pass 1 checks every batch (see _check_for_append for the order); pass 2 rewrites
    base_offset, the leader epoch, and the LogAppendTime / max_timestamp fields with their
    CRC. Nothing is written unless every batch passed, so on error the buffer is untouched.

    Args:
        buffer: a writable buffer (bytearray, writable memoryview, writable mmap).
        next_offset: offset to assign to the first record.
        max_message_bytes: the largest batch (12 + batch_length) accepted.
        log_append_time_ms: if given, stamp LogAppendTime with this time.
        partition_leader_epoch: if given, written into every batch.

    Returns:
        AppendInfo.

    Raises:
        TypeError: the buffer is read-only (or not a buffer).
        CorruptRecordError: any invalid batch, naming batch_index and position.
        RecordTooLargeError: a batch larger than max_message_bytes.
        ValueError: next_offset or the stamps are out of their field's range.
    """
    try:
        view = byte_view(buffer)
    except (ValueError, BufferError) as exc:
        raise TypeError(
            f"validate_for_append needs a writable byte buffer (bytearray, mmap, ...): {exc}"
        ) from None
    if view.readonly:
        raise TypeError("validate_for_append needs a writable buffer (bytearray, mmap, ...)")
    if not 0 <= next_offset <= INT64_MAX:
        raise ValueError(f"next_offset {next_offset} is outside [0, 2**63 - 1]")
    if log_append_time_ms is not None and not INT64_MIN <= log_append_time_ms <= INT64_MAX:
        raise ValueError(f"log_append_time_ms {log_append_time_ms} is outside int64")
    if partition_leader_epoch is not None and not INT32_MIN <= partition_leader_epoch <= INT32_MAX:
        raise ValueError(f"partition_leader_epoch {partition_leader_epoch} is outside int32")
    if len(view) == 0:
        raise CorruptRecordError("empty record set", batch_index=0, position=0)

    # Pass 1: check everything, write nothing.
    checked: list[_Checked] = []
    pos = 0
    while pos < len(view):
        c = _check_for_append(view, pos, len(checked), max_message_bytes)
        checked.append(c)
        pos += c.batch.size_in_bytes
    total = sum(c.batch.records_count for c in checked)
    if next_offset + total - 1 > INT64_MAX:
        raise ValueError(f"offsets from {next_offset} for {total} records overflow int64")

    # Pass 2: rewrite headers in place.
    offset = next_offset
    max_ts = min_ts = None
    offset_of_max = shallow_of_max = next_offset
    for c in checked:
        b = c.batch
        p = c.pos
        I64.pack_into(view, p + OFF_BASE_OFFSET, offset)
        if partition_leader_epoch is not None:
            I32.pack_into(view, p + OFF_LEADER_EPOCH, partition_leader_epoch)
        if log_append_time_ms is not None:
            I16.pack_into(view, p + OFF_ATTRIBUTES, b.attributes | ATTR_TIMESTAMP_TYPE)
            I64.pack_into(view, p + OFF_MAX_TIMESTAMP, log_append_time_ms)
            _rewrite_crc(view, p, b.size_in_bytes)
        elif b.max_timestamp != c.max_ts:
            # Kafka fixes a CreateTime batch whose header max_timestamp disagrees with its
            # records (LogValidator); the CRC covers the field, so recompute it.
            I64.pack_into(view, p + OFF_MAX_TIMESTAMP, c.max_ts)
            _rewrite_crc(view, p, b.size_in_bytes)
        if max_ts is None or c.max_ts > max_ts:
            max_ts, offset_of_max = c.max_ts, offset + c.max_ts_delta
            shallow_of_max = offset + b.records_count - 1  # the batch's last offset
        if min_ts is None or c.min_ts < min_ts:
            min_ts = c.min_ts
        offset += b.records_count

    first, last = checked[0].batch, checked[-1].batch
    if log_append_time_ms is not None:
        max_ts = min_ts = log_append_time_ms
        offset_of_max = next_offset
        # Every batch holds the stamped time: the first one is the batch of the max.
        shallow_of_max = next_offset + first.records_count - 1
        ts_type = "log_append"
    else:
        ts_type = first.timestamp_type
    return AppendInfo(
        first_offset=next_offset,
        last_offset=next_offset + total - 1,
        record_count=total,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        shallow_offset_of_max_timestamp=shallow_of_max,
        min_timestamp=min_ts,
        size_in_bytes=len(view),
        batch_count=len(checked),
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        first_sequence=first.base_sequence,
        last_sequence=_last_sequence(last.base_sequence, last.last_offset_delta),
        is_transactional=first.is_transactional,
        is_control=first.is_control,
        timestamp_type=ts_type,
    )


def _rewrite_crc(view: memoryview, pos: int, size: int) -> None:
    U32.pack_into(view, pos + OFF_CRC, crc32c(view[pos + OFF_ATTRIBUTES : pos + size]))

