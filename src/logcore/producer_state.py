"""Per-producer state of one log: idempotent-producer duplicate and sequence checks.

Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``
(docs/formats.md), for idempotent (non-transactional) producers. For every producer id
seen in the log the manager keeps its epoch and the metadata of its last
:data:`NUM_BATCHES_TO_RETAIN` batches (first/last sequence, first/last offset, max
timestamp). On the leader path a batch carrying a producer id is checked against it:

- same epoch, same (first, last) sequence as one of the retained batches: a duplicate
  (a retried request); the log writes nothing and answers with the original offsets;
- epoch lower than the known one: :class:`~logcore.errors.InvalidProducerEpochError`;
- a new (higher) epoch of a known producer must start at sequence 0, otherwise
  :class:`~logcore.errors.OutOfOrderSequenceError`;
- the same epoch must continue at last sequence + 1 (``Integer.MAX_VALUE`` wraps to 0),
  otherwise :class:`~logcore.errors.OutOfOrderSequenceError`;
- a producer id the log does not know (never seen, or expired, or its batches removed by
  retention) is accepted at any sequence: Kafka's brokers do the same since KIP-360
  (``ProducerAppendInfo.checkSequence``: "If there is no current producer epoch ...
  accept writes with any sequence number"), so no UNKNOWN_PRODUCER_ID arises here.

Replica appends and log recovery update the state without checks.

Durability: ``<20-digit offset>.snapshot`` files in Kafka's ``ProducerSnapshot`` v1 format
(int16 version, uint32 CRC-32C of everything after it, int32 count, then per producer
{producer_id i64, epoch i16, last_sequence i32, last_offset i64, offset_delta i32,
timestamp i64, coordinator_epoch i32, current_txn_first_offset i64}). A snapshot at
offset N holds the state of every batch below N. Like Kafka's, it keeps only each
producer's last batch; the batches appended after it are replayed from the log at open.

Not thread-safe on its own: the owning :class:`~logcore.log.Log` calls it under its lock.
"""

from __future__ import annotations

import os
import re
import struct
from collections import deque
from collections.abc import Callable, Iterable
from typing import NamedTuple

from .checkpoint import fsync_dir
from .errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    LogDirError,
    OutOfOrderSequenceError,
)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_INT32_MAX = 2**31 - 1
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")
_PREFIX = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes, ProducerSnapshot.json ProducerEntry v1


