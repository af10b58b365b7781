"""Opening a partition directory: temp files, swaps, segments, recovery, producer state.

Kafka's ``LogLoader`` (``LogLoader.java``), step by step:

1. ``remove_temp_files_and_complete_swaps``: delete ``.deleted`` and ``.tmp`` files; a
   ``.swap`` left by an interrupted compaction either completes (it replaces the
   segments in its offset range) or, when part of an incomplete split (its base offset
   at or above the smallest ``.cleaned`` one, KAFKA-6264), goes with the ``.cleaned`` files.
2. ``load_segments``: every ``<base>.log`` becomes a :class:`LogSegment`; index files
   without a ``.log`` go. Only segments that hold offsets at or above the **recovery
   point** are looked at closely:

   - after a clean shutdown (the ``.kafka_cleanshutdown`` marker) the recovery point is
     the log end offset, so only the active segment's indexes are sanity-checked;
   - after a crash every segment from the one holding the recovery point to the end is
     scanned (lengths, CRC, increasing offsets), its indexes rebuilt, the log truncated
     at the first invalid byte and the later segments deleted.

   Segments below the recovery point were fsynced before it was checkpointed: only the
   existence of their index files is checked (a missing one is rebuilt); their indexes
   stay unmapped until a read needs them (Kafka's ``LazyIndex``), so opening a log with
   thousands of segments maps two files.
3. ``load_producer_state``: the newest producer snapshot at or below the log end, then
   the batch headers (and transaction markers) after it are replayed. After a crash the
   snapshot is taken at or below the first rescanned segment, whose ``.txnindex`` (and
   the later ones') were deleted: the replayed ABORT markers write their entries again.

What one open did is in :class:`RecoveryStats` (``Log.recovery_stats``).

Thread-safety: runs inside ``Log.__init__`` before the log is shared.
"""

from __future__ import annotations

import fcntl
import os
import re
from typing import Any, NamedTuple

from . import crc32c
from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
)
from .config import LogConfig
from .errors import CorruptRecordError, LogDirError
from .producer_state import BatchMeta, MarkerMeta, ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    HEADER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
    scan,
)
from .txn_index import CONTROL_ABORT, CONTROL_COMMIT, parse_control

NAME_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)$")
_I32_MAX = 2**31 - 1
LOCK_FILE = ".lock"
_ATTR_CONTROL = 0x20
_ATTR_TRANSACTIONAL = 0x10


class RecoveryStats(NamedTuple):
    """What opening a log did (``Log.recovery_stats``).

    Attributes:
        clean: the clean-shutdown marker was there (nothing was scanned).
        segments: segments found.
        recovery_point: the checkpointed recovery point read at open (-1: none).
        segments_scanned: segments whose batches were read and checked (crash recovery,
            or an index that failed its check and was rebuilt).
        bytes_scanned: bytes of those segments.
        truncated_bytes: bytes cut off at the first invalid batch.
        indexes_checked: segments whose index files were mapped and sanity-checked.
    """

    clean: bool
    segments: int
    recovery_point: int
    segments_scanned: int
    bytes_scanned: int
    truncated_bytes: int
    indexes_checked: int


class LoadedLog(NamedTuple):
    segments: list[LogSegment]
    log_end_offset: int
    log_start_offset: int
    recovery_point: int
    stats: RecoveryStats
    checkpointed_log_start_offset: int  # in the file (-1: none); rewritten only on change
    rebuild_txn_from: int | None = None  # first rescanned segment's base (crash recovery)


