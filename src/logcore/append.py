"""The append path's pieces outside the Log: results, replica checks, timestamp refusals.

``LogAppendInfo`` wraps the codec's ``AppendInfo`` (from ``validate_for_append``) with what
the log adds: the LogAppendTime stamped, the log start offset, whether the append rolled a
segment, and whether it was an idempotent producer's duplicate. ``DuplicateInfo`` gives a
duplicate the offsets of the batch written earlier. ``refuse_timestamps`` is the
slow error path of the leader's timestamp window check. ``validate_follower`` is the
replica path's check (Kafka's ``UnifiedLog.appendAsFollower``): framing and CRC only.

Thread-safety: pure functions and value objects; the Log calls them under its lock.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from . import crc32c, decode_columns, iter_batches
from .checkpoint import LeaderEpochCache
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    UnexpectedAppendOffsetError,
)
from .loader import marker_from_batch, meta_from_header
from .producer_state import BatchMeta, MarkerMeta

_HEADER_SIZE = 61
# RecordBatch v2 header: base offset, batch length, partition leader epoch, magic, CRC,
# attributes, last offset delta, base timestamp, max timestamp, producer id, producer
# epoch, base sequence, record count.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC_START = 21  # the CRC covers the batch from its attributes to its end
_MIN_BATCH_LENGTH = _HEADER_SIZE - 12
_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_I32_MAX = 2**31 - 1
_NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP: a record without a timestamp is not judged


class TimestampOffset(NamedTuple):
    """Answer of ``offset_for_timestamp``: the first record at or after a time."""

    offset: int
    timestamp: int


class LogAppendInfo:
    """What ``Log.append`` did: the codec's AppendInfo fields plus the log's view.

    Every attribute of :class:`logcore.AppendInfo` (first_offset, last_offset,
    record_count, max_timestamp, offset_of_max_timestamp, shallow_offset_of_max_timestamp,
    min_timestamp, size_in_bytes, batch_count, producer_id, producer_epoch, first_sequence,
    last_sequence, is_transactional, is_control, timestamp_type) is available, plus:

    Attributes:
        log_append_time_ms: the LogAppendTime stamped, or -1 for CreateTime topics.
        log_start_offset: the log start offset after the append.
        rolled: True if the append rolled a new segment.
        duplicate: True if an idempotent producer's batch repeated one the log already
            holds: nothing was written, and first_offset / last_offset are those of the
            batch written earlier.
    """

    __slots__ = ("_info", "log_append_time_ms", "log_start_offset", "rolled", "duplicate")

    def __init__(self, info: Any, log_append_time_ms: int, log_start_offset: int, rolled: bool,
                 duplicate: bool = False):
        self._info = info
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.rolled = rolled
        self.duplicate = duplicate

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._info, name)

    def __repr__(self) -> str:
        return (
            f"LogAppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
            f"record_count={self.record_count}, size_in_bytes={self.size_in_bytes}, "
            f"log_append_time_ms={self.log_append_time_ms}, rolled={self.rolled}"
            f"{', duplicate=True' if self.duplicate else ''})"
        )


class DuplicateInfo:
    """The incoming batch's AppendInfo, with the offsets of the batch it repeats."""

    def __init__(self, info: Any, original: BatchMeta) -> None:
        self._info = info
        self.first_offset = original.first_offset
        self.last_offset = original.last_offset
        self.offset_of_max_timestamp = original.last_offset
        self.shallow_offset_of_max_timestamp = original.last_offset
        self.record_count = original.last_offset - original.first_offset + 1

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._info, name)


#: Batches of at most this many records are checked for keyless records by walking them
#: (about 0.5 us + 0.08 us a record); larger ones through ``decode_columns`` (about 15 us
#: of fixed cost for its arrays + 0.02 us a record). A coordinator's one-record commit on
#: a compacted ``__consumer_offsets`` paid the fixed cost on every append (17 us of a
#: ~100 us OffsetCommit).
KEYLESS_WALK_MAX_RECORDS = 64
_BATCH_LENGTH_AT_8 = struct.Struct(">i")
_RECORDS_COUNT_AT_57 = struct.Struct(">i")


def refuse_keyless(buf: Any) -> None:
    """A compacted log keeps the latest record per key: a record without a key has no
    place in it (Kafka's LogValidator refuses it with INVALID_RECORD).

    Raises:
        InvalidRecordError: naming the first keyless record's index.
        CorruptRecordError: malformed batches (validate_for_append would refuse them too).
    """
    n = len(buf)
    if (n >= _HEADER_SIZE and _BATCH_LENGTH_AT_8.unpack_from(buf, 8)[0] + 12 == n
            and _RECORDS_COUNT_AT_57.unpack_from(buf, 57)[0] <= KEYLESS_WALK_MAX_RECORDS):
        index = 0
        for batch in iter_batches(buf):  # exactly one batch, few records
            for record in batch:
                if record.key is None:
                    raise InvalidRecordError(
                        f"compacted topic cannot accept a record without a key (record {index})",
                        record_index=index)
                index += 1
        return
    valid = decode_columns(buf).key_valid
    if len(valid) and not valid.all():
        index = int((~valid).argmax())
        raise InvalidRecordError(
            f"compacted topic cannot accept a record without a key (record {index})",
            record_index=index)


