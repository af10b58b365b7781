"""The log cleaner: compaction of ``cleanup_policy=compact`` logs (Kafka's ``Cleaner``).

One clean of one log (:meth:`Cleaner.clean`), as Kafka's ``Cleaner.doClean``:

1. The dirty section runs from ``log.first_dirty_offset`` (the cleaner checkpoint) to
   ``log.first_uncleanable_offset`` (never the active segment; nothing newer than
   ``min_compaction_lag_ms``; nothing at or above the owner's high watermark).
2. An :class:`OffsetMap` (key hash -> latest offset, 24 bytes per slot) is filled from the
   dirty section batch by batch. When it is full the round ends after the last batch
   that fitted; the rest of the dirty section is left to the next round.
3. Every segment below the round's end offset is recopied, in groups of consecutive
   segments that fit one segment (``segment_bytes``, ``segment_index_bytes``, int32
   relative offsets), into ``<first base>.log.cleaned`` with its indexes. Below the
   round's end a record is kept when it has a key, no later record of its key is in the
   map, and it is not a tombstone past its delete horizon; past the round's end (the
   rest of the last segment) every record is kept (Kafka's ``pastLatestOffset``). A batch keeps its base offset, last offset delta,
   producer id, epoch and base sequence, and its record offsets and timestamps; it is
   copied unchanged when all its records stay, rebuilt (re-compressed with its own codec)
   when some go, and reduced to an empty batch when none stay but it is the last batch
   of a producer the log still tracks (so the producer's sequence survives).
4. Tombstones (a null value): the first clean that keeps a tombstone stamps its batch
   with the delete horizon (KIP-534: attribute bit 6, base timestamp = clean time +
   ``delete_retention_ms``; record timestamps are rebased, not changed); a later clean
   drops the tombstones of batches whose horizon has passed.
5. Transactions (Kafka's ``CleanedTransactionMetadata``, :class:`logcore.txn_index.CleanedTxns`):
   nothing at or above the last stable offset is cleaned; the batches of aborted
   transactions are dropped whatever their keys (and never enter the offset map); a
   marker whose transaction has no data left in the range is stamped with the delete
   horizon at the first clean that finds it so, and dropped by a later clean once the
   horizon (``delete_retention_ms``) has passed; an ABORT marker that stays keeps its
   ``.txnindex`` entry, which the cleaned segment's ``.txnindex`` carries.
6. Each group is swapped in by ``log.replace_segments`` (crash-safe, see
   :mod:`logcore.compaction`), then the checkpoint records the round's end offset.

Record walks run in the compiled ``logcore._offset_map`` with the GIL released (the
pure-Python twin under ``LOGCORE_PUREPYTHON=1``); decompression and recompression use
the codecs of :mod:`logcore._compression`. Reads and writes go through a
:class:`Throttler` (``log.cleaner.io.max.bytes.per.second``).

Choosing which log to clean (Kafka's ``LogCleanerManager.grabFilthiestCompactedLog``):
:func:`cleanable` measures a log, :func:`filthiest` picks one. The cleaner threads
themselves belong to the owner (a LogManager).

Thread-safety: a Cleaner (it owns one offset map) is used by one thread at a time; it
may clean a log while other threads append to and read from it.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from . import IMPLEMENTATION, _compression, crc32c
from . import compaction as _compaction
from .errors import CorruptRecordError, LogcoreError
from .segment import (
    HEADER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
)
from .segment_files import cleaned_path
from .txn_index import CleanedTxns, encode_entry, parse_control, rebase_records

if IMPLEMENTATION == "python":
    from ._ref.index import OffsetIndex, TimeIndex
    from ._ref.offset_map import OffsetMap
else:
    from ._index import OffsetIndex, TimeIndex  # type: ignore[assignment]
    from ._offset_map import OffsetMap  # type: ignore[assignment]

__all__ = ["CleanStats", "Cleaner", "CleaningAbortedError", "LogToClean", "OffsetMap",
           "Throttler", "cleanable", "filthiest"]

_ATTR_CODEC = 0x07
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTR_DELETE_HORIZON = 0x40
_HSIZE = HEADER.size
_U32 = struct.Struct(">I")
_I32_MAX = 2**31 - 1

class CleaningAbortedError(LogcoreError):
    """A clean round stopped because its owner asked (``Cleaner.clean``'s ``should_abort``;
    Kafka's ``LogCleaningAbortedException``). The groups already swapped in stay (each is
    a complete cleaned copy); the checkpoint did not move, so the next round starts over."""


def _never() -> bool:
    return False


# Kafka's CleanerConfig defaults.
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
DEFAULT_IO_BUFFER_SIZE = 512 * 1024  # log.cleaner.io.buffer.size
DEFAULT_MAX_IO_BYTES_PER_SECOND = float("inf")  # log.cleaner.io.max.bytes.per.second


class Throttler:
    """Sleeps so that the bytes reported through ``maybe_throttle`` stay under a rate
    (Kafka's ``Throttler``).

    Checked every 10 ms of work where Kafka's checks every 300 ms, and restarted at the
    start of each clean (``restart``): with Kafka's interval a clean shorter than 300 ms
    (tens of MB of uncompressed batches) is never throttled, and the idle time before a
    clean counts as unused budget.

    Args:
        bytes_per_second: the limit (``inf``: never sleep).
        sleep / monotonic: injectable for tests (``time.sleep``, ``time.monotonic``).
    """

    def __init__(self, bytes_per_second: float, *, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic,
                 check_interval_s: float = 0.01) -> None:
        if not bytes_per_second > 0:
            raise ValueError(f"bytes_per_second must be positive, got {bytes_per_second}")
        self.rate = bytes_per_second
        self._sleep = sleep
        self._now = monotonic
        self._interval = check_interval_s
        self._start = monotonic()
        self._observed = 0
        #: seconds slept so far
        self.slept = 0.0

    def restart(self) -> None:
        """Start a new measuring period (no credit for the time before it)."""
        self._start = self._now()
        self._observed = 0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.rate == float("inf"):
            return
        self._observed += nbytes
        elapsed = self._now() - self._start
        if elapsed < self._interval:
            return
        wanted = self._observed / self.rate
        if wanted > elapsed:
            pause = wanted - elapsed
            self._sleep(pause)
            self.slept += pause
        self._start = self._now()
        self._observed = 0


class CleanStats(NamedTuple):
    """What one clean did."""

    first_dirty_offset: int
    end_offset: int  # the round's end: everything below is clean now (the checkpoint)
    first_uncleanable_offset: int
    map_entries: int
    segments_cleaned: int  # old segments replaced
    bytes_read: int
    bytes_written: int
    records_read: int
    records_retained: int
    tombstones_removed: int
    empty_batches_kept: int
    throttled_s: float
    elapsed_s: float


class LogToClean(NamedTuple):
    """Kafka's ``LogToClean``: how dirty a compacted log is."""

    log: Any
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    due: bool  # max_compaction_lag_ms passed: clean whatever the ratio

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0


def cleanable(log: Any, now_ms: int | None = None,
              upper_bound: int | None = None) -> LogToClean:
    """Measure ``log``: clean bytes (segments wholly below the first dirty offset) and
    cleanable bytes (the segments from there to the first uncleanable offset)."""
    first_dirty = log.first_dirty_offset
    upper = log.first_uncleanable_offset(now_ms, upper_bound)
    segments = log._snapshot.segments
    clean = dirty = 0
    for i, seg in enumerate(segments[:-1]):
        nxt = segments[i + 1].base_offset
        if nxt <= first_dirty:
            clean += seg.size
        elif seg.base_offset < upper:
            dirty += seg.size
    return LogToClean(log, first_dirty, upper, clean, dirty, log.dirty_segments_due(now_ms))


def filthiest(logs: Iterable[Any], now_ms: int | None = None,
              upper_bounds: dict[Any, int] | None = None) -> LogToClean | None:
    """Kafka's ``grabFilthiestCompactedLog``: among the open compacted logs, the one with
    the highest dirty ratio over its ``min_cleanable_dirty_ratio`` (or with a dirty
    segment older than ``max_compaction_lag_ms``), or None."""
    best: LogToClean | None = None
    for log in logs:
        if log.closed or not log.config.compact:
            continue
        bound = None if upper_bounds is None else upper_bounds.get(log)
        c = cleanable(log, now_ms, bound)
        if c.cleanable_bytes <= 0:
            continue
        if not (c.due or c.dirty_ratio > log.config.min_cleanable_dirty_ratio):
            continue
        key = (c.due, c.dirty_ratio)
        if best is None or key > (best.due, best.dirty_ratio):
            best = c
    return best


def _group_segments(segments: list[LogSegment], max_size: int, max_index_size: int,
                    end_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: runs of segments whose sum fits one segment and
    one index, and whose offsets fit int32 relative to the first base."""
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        isize = _index_size(segments[i])
        i += 1
        while i < len(segments):
            nxt = segments[i]
            last = segments[i + 1].base_offset - 1 if i + 1 < len(segments) else end_offset - 1
            nsize = _index_size(nxt)
            if (size + nxt.size > max_size or isize + nsize > max_index_size
                    or last - group[0].base_offset > _I32_MAX):
                break
            group.append(nxt)
            size += nxt.size
            isize += nsize
            i += 1
        groups.append(group)
    return groups


def _index_size(seg: LogSegment) -> int:
    try:
        return os.path.getsize(seg.path(INDEX_SUFFIX))
    except OSError:
        return 0


class _Batches:
    """The batches of one inactive segment, read with ``pread`` a few hundred KiB at a
    time. Yields ``(buffer, position in buffer, size, header fields)``; the buffer stays
    valid until the next step. Reads, not a mapping: a segment truncated meanwhile (a
    replica's truncation the owner did not pause the cleaner for) ends the walk with
    CorruptRecordError instead of a SIGBUS."""

    def __init__(self, seg: LogSegment, chunk: int) -> None:
        file = seg.file  # held: the descriptor stays open while this walks it
        if seg.fd < 0 or file.fd < 0:
            raise LogcoreError(f"segment {seg.base_offset} of {seg.directory} is closed")
        self.file = file
        self.size = seg.size
        self.chunk = chunk

    def __iter__(self) -> Any:
        fd, end, chunk = self.file.fd, self.size, self.chunk
        buf, start = b"", 0  # buf holds the file's bytes [start, start + len(buf))
        pos = 0
        while pos + _HSIZE <= end:
            if pos + _HSIZE > start + len(buf):
                buf, start = os.pread(fd, min(chunk, end - pos), pos), pos
                if len(buf) < _HSIZE:
                    raise CorruptRecordError(f"segment ends early at position {pos}",
                                             position=pos)
            f = HEADER.unpack_from(buf, pos - start)
            size = 12 + f[1]
            if f[1] < 49 or pos + size > end:
                raise CorruptRecordError(f"bad batch at position {pos}", position=pos)
            if pos + size > start + len(buf):
                buf, start = os.pread(fd, min(max(chunk, size), end - pos), pos), pos
                if len(buf) < size:
                    raise CorruptRecordError(f"segment ends early at position {pos}",
                                             position=pos)
            yield buf, pos - start, size, f
            pos += size


def _section(buf: bytes, pos: int, size: int, attrs: int) -> Any:
    body = memoryview(buf)[pos + _HSIZE:pos + size]
    codec = attrs & _ATTR_CODEC
    if codec == _compression.NONE:
        return body
    return _compression.decompress(codec, body)


def _batch(f: tuple[Any, ...], attrs: int, base_ts: int, max_ts: int, count: int,
           records: bytes) -> bytes:
    """A batch with the header fields of ``f`` (offsets, producer, epochs) and new
    attributes, timestamps, count and records; CRC computed."""
    out = bytearray(_HSIZE)
    out += records
    HEADER.pack_into(out, 0, f[0], len(out) - 12, f[2], 2, 0, attrs, f[6], base_ts, max_ts,
                     f[9], f[10], f[11], count)
    _U32.pack_into(out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


class _Writer:
    """Writes one ``.cleaned`` segment and its two indexes."""

    def __init__(self, directory: str, base: int, index_bytes: int, interval: int,
                 throttler: Throttler, io_buffer: int) -> None:
        self.base = base
        self.path = cleaned_path(directory, base, LOG_SUFFIX)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            try:
                os.unlink(cleaned_path(directory, base, suffix))
            except FileNotFoundError:
                pass
        self.directory = directory
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                          | getattr(os, "O_CLOEXEC", 0), 0o644)
        self.oi = OffsetIndex(cleaned_path(directory, base, INDEX_SUFFIX), base, index_bytes,
                              True)
        self.ti = TimeIndex(cleaned_path(directory, base, TIME_INDEX_SUFFIX), base,
                            index_bytes, True)
        self.interval = interval
        self.since_index = 0
        self.pos = 0
        self.buf = bytearray()
        self.io_buffer = io_buffer
        self.throttler = throttler
        self.max_ts = -1
        self.offset_of_max_ts = base
        self.written = 0

    def add(self, data: Any, last_offset: int, max_ts: int) -> None:
        n = len(data)
        if max_ts > self.max_ts:
            self.max_ts, self.offset_of_max_ts = max_ts, last_offset
        if self.since_index > self.interval:
            if not self.oi.is_full() and self.ti.entries + 1 < self.ti.max_entries:
                self.oi.append(last_offset, self.pos)
                self.ti.append(self.max_ts, self.offset_of_max_ts)
            self.since_index = n
        else:
            self.since_index += n
        self.buf += data
        self.pos += n
        if len(self.buf) >= self.io_buffer:
            self._drain()

    def _drain(self) -> None:
        view = memoryview(self.buf)
        done = 0
        while done < len(view):
            done += os.write(self.fd, view[done:])
        view.release()
        self.written += len(self.buf)
        self.throttler.maybe_throttle(len(self.buf))
        self.buf = bytearray()

    def finish(self, mtime: float, aborted: list[Any] | None = None) -> None:
        """Flush, fsync, trim the indexes, write the ``.txnindex`` entries carried over
        (when there are any), stamp the group's newest mtime."""
        if aborted:
            path = cleaned_path(self.directory, self.base, TXN_INDEX_SUFFIX)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                         | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                data = memoryview(b"".join(encode_entry(t) for t in aborted))
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
        self._drain()
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        if self.max_ts >= 0:
            self.ti.append(self.max_ts, self.offset_of_max_ts, True)
        for idx in (self.oi, self.ti):
            idx.trim_to_valid_size()
            idx.flush()
            idx.close()
        # Kafka gives the cleaned segment the group's last modification time (retention
        # by time of records without timestamps goes by it).
        os.utime(self.path, (mtime, mtime))

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        for idx in (self.oi, self.ti):
            idx.close()
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            try:
                os.unlink(cleaned_path(os.path.dirname(self.path), self.base, suffix))
            except FileNotFoundError:
                pass


class Cleaner:
    """Cleans compacted logs, one at a time, with one offset map.

    Args:
        dedupe_buffer_size: bytes of the offset map (Kafka: log.cleaner.dedupe.buffer.size
            divided by log.cleaner.threads; 128 MiB / 1).
        load_factor: log.cleaner.io.buffer.load.factor (0.9).
        max_io_bytes_per_second: log.cleaner.io.max.bytes.per.second (no limit).
        io_buffer_size: bytes written per write call (log.cleaner.io.buffer.size 512 KiB).
        throttler: a ready :class:`Throttler` (tests), instead of the rate.
    """

    def __init__(self, dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE, *,
                 load_factor: float = DEFAULT_LOAD_FACTOR,
                 max_io_bytes_per_second: float = DEFAULT_MAX_IO_BYTES_PER_SECOND,
                 io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
                 throttler: Throttler | None = None) -> None:
        # Kafka caps each thread's map at Int.MaxValue bytes.
        self.offset_map = OffsetMap(min(dedupe_buffer_size, _I32_MAX), load_factor)
        self.throttler = throttler or Throttler(max_io_bytes_per_second)
        self.io_buffer_size = io_buffer_size
        self._should_abort: Callable[[], bool] = _never

    def clean(self, log: Any, now_ms: int | None = None, upper_bound: int | None = None,
              should_abort: Callable[[], bool] | None = None) -> CleanStats | None:
        """One round of cleaning of ``log`` (see the module docstring).

        Args:
            now_ms: the time horizons are judged against (the log's clock when None).
            upper_bound: clean nothing at or above this offset (the high watermark).
            should_abort: asked before each batch and each swap (any thread may make it
                true); when it answers True the round stops (Kafka's
                ``checkCleaningAborted``).

        Returns:
            What was done, or None when the log has no cleanable section.

        Raises:
            LogcoreError: the log is not compacted, or closed meanwhile; the map cannot
                hold a single batch of the dirty section. CorruptRecordError: a batch
                of the dirty section is malformed (nothing was swapped for it).
            CleaningAbortedError: ``should_abort`` said so.
        """
        if not log.config.compact:
            raise LogcoreError(f"log {log.directory} has cleanup_policy "
                               f"{log.config.cleanup_policy!r}, not compact")
        self._should_abort = should_abort or _never
        try:
            return self._clean(log, now_ms, upper_bound)
        finally:
            self._should_abort = _never

    def _check_aborted(self, log: Any) -> None:
        if self._should_abort():
            raise CleaningAbortedError(f"cleaning {log.directory} was aborted")

    def _clean(self, log: Any, now_ms: int | None, upper_bound: int | None) -> CleanStats | None:
        started = time.monotonic()
        self.throttler.restart()
        slept0 = self.throttler.slept
        now = log.clock.time_ms() if now_ms is None else now_ms
        first_dirty = log.first_dirty_offset
        upper = log.first_uncleanable_offset(now, upper_bound)
        if upper <= first_dirty:
            return None
        segments = list(log._snapshot.segments)
        omap = self.offset_map
        omap.clear()
        end, bytes_read = self._build_map(log, segments, first_dirty, upper,
                                          log.aborted_transactions(first_dirty, upper))
        if end <= first_dirty:
            return None
        cfg = log.config
        to_clean = [s for s in segments[:-1] if s.base_offset < end]
        groups = _group_segments(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, end)
        with log._lock:
            # The last batch of each producer the log tracks (an empty batch keeps it).
            last_batches = {pid: e.batches[-1].last_offset
                            for pid, e in log.producer_state.producers.items() if e.batches}
        totals = [0] * 6
        replaced = 0
        complete = True
        bases = [s.base_offset for s in segments]
        for group in groups:
            k = bases.index(group[-1].base_offset) + 1
            group_end = bases[k] if k < len(bases) else end
            txns = CleanedTxns(log.aborted_transactions(group[0].base_offset, group_end))
            stats = self._clean_group(log, group, now, last_batches, end, txns)
            if _compaction.phase_hook is not None:
                _compaction.phase_hook("cleaned")
            self._check_aborted(log)  # nothing of this group swapped in yet
            if not log.replace_segments(group, group[0].base_offset):
                # Retention or a truncation changed these segments meanwhile: stop, and
                # leave the checkpoint where it was (the next round starts over).
                complete = False
                break
            replaced += len(group)
            for k in range(6):
                totals[k] += stats[k]
        if complete:
            log.checkpoint_cleaned(end)
        return CleanStats(first_dirty, end, upper, omap.size, replaced,
                          bytes_read + totals[0], totals[1], totals[2], totals[3], totals[4],
                          totals[5], self.throttler.slept - slept0,
                          time.monotonic() - started)

    def _build_map(self, log: Any, segments: list[LogSegment], first_dirty: int,
                   upper: int, aborted: list[Any]) -> tuple[int, int]:
        """Fill the map from [first_dirty, upper); returns (round end offset, bytes read)."""
        omap = self.offset_map
        end = first_dirty
        nread = 0
        txns = CleanedTxns(aborted)
        for i, seg in enumerate(segments[:-1]):
            if seg.base_offset >= upper:
                break
            if segments[i + 1].base_offset <= first_dirty:
                continue
            for buf, pos, size, f in _Batches(seg, self.io_buffer_size):
                self._check_aborted(log)
                base, last = f[0], f[0] + f[6]
                if last < first_dirty:
                    continue
                if base >= upper:
                    break
                count = f[12]
                if f[5] & _ATTR_CONTROL:
                    txns.on_control(f[9], parse_control(buf, pos)[0], last)
                elif txns.on_batch(f[9], bool(f[5] & _ATTR_TRANSACTIONAL), last):
                    count = 0  # aborted data: dropped, never in the map
                if not f[5] & _ATTR_CONTROL and count:
                    if omap.size + count > omap.capacity:
                        if end == first_dirty:
                            raise LogcoreError(
                                f"the offset map ({omap.capacity} entries) cannot hold "
                                f"the {count} records of the batch at offset {base}; "
                                "raise log.cleaner.dedupe.buffer.size")
                        return end, nread
                    omap.put_records(_section(buf, pos, size, f[5]), count, base, upper)
                end = last + 1
                nread += size
                self.throttler.maybe_throttle(size)
        return end, nread

    def _clean_group(self, log: Any, group: list[LogSegment], now: int,
                     last_batches: dict[int, int], end: int, txns: CleanedTxns) -> list[int]:
        cfg = log.config
        omap = self.offset_map
        horizon = now + cfg.delete_retention_ms
        writer = _Writer(log.directory, group[0].base_offset, cfg.segment_index_bytes,
                         cfg.index_interval_bytes, self.throttler, self.io_buffer_size)
        nread = records = retained = tombstones_removed = empties = 0
        mtime = 0.0
        try:
            for seg in group:
                try:
                    mtime = max(mtime, os.stat(seg.file.path).st_mtime)
                except OSError:
                    pass
                for view, pos, size, f in _Batches(seg, self.io_buffer_size):
                    self._check_aborted(log)
                    nread += size
                    self.throttler.maybe_throttle(size)
                    attrs, count, base_ts, max_ts = f[5], f[12], f[7], f[8]
                    last = f[0] + f[6]
                    if attrs & _ATTR_CONTROL:
                        self._clean_marker(writer, txns, view, pos, size, f, now, horizon)
                        continue
                    if txns.on_batch(f[9], bool(attrs & _ATTR_TRANSACTIONAL), last):
                        records += count
                        if f[9] >= 0 and last_batches.get(f[9]) == last:
                            writer.add(_batch(f, attrs & ~_ATTR_CODEC, base_ts, max_ts, 0,
                                              b""), last, max_ts)
                            empties += 1
                        continue
                    if count == 0:
                        writer.add(memoryview(view)[pos:pos + size], last, max_ts)
                        continue
                    records += count
                    has_horizon = bool(attrs & _ATTR_DELETE_HORIZON)
                    retain_deletes = base_ts > now if has_horizon else True
                    section = _section(view, pos, size, attrs)
                    kept_bytes, kept, tombs, kept_max, _keyless = omap.retain_records(
                        section, count, f[0], base_ts, base_ts, retain_deletes, end)
                    if has_horizon and not retain_deletes:
                        # every tombstone of the batch went (its horizon passed)
                        tombstones_removed += _count_tombstones(section, count, f[0],
                                                                omap, end)
                    retained += kept
                    if kept == count and (has_horizon or not tombs):
                        writer.add(memoryview(view)[pos:pos + size], last, max_ts)
                        continue
                    if kept == 0:
                        if f[9] >= 0 and last_batches.get(f[9]) == last:
                            writer.add(_batch(f, attrs & ~_ATTR_CODEC, base_ts, max_ts, 0,
                                              b""), last, max_ts)
                            empties += 1
                        continue
                    new_attrs, new_base = attrs, base_ts
                    if tombs and not has_horizon:
                        new_attrs |= _ATTR_DELETE_HORIZON
                        new_base = horizon
                        kept_bytes = omap.retain_records(section, count, f[0], base_ts,
                                                         horizon, retain_deletes, end)[0]
                    new_max = max_ts if attrs & _ATTR_LOG_APPEND_TIME else kept_max
                    codec = attrs & _ATTR_CODEC
                    if codec != _compression.NONE:
                        kept_bytes = _compression.compress(codec, kept_bytes)
                    writer.add(_batch(f, new_attrs, new_base, new_max, kept, kept_bytes),
                               last, new_max)
            writer.finish(mtime, txns.kept)
        except BaseException:
            writer.abort()
            raise
        return [nread, writer.written, records, retained, tombstones_removed, empties]

    @staticmethod
    def _clean_marker(writer: _Writer, txns: CleanedTxns, view: Any, pos: int, size: int,
                      f: tuple[Any, ...], now: int, horizon: int) -> None:
        """A control batch: kept while its transaction has data; then stamped with the
        delete horizon; dropped by the first clean after the horizon."""
        attrs, base_ts, max_ts, last = f[5], f[7], f[8], f[0] + f[6]
        if not txns.on_control(f[9], parse_control(view, pos)[0], last):
            writer.add(memoryview(view)[pos:pos + size], last, max_ts)
        elif attrs & _ATTR_DELETE_HORIZON:
            if base_ts > now:  # the horizon has not passed yet
                writer.add(memoryview(view)[pos:pos + size], last, max_ts)
        else:
            records = rebase_records(view, pos, size, base_ts, horizon)
            writer.add(_batch(f, attrs | _ATTR_DELETE_HORIZON, horizon, max_ts, f[12], records),
                       last, max_ts)


def _count_tombstones(section: Any, count: int, base: int, omap: Any, end: int) -> int:
    """Tombstones of a section that a clean keeping deletes would keep (for the stats)."""
    with_deletes = omap.retain_records(section, count, base, 0, 0, True, end)
    without = omap.retain_records(section, count, base, 0, 0, False, end)
    return int(with_deletes[1] - without[1])