def remove_temp_files_and_complete_swaps(d: str) -> None:
    """Kafka's ``removeTempFilesAndCollectSwapFiles`` + swap completion (step 1)."""
    cleaned: list[int] = []
    swaps: list[str] = []
    for name in os.listdir(d):
        path = os.path.join(d, name)
        if name.endswith(DELETED_SUFFIX) or name.endswith(TMP_SUFFIX):
            os.unlink(path)
        elif name.endswith(CLEANED_SUFFIX):
            m = NAME_RE.match(name[: -len(CLEANED_SUFFIX)])
            if m:
                cleaned.append(int(m.group(1)))
            os.unlink(path)
        elif name.endswith(SWAP_SUFFIX):
            swaps.append(name)
    min_cleaned = min(cleaned) if cleaned else None
    for name in sorted(swaps):
        path = os.path.join(d, name)
        m = NAME_RE.match(name[: -len(SWAP_SUFFIX)])
        if m is None:
            os.unlink(path)
            continue
        base = int(m.group(1))
        if m.group(2) == TXN_INDEX_SUFFIX and not (min_cleaned is not None
                                                    and base >= min_cleaned):
            continue  # goes in with its .log swap (below), or is deleted at the end
        if (min_cleaned is not None and base >= min_cleaned) or m.group(2) != LOG_SUFFIX:
            # Part of an incomplete split (KAFKA-6264), or a swap index that is rebuilt.
            os.unlink(path)
            continue
        # A complete swap: it replaces the segments in its offset range.
        end = _swap_end_offset(path, base)
        for other in os.listdir(d):
            mo = NAME_RE.match(other)
            if mo and base <= int(mo.group(1)) < end:
                os.unlink(os.path.join(d, other))
        os.rename(path, path[: -len(SWAP_SUFFIX)])
        # The aborted transactions the cleaned segment kept cannot be rebuilt from its
        # data alone: its .txnindex swap goes in with it.
        txn_swap = os.path.join(d, filename_prefix(base) + TXN_INDEX_SUFFIX + SWAP_SUFFIX)
        if os.path.exists(txn_swap):
            os.rename(txn_swap, txn_swap[: -len(SWAP_SUFFIX)])
    for name in os.listdir(d):
        if name.endswith(SWAP_SUFFIX):
            os.unlink(os.path.join(d, name))