def refuse_timestamps(buf: Any, now: int, before: int, after: int) -> None:
    """The error path of the leader's timestamp check (KIP-937 window): find the records outside the window.

    Walks every record (slow, only here). Returns without raising when the only
    records out of the window carry no timestamp (-1), which Kafka does not judge.
    """
    low, high = now - before, now + after
    violations: list[tuple[int, int]] = []
    index = 0
    for batch in iter_batches(buf):
        for rec in batch:
            ts = rec.timestamp
            if ts != _NO_TIMESTAMP and (ts < low or ts > high):
                violations.append((index, ts))
            index += 1
    if not violations:
        return
    first_index, first_ts = violations[0]
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    raise InvalidTimestampError(
        f"timestamp {first_ts} of record {first_index}{more} is out of range: it should be "
        f"within [{low}, {high}] (clock {now}, message.timestamp.before.max.ms {before}, "
        f"message.timestamp.after.max.ms {after})",
        timestamp=first_ts, low=low, high=high, violations=tuple(violations),
    )

class FollowerAppendInfo:
    """AppendInfo-shaped summary of a follower append (:func:`validate_follower`).

    Only what the batch headers say: the records are not decoded (the leader validated
    them). ``min_timestamp`` is the smallest batch base timestamp (only the leader's
    timestamp check reads it); ``offset_of_max_timestamp`` is the last offset of the first
    batch holding the largest timestamp, as Kafka's follower append reports it.
    ``epochs`` lists (partition leader epoch, base offset) per batch, ``batch_positions``
    each batch's position, and ``has_producer_state`` says whether any batch has a
    producer id or is a control batch.
    """

    __slots__ = (
        "first_offset", "last_offset", "record_count", "max_timestamp",
        "offset_of_max_timestamp", "shallow_offset_of_max_timestamp", "min_timestamp",
        "size_in_bytes", "batch_count", "producer_id", "producer_epoch", "first_sequence",
        "last_sequence", "is_transactional", "is_control", "timestamp_type", "epochs",
        "batch_positions", "has_producer_state",
    )

    def __init__(self, *, first_offset: int, last_offset: int, record_count: int,
                 max_timestamp: int, offset_of_max_timestamp: int, min_timestamp: int,
                 size_in_bytes: int, producer_id: int, producer_epoch: int,
                 first_sequence: int, last_sequence: int, is_transactional: bool,
                 is_control: bool, timestamp_type: str, epochs: list[tuple[int, int]],
                 batch_positions: list[int], has_producer_state: bool) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.record_count = record_count
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = offset_of_max_timestamp
        self.shallow_offset_of_max_timestamp = offset_of_max_timestamp
        self.min_timestamp = min_timestamp
        self.size_in_bytes = size_in_bytes
        self.batch_count = len(batch_positions)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.first_sequence = first_sequence
        self.last_sequence = last_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self.epochs = epochs
        self.batch_positions = batch_positions
        self.has_producer_state = has_producer_state

    def __repr__(self) -> str:
        return (f"FollowerAppendInfo(first_offset={self.first_offset}, "
                f"last_offset={self.last_offset}, batch_count={self.batch_count}, "
                f"size_in_bytes={self.size_in_bytes})")


def _last_sequence(base_sequence: int, delta: int) -> int:
    if base_sequence < 0:
        return -1
    return (base_sequence + delta) % (_I32_MAX + 1)