class BatchMeta(NamedTuple):
    """What the producer state needs from one batch (all from its header)."""

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class ProducerEntry:
    """One producer's epoch and its last batches (oldest first)."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMeta] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def add(self, batch: BatchMeta) -> None:
        if batch.epoch != self.epoch:  # a new epoch forgets the old epoch's batches
            self.epoch = batch.epoch
            self.batches.clear()
        self.batches.append(batch)
        self.last_timestamp = batch.max_timestamp

    def copy(self) -> ProducerEntry:
        new = ProducerEntry(self.producer_id, self.epoch)
        new.batches.extend(self.batches)
        new.last_timestamp = self.last_timestamp
        return new

    def find_duplicate(self, batch: BatchMeta) -> BatchMeta | None:
        if batch.epoch != self.epoch:
            return None
        for old in self.batches:
            if old.first_seq == batch.first_seq and old.last_seq == batch.last_seq:
                return old
        return None

    def __repr__(self) -> str:
        return (f"ProducerEntry(producer_id={self.producer_id}, epoch={self.epoch}, "
                f"last_seq={self.last_seq}, batches={len(self.batches)})")


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def _decrement_sequence(seq: int, by: int) -> int:
    """``DefaultRecordBatch.decrementSequence``: the first sequence from the last one."""
    if seq < by:
        return _INT32_MAX - (by - seq) + 1
    return seq - by


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """The bytes of a ``.snapshot`` file for these producers (each one's last batch)."""
    from . import crc32c

    body = bytearray()
    rows = [e for e in entries if e.batches]
    body += _COUNT.pack(len(rows))
    for e in rows:
        last = e.batches[-1]
        body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq, last.last_offset,
                            last.last_offset - last.first_offset, last.max_timestamp, -1, -1)
    return _PREFIX.pack(SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes, path: str = "") -> list[ProducerEntry]:
    """Parse a ``.snapshot`` file; raises CorruptRecordError naming the problem."""
    from . import crc32c

    where = f" in {path}" if path else ""
    if len(data) < _PREFIX.size + _COUNT.size:
        raise CorruptRecordError(f"producer snapshot of {len(data)} bytes is too short{where}",
                                 position=0, path=path or None)
    version, crc = _PREFIX.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"producer snapshot version {version} is not {SNAPSHOT_VERSION}"
                                 f"{where}", position=0, path=path or None)
    actual = crc32c(data[_PREFIX.size:])
    if actual != crc:
        raise CorruptRecordError(f"producer snapshot CRC {actual:#010x} does not match the "
                                 f"stored {crc:#010x}{where}", position=2, path=path or None)
    (count,) = _COUNT.unpack_from(data, _PREFIX.size)
    pos = _PREFIX.size + _COUNT.size
    if count < 0 or count * _ENTRY.size != len(data) - pos:
        raise CorruptRecordError(
            f"producer snapshot declares {count} entries but holds {len(data) - pos} bytes of "
            f"entries{where}", position=_PREFIX.size, path=path or None)
    out = []
    for _ in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, _coord, _txn = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if delta < 0 or pid < 0:
            raise CorruptRecordError(f"producer snapshot entry at byte {pos - _ENTRY.size} is "
                                     f"invalid{where}", position=pos - _ENTRY.size,
                                     path=path or None)
        e = ProducerEntry(pid, epoch)
        first_seq = _decrement_sequence(last_seq, delta) if last_seq >= 0 else -1
        e.add(BatchMeta(pid, epoch, first_seq, last_seq, last_offset - delta, last_offset, ts))
        out.append(e)
    return out


