"""The append path's pieces outside the Log: results, replica checks, timestamp refusals.

``LogAppendInfo`` wraps the codec's ``AppendInfo`` (from ``validate_for_append``) with what
the log adds: the LogAppendTime stamped, the log start offset, whether the append rolled a
segment, and whether it was an idempotent producer's duplicate. ``DuplicateInfo`` gives a
duplicate the offsets of the batch written earlier; ``MergedInfo`` sums a replica append of
several batches validated one by one (``validate_replica``). ``refuse_timestamps`` is the
slow error path of the leader's timestamp window check.

Thread-safety: pure functions and value objects; the Log calls them under its lock.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from . import decode_columns, iter_batches, validate_for_append
from .checkpoint import LeaderEpochCache
from .errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from .producer_state import BatchMeta

_HEADER_SIZE = 61
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


class MergedInfo:
    """AppendInfo-shaped summary of several per-batch infos (the replica append path)."""

    def __init__(self, infos: list[Any]) -> None:
        first, last = infos[0], infos[-1]
        self.infos = infos
        self.first_offset = first.first_offset
        self.last_offset = last.last_offset
        self.record_count = sum(i.record_count for i in infos)
        best = max(infos, key=lambda i: i.max_timestamp)
        best = next(i for i in infos if i.max_timestamp == best.max_timestamp)
        self.max_timestamp = best.max_timestamp
        self.offset_of_max_timestamp = best.offset_of_max_timestamp
        self.shallow_offset_of_max_timestamp = best.shallow_offset_of_max_timestamp
        self.min_timestamp = min(i.min_timestamp for i in infos)
        self.size_in_bytes = sum(i.size_in_bytes for i in infos)
        self.batch_count = sum(i.batch_count for i in infos)
        self.producer_id = first.producer_id
        self.producer_epoch = first.producer_epoch
        self.first_sequence = first.first_sequence
        self.last_sequence = last.last_sequence
        self.is_transactional = first.is_transactional
        self.is_control = first.is_control
        self.timestamp_type = first.timestamp_type


def refuse_keyless(buf: Any) -> None:
    """A compacted log keeps the latest record per key: a record without a key has no
    place in it (Kafka's LogValidator refuses it with INVALID_RECORD).

    Raises:
        InvalidRecordError: naming the first keyless record's index.
        CorruptRecordError: malformed batches (validate_for_append would refuse them too).
    """
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

def validate_replica(buf: Any, log_end_offset: int, max_message_bytes: int,
                     leader_epoch_cache: LeaderEpochCache) -> Any:
    """Replica path: check each batch in place, keep its offsets, require them increasing."""
    view = memoryview(buf)
    try:
        if view.readonly:
            raise TypeError("append needs a writable buffer")
        infos: list[Any] = []
        pos = 0
        expected = log_end_offset
        n = len(view)
        if n == 0:
            raise CorruptRecordError("empty record set", batch_index=0, position=0)
        epochs = []
        while pos < n:
            if n - pos < _HEADER_SIZE:
                raise CorruptRecordError(
                    f"truncated batch at position {pos}", batch_index=len(infos), position=pos
                )
            base, length, epoch = struct.unpack_from(">qii", view, pos)
            size = 12 + length
            if base < expected:
                raise CorruptRecordError(
                    f"replica batch {len(infos)} at position {pos} has base offset {base}, "
                    f"expected >= {expected} (offsets must increase)",
                    batch_index=len(infos), position=pos,
                )
            if length < 49 or size > n - pos:
                raise CorruptRecordError(
                    f"batch {len(infos)} at position {pos} declares {size} bytes",
                    batch_index=len(infos), position=pos,
                )
            info = validate_for_append(
                view[pos : pos + size], next_offset=base,
                max_message_bytes=max_message_bytes,
            )
            infos.append(info)
            epochs.append((epoch, base))
            expected = info.last_offset + 1
            pos += size
    finally:
        view.release()
    for epoch, base in epochs:
        if epoch >= 0 and (leader_epoch_cache.latest_epoch is None
                           or epoch > leader_epoch_cache.latest_epoch):
            leader_epoch_cache.assign(epoch, base)
    return infos[0] if len(infos) == 1 else MergedInfo(infos)