def validate_follower(buf: Any, log_end_offset: int) -> FollowerAppendInfo:
    """Check a follower's fetched batches as Kafka's ``UnifiedLog.appendAsFollower`` does.

    The leader's batches are stored as they are, so only what proves they arrived intact
    and fit after this log is checked: every batch's length (at least a header, within the
    buffer), magic 2, CRC-32C, a last offset delta >= 0 and a record count >= 0; base
    offsets increasing (each batch's base after the previous batch's last offset) and the
    first one at or after ``log_end_offset``. The leader's produce-time checks are not
    repeated: a batch the log cleaner rewrote has fewer records than its offset delta
    says, and an emptied one none at all; ``max.message.bytes``, timestamps and
    compression were the leader's to judge. Nothing is decompressed.

    Raises:
        CorruptRecordError: naming the batch index, its base offset and its position in
            the buffer (a bad CRC says both checksums).
        UnexpectedAppendOffsetError: the first batch starts below ``log_end_offset``
            (it carries the batches' first and last offsets).
    """
    view = memoryview(buf)
    try:
        n = len(view)
        if n == 0:
            raise CorruptRecordError("empty record set", batch_index=0, position=0)
        unpack = _HEADER.unpack_from
        first: tuple[Any, ...] = ()
        last_sequence = -1
        epochs: list[tuple[int, int]] = []
        positions: list[int] = []
        pos = 0
        index = 0
        prev_last = -1
        records = 0
        max_ts = -1
        off_max = -1
        min_ts: int | None = None
        producer_state = False
        while pos < n:
            if n - pos < _HEADER_SIZE:
                raise CorruptRecordError(
                    f"truncated batch {index} at position {pos}: {n - pos} bytes left, a "
                    f"batch header has {_HEADER_SIZE}", batch_index=index, position=pos)
            (base, length, epoch, magic, crc, attrs, lod, base_ts, batch_max_ts, pid, pepoch,
             bseq, count) = unpack(view, pos)
            size = 12 + length
            if length < _MIN_BATCH_LENGTH or size > n - pos:
                raise CorruptRecordError(
                    f"batch {index} (base offset {base}) at position {pos} declares "
                    f"{size} bytes; {n - pos} are left and a batch has at least "
                    f"{_HEADER_SIZE}", batch_index=index, position=pos)
            if magic != 2:
                raise CorruptRecordError(
                    f"batch {index} (base offset {base}) at position {pos} has magic "
                    f"{magic}; only magic 2 is supported", batch_index=index, position=pos)
            actual = crc32c(view[pos + _CRC_START: pos + size])
            if actual != crc:
                raise CorruptRecordError(
                    f"batch {index} (base offset {base}) at position {pos} is corrupt: "
                    f"stored CRC {crc:#010x}, computed {actual:#010x}",
                    batch_index=index, position=pos)
            if lod < 0 or count < 0:
                raise CorruptRecordError(
                    f"batch {index} (base offset {base}) at position {pos} has last offset "
                    f"delta {lod} and record count {count}",
                    batch_index=index, position=pos)
            last = base + lod
            if index == 0:
                if base < log_end_offset:
                    raise UnexpectedAppendOffsetError(
                        f"unexpected offset in a follower append: the first batch has "
                        f"offsets [{base}, {last}], expected >= {log_end_offset} (the log "
                        "end offset)", first_offset=base, last_offset=last,
                        log_end_offset=log_end_offset)
                first = (base, pid, pepoch, bseq, attrs)
            elif base <= prev_last:
                raise CorruptRecordError(
                    f"batch {index} at position {pos} has base offset {base}, expected "
                    f">= {prev_last + 1} (offsets must increase)",
                    batch_index=index, position=pos)
            if batch_max_ts > max_ts:
                max_ts, off_max = batch_max_ts, last
            if min_ts is None or base_ts < min_ts:
                min_ts = base_ts
            if pid >= 0 or attrs & _ATTR_CONTROL:
                producer_state = True
            records += count
            epochs.append((epoch, base))
            positions.append(pos)
            last_sequence = _last_sequence(bseq, lod)
            prev_last = last
            pos += size
            index += 1
    finally:
        view.release()
    base0, pid0, pepoch0, bseq0, attrs0 = first
    return FollowerAppendInfo(
        first_offset=base0, last_offset=prev_last, record_count=records,
        max_timestamp=max_ts, offset_of_max_timestamp=off_max if off_max >= 0 else prev_last,
        min_timestamp=-1 if min_ts is None else min_ts, size_in_bytes=n, producer_id=pid0,
        producer_epoch=pepoch0, first_sequence=bseq0, last_sequence=last_sequence,
        is_transactional=bool(attrs0 & _ATTR_TRANSACTIONAL),
        is_control=bool(attrs0 & _ATTR_CONTROL),
        timestamp_type="log_append" if attrs0 & _ATTR_TIMESTAMP_TYPE else "create",
        epochs=epochs, batch_positions=positions, has_producer_state=producer_state)


def record_follower_epochs(info: FollowerAppendInfo, leader_epoch_cache: LeaderEpochCache) -> None:
    """Kafka's ``maybeAssignEpochStartOffset`` per batch: each epoch newer than the
    cache's latest starts at the base offset of its first batch."""
    for epoch, base in info.epochs:
        if epoch >= 0 and (leader_epoch_cache.latest_epoch is None
                           or epoch > leader_epoch_cache.latest_epoch):
            leader_epoch_cache.assign(epoch, base)


def follower_producer_items(buf: Any, n: int) -> list[BatchMeta | MarkerMeta]:
    """Producer-state items (data batches with a producer id, transaction markers) of the
    ``n`` bytes of batches :func:`validate_follower` accepted, in order, read before the
    write so that a malformed control record refuses the append instead of leaving the
    producer state behind the log. A control batch the cleaner emptied gives no item.

    Raises:
        CorruptRecordError: a control record that is not one, naming its batch's base
            offset and position.
    """
    out: list[BatchMeta | MarkerMeta] = []
    pos = 0
    unpack = _HEADER.unpack_from
    while pos + _HEADER_SIZE <= n:
        f = unpack(buf, pos)
        item: BatchMeta | MarkerMeta | None
        if f[5] & _ATTR_CONTROL:
            try:
                item = marker_from_batch(f, buf, pos)
            except (CorruptRecordError, struct.error, IndexError, ValueError) as exc:
                raise CorruptRecordError(
                    f"control batch (base offset {f[0]}) at position {pos} does not hold a "
                    f"valid control record: {exc}", position=pos) from exc
        else:
            item = meta_from_header(f)
        if item is not None:
            out.append(item)
        pos += 12 + f[1]
    return out