def _swap_end_offset(path: str, base: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        pos, nxt = 0, base
        while True:
            found = scan.search_for_offset(fd, pos, end, -1)
            if found is None:
                return nxt
            pos = found[0] + found[1]
            nxt = found[3] + 1
    finally:
        os.close(fd)


def delete_segment_files_now(seg: LogSegment) -> None:
    for path in seg.rename_deleted():
        os.unlink(path)


def _indexes_sane(seg: LogSegment) -> bool:
    """Kafka's ``sanityCheck`` of both indexes (maps them; the caller releases them)."""
    if not os.path.exists(seg.path(INDEX_SUFFIX)) or not os.path.exists(
        seg.path(TIME_INDEX_SUFFIX)
    ):
        return False
    try:
        seg.offset_index.sanity_check(seg.size)
        seg.time_index.sanity_check(seg.size)
    except CorruptRecordError:
        seg.offset_index.truncate()
        seg.time_index.truncate()
        return False
    return True


class DirLock:
    """An exclusive ``flock`` on ``<directory>/.lock``, released by ``release()`` or when
    the holder is garbage (a crashed or abandoned Log never keeps a directory locked
    past its process)."""

    __slots__ = ("fd",)

    def __init__(self, directory: str) -> None:
        self.fd = -1
        path = os.path.join(directory, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot open {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise LogDirError(
                exc.errno, f"log directory {directory} is in use by another Log "
                f"(this process or another one holds {path})"
            ) from exc
        self.fd = fd

    def release(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)  # closing the descriptor drops the flock

    def __del__(self) -> None:
        self.release()


def load_segments(directory: str, config: LogConfig, now: int, clean: bool) -> LoadedLog:
    """Open every segment of ``directory``, recovering what lies above the recovery point."""
    remove_temp_files_and_complete_swaps(directory)
    segments: list[LogSegment] = []
    bases = set()
    names = sorted(os.listdir(directory))
    for name in names:
        m = NAME_RE.match(name)
        if m and m.group(2) == LOG_SUFFIX:
            bases.add(int(m.group(1)))
    for name in names:  # orphan indexes (no .log next to them) go, as in Kafka
        m = NAME_RE.match(name)
        if m and m.group(2) in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            if int(m.group(1)) not in bases:
                os.unlink(os.path.join(directory, name))
    for base in sorted(bases):
        segments.append(LogSegment(directory, base, config, created_ms=now, writable=False,
                                   create=False))

    rp_file = read_offset_checkpoint(os.path.join(directory, RECOVERY_POINT_CHECKPOINT))
    lso_file = read_offset_checkpoint(os.path.join(directory, LOG_START_OFFSET_CHECKPOINT))
    checkpointed_rp = next(iter(rp_file.values())) if rp_file else -1
    recovery_point = max(checkpointed_rp, 0)
    log_start = next(iter(lso_file.values())) if lso_file else None

    # The first segment holding offsets at or above the recovery point. After a clean
    # shutdown that is the active segment (the recovery point was the log end offset).
    first_unflushed = 0
    if clean:
        first_unflushed = max(len(segments) - 1, 0)
    else:
        while (first_unflushed + 1 < len(segments)
               and segments[first_unflushed + 1].base_offset <= recovery_point):
            first_unflushed += 1

    scanned = bytes_scanned = truncated_total = checked = 0
    # Below the recovery point: a missing index is rebuilt; nothing is mapped otherwise.
    for seg in segments[:first_unflushed]:
        if not (os.path.exists(seg.path(INDEX_SUFFIX))
                and os.path.exists(seg.path(TIME_INDEX_SUFFIX))):
            truncated, _n, _e = seg.recover(crc32c)
            seg.seal()
            seg.release_indexes()
            scanned += 1
            bytes_scanned += seg.size + truncated
            truncated_total += truncated
    # After a clean shutdown the active segment's indexes are checked (Kafka's
    # sanityCheck); a corrupt one is rebuilt from the data.
    if clean:
        for seg in segments[first_unflushed:]:
            checked += 1
            if not _indexes_sane(seg):
                truncated, _n, _e = seg.recover(crc32c)
                scanned += 1
                bytes_scanned += seg.size + truncated
                truncated_total += truncated

    next_offset = None
    rebuild_txn_from = None
    if not clean and segments:
        rebuild_txn_from = segments[first_unflushed].base_offset
        for i in range(first_unflushed, len(segments)):
            seg = segments[i]
            # Its aborted transactions are found again by the producer-state replay.
            seg.txn_index.reset()
            size_before = seg.size
            truncated, nxt, _error = seg.recover(crc32c)
            scanned += 1
            bytes_scanned += size_before
            next_offset = nxt
            truncated_total += truncated
            if truncated:
                for later in segments[i + 1:]:
                    delete_segment_files_now(later)
                del segments[i + 1:]
                break
            if i + 1 < len(segments):
                seg.seal()
                seg.release_indexes()
        recovery_point = min(recovery_point, next_offset if next_offset is not None else 0)

    if not segments:
        start = log_start if log_start is not None else 0
        segments.append(LogSegment(directory, start, config, created_ms=now,
                                   writable=True, create=True))
    active = segments[-1]
    active.unseal()
    if next_offset is None or clean:
        next_offset = active.read_next_offset()
    active.load_max_timestamp()
    if active.size:
        # Kafka loads the first batch's timestamp lazily for time-based rolls.
        hdr = os.pread(active.file.fd, HEADER.size, 0)
        if len(hdr) == HEADER.size:
            active.rolling_based_timestamp = HEADER.unpack(hdr)[8]
    # Segments wholly below the log start offset go (after DeleteRecords before a crash).
    first_base = segments[0].base_offset
    if log_start is None or log_start < first_base:
        log_start = first_base
    log_start = min(log_start, next_offset)
    while len(segments) > 1 and segments[1].base_offset <= log_start:
        delete_segment_files_now(segments.pop(0))

    stats = RecoveryStats(clean, len(bases), checkpointed_rp, scanned, bytes_scanned,
                          truncated_total, checked)
    rp = next_offset if clean else min(recovery_point, next_offset)
    checkpointed_lso = next(iter(lso_file.values())) if lso_file else -1
    return LoadedLog(segments, next_offset, log_start, rp, stats, checkpointed_lso,
                     rebuild_txn_from)


# --- producer state ------------------------------------------------------------------


def _last_sequence(base_sequence: int, delta: int) -> int:
    # DefaultRecordBatch.incrementSequence: sequences wrap from Integer.MAX_VALUE to 0.
    if base_sequence < 0:
        return -1
    if base_sequence > _I32_MAX - delta:
        return delta - (_I32_MAX - base_sequence) - 1
    return base_sequence + delta


def meta_from_header(f: tuple[Any, ...]) -> BatchMeta | None:
    """Producer-state metadata of a data batch from its unpacked header (None: no
    producer, or a control batch: see :func:`marker_from_batch`)."""
    if f[9] < 0 or f[5] & _ATTR_CONTROL:
        return None
    return BatchMeta(f[9], f[10], f[11], _last_sequence(f[11], f[6]), f[0], f[0] + f[6], f[8],
                     bool(f[5] & _ATTR_TRANSACTIONAL))


def marker_from_batch(f: tuple[Any, ...], buf: Any, pos: int) -> MarkerMeta | None:
    """The transaction marker of the control batch at ``pos`` of ``buf`` (header ``f``);
    None for other control records (KRaft's) or an emptied batch."""
    if f[9] < 0:
        return None
    ctype, coordinator_epoch, _delta = parse_control(buf, pos)
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    return MarkerMeta(f[9], f[10], ctype == CONTROL_COMMIT, coordinator_epoch, f[0], f[8])


def items_from_buffer(buf: Any, n: int) -> list[BatchMeta | MarkerMeta]:
    """Producer-state items (data batches with a producer id, markers) of the ``n``
    bytes of validated batches in ``buf``, in order."""
    out: list[BatchMeta | MarkerMeta] = []
    pos = 0
    hsize = HEADER.size
    while pos + hsize <= n:
        f = HEADER.unpack_from(buf, pos)
        item: BatchMeta | MarkerMeta | None
        if f[5] & _ATTR_CONTROL:
            item = marker_from_batch(f, buf, pos)
        else:
            item = meta_from_header(f)
        if item is not None:
            out.append(item)
        pos += 12 + f[1]
    return out


def meta_from_info(i: Any) -> BatchMeta | None:
    """The same from one data batch's AppendInfo (None for control batches)."""
    if i.producer_id < 0 or i.is_control:
        return None
    return BatchMeta(i.producer_id, i.producer_epoch, i.first_sequence, i.last_sequence,
                     i.first_offset, i.last_offset, i.max_timestamp, bool(i.is_transactional))


def load_producer_state(ps: ProducerStateManager, segments: tuple[LogSegment, ...] | list[LogSegment],
                        log_start_offset: int, log_end_offset: int, now: int,
                        rebuild_from: int | None = None) -> None:
    """Newest valid snapshot at or below the log end, then replay the batches after it.

    ``rebuild_from``: the base offset of the first segment crash recovery rescanned (its
    ``.txnindex`` and those of the later segments were deleted): the snapshot is taken at
    or below it and the ABORT markers replayed from there re-create their entries (Kafka's
    ``LogSegment.recover`` with the log's producer state).
    """
    upto = log_end_offset if rebuild_from is None else min(rebuild_from, log_end_offset)
    snap = ps.load_latest_snapshot(upto)
    if snap < 0:
        # No snapshot (a log written before they existed): as Kafka, replay the last two
        # segments only; every later roll and close leaves one. A crash recovery replays
        # the whole log instead: open transactions below the rescanned segments must
        # survive (it also writes the snapshots it removed again, below).
        if rebuild_from is None:
            snap = segments[-2].base_offset if len(segments) > 1 else segments[0].base_offset
        else:
            snap = segments[0].base_offset
    start = max(snap, log_start_offset)
    ps.map_end_offset = start
    _replay_producer_state(ps, segments, start,
                           rebuild_from if rebuild_from is not None else log_end_offset + 1)
    ps.map_end_offset = log_end_offset
    ps.expire(now)


def _replay_producer_state(ps: ProducerStateManager,
                           segments: tuple[LogSegment, ...] | list[LogSegment], start: int,
                           rebuild_from: int) -> None:
    """Feed every batch whose last offset is >= ``start`` to the producer state (batch
    headers, and the record of control batches, read with pread; the segments were
    validated by the open). ABORT markers at or after ``rebuild_from`` add their entry to
    their segment's transaction index, and the segments above it get their snapshot."""
    hsize = HEADER.size
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
            continue
        if i and seg.base_offset > start and seg.base_offset > rebuild_from:
            # A crash recovery dropped the snapshots above the rescanned segment: write
            # the one each roll had left, so that a later recovery finds them.
            ps.map_end_offset = seg.base_offset
            ps.take_snapshot(seg.base_offset, sync=False)
        _off, pos = seg.offset_index.lookup(start) if start > seg.base_offset else (0, 0)
        fd, end = seg.fd, seg.size
        while pos + hsize <= end:
            hdr = os.pread(fd, hsize, pos)
            if len(hdr) < hsize:
                break
            f = HEADER.unpack(hdr)
            size = 12 + f[1]
            if f[1] < 49 or pos + size > end:
                break
            if f[0] + f[6] >= start:
                item: BatchMeta | MarkerMeta | None
                if f[5] & _ATTR_CONTROL:
                    item = marker_from_batch(f, os.pread(fd, size, pos), 0)
                else:
                    item = meta_from_header(f)
                if item is not None:
                    aborted = ps.apply(item)
                    if aborted is not None and f[0] >= rebuild_from:
                        seg.txn_index.append(aborted)
            pos += size