class ProducerStateManager:
    """The producer state of one log directory (see the module docstring).

    Args:
        directory: the partition directory (snapshots live next to the segments).
        expiration_ms: ``producer.id.expiration.ms``: a producer whose last batch is older
            than this (by its max timestamp) is forgotten by :meth:`expire`.
    """

    def __init__(self, directory: str, expiration_ms: int) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        #: Offset up to which batches have been applied (exclusive).
        self.map_end_offset = 0

    # ------------------------------------------------------------------ checks
    def validate(self, batches: list[BatchMeta]) -> tuple[BatchMeta | None, list[BatchMeta]]:
        """Leader-path check of the batches of one append (in order), changing nothing.

        Returns:
            (duplicate, accepted): ``duplicate`` is the retained batch an incoming batch
            repeats (the append must then write nothing), else None; ``accepted`` are the
            batches to :meth:`commit` once the bytes are written.

        Raises:
            InvalidProducerEpochError, OutOfOrderSequenceError.
        """
        producers = self.producers
        if len(batches) == 1:  # the Produce path: no copies
            b = batches[0]
            entry = producers.get(b.producer_id)
            if entry is not None:
                dup = entry.find_duplicate(b)
                if dup is not None:
                    return dup, []
                self._check(entry, b)
            return None, batches
        # Several batches: later ones are judged against the state the earlier ones leave.
        pending: dict[int, ProducerEntry] = {}
        for b in batches:
            entry = pending.get(b.producer_id) or producers.get(b.producer_id)
            if entry is not None:
                dup = entry.find_duplicate(b)
                if dup is not None:
                    return dup, []
                self._check(entry, b)
                entry = entry.copy()
            else:
                entry = ProducerEntry(b.producer_id, b.epoch)
            entry.add(b)
            pending[b.producer_id] = entry
        return None, batches

    @staticmethod
    def _check(entry: ProducerEntry, b: BatchMeta) -> None:
        if b.epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {b.producer_id} at offset {b.first_offset} is "
                f"{b.epoch}, which is smaller than the last seen epoch {entry.epoch}",
                producer_id=b.producer_id, epoch=b.epoch, current_epoch=entry.epoch)
        if b.epoch != entry.epoch:
            if b.first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch {b.epoch} of producer "
                    f"{b.producer_id} at offset {b.first_offset}: {b.first_seq} "
                    f"(expected 0; current epoch {entry.epoch})",
                    producer_id=b.producer_id, sequence=b.first_seq, expected=0)
        elif entry.batches and not _in_sequence(entry.last_seq, b.first_seq):
            expected = 0 if entry.last_seq == _INT32_MAX else entry.last_seq + 1
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {b.producer_id} at offset "
                f"{b.first_offset}: {b.first_seq} (incoming), {entry.last_seq} (current "
                f"end sequence number)",
                producer_id=b.producer_id, sequence=b.first_seq, expected=expected)

    def commit(self, accepted: list[BatchMeta], end_offset: int) -> None:
        """Record the batches :meth:`validate` accepted (after the write succeeded)."""
        for b in accepted:
            self.apply(b)
        self.map_end_offset = end_offset

    def apply(self, batch: BatchMeta) -> None:
        """Replica append / replay: take the batch as it is, no checks."""
        entry = self.producers.get(batch.producer_id)
        if entry is None:
            entry = self.producers[batch.producer_id] = ProducerEntry(batch.producer_id, batch.epoch)
        entry.add(batch)
        if batch.last_offset + 1 > self.map_end_offset:
            self.map_end_offset = batch.last_offset + 1

    def expire(self, now_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` or longer; returns how many."""
        gone = [pid for pid, e in self.producers.items()
                if now_ms - e.last_timestamp >= self.expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def clear(self, end_offset: int = 0) -> None:
        self.producers = {}
        self.map_end_offset = end_offset

    # ------------------------------------------------------------------ snapshots
    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        try:
            names = os.listdir(self.directory)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot list {self.directory}") from exc
        return sorted(int(m.group(1)) for m in map(_SNAPSHOT_RE.match, names) if m)

    def take_snapshot(self, offset: int, *, sync: bool = True) -> str:
        """Write ``<offset>.snapshot`` with the current state (tmp file, rename; with
        ``sync`` the file and directory are fsynced). A snapshot torn by a crash fails its
        CRC at the next open and an older one is used."""
        path = snapshot_path(self.directory, offset)
        tmp = path + ".tmp"
        data = encode_snapshot(self.producers.values())
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                         0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            if sync:
                fsync_dir(self.directory)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot write producer snapshot {path}") from exc
        return path

    def load_latest_snapshot(self, upto: int) -> int:
        """Drop snapshots above ``upto``; load the newest valid one at or below it.

        A corrupt snapshot is deleted and the next older one tried. Returns the loaded
        snapshot's offset (the state covers offsets below it), or -1 when none (state
        cleared).
        """
        self.delete_snapshots(lambda off: off > upto)
        for off in reversed(self.snapshot_offsets()):
            path = snapshot_path(self.directory, off)
            try:
                with open(path, "rb") as f:
                    data = f.read()
                entries = decode_snapshot(data, path)
            except CorruptRecordError:
                self._unlink(path)
                continue
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot read producer snapshot {path}") from exc
            self.producers = {e.producer_id: e for e in entries}
            self.map_end_offset = off
            return off
        self.clear()
        return -1

    def delete_snapshots(self, predicate: Callable[[int], bool]) -> None:
        """Remove every snapshot file whose offset satisfies ``predicate(offset)``."""
        for off in self.snapshot_offsets():
            if predicate(off):
                self._unlink(snapshot_path(self.directory, off))

    def delete_snapshots_before(self, offset: int) -> None:
        """Retention: remove snapshots below ``offset``, always keeping the newest one."""
        offsets = self.snapshot_offsets()
        for off in offsets[:-1]:
            if off < offset:
                self._unlink(snapshot_path(self.directory, off))

    @staticmethod
    def _unlink(path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot delete producer snapshot {path}") from exc
