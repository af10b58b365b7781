"""Per-producer state of one log: duplicate and sequence checks, open transactions.

Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``
(docs/formats.md), for idempotent and transactional producers. For every producer id
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

Transactions (Kafka's ``ProducerAppendInfo.appendDataBatch`` / ``appendEndTxnMarker``):

- the first transactional batch (attribute 0x10) of a producer opens a transaction at its
  base offset (``current_txn_first_offset``); a non-transactional batch of a producer with
  an open transaction is :class:`~logcore.errors.InvalidTxnStateError`;
- a batch with a producer id and base sequence -1 (written by a coordinator, e.g. the
  group coordinator's TxnOffsetCommit records) skips the duplicate and sequence checks;
- a marker (control batch) with an epoch older than the producer's is
  :class:`~logcore.errors.InvalidProducerEpochError`, with a coordinator epoch older than
  the stored one :class:`~logcore.errors.TransactionCoordinatorFencedError`; otherwise it
  closes the open transaction (if any), takes the marker's epoch and coordinator epoch,
  and an ABORT of a transaction with data yields the :class:`~logcore.txn_index.AbortedTxn`
  the log appends to the ``.txnindex`` (its last stable offset: the first offset of the
  oldest other open transaction, else the marker offset + 1);
- ``first_unstable_offset`` is the smallest first offset of the open transactions (None
  when there are none); producers with an open transaction never expire.

Replica appends and log recovery update the state without checks.

Durability: ``<20-digit offset>.snapshot`` files in Kafka's ``ProducerSnapshot`` v1 format
(int16 version, uint32 CRC-32C of everything after it, int32 count, then per producer
{producer_id i64, epoch i16, last_sequence i32, last_offset i64, offset_delta i32,
timestamp i64, coordinator_epoch i32, current_txn_first_offset i64}). A snapshot at
offset N holds the state of every batch below N. Like Kafka's, it keeps only each
producer's last batch (last_sequence -1 / last_offset -1 when it has none: a producer
known only from markers or coordinator-written batches); the batches appended after it
are replayed from the log at open. Open transactions are kept through
current_txn_first_offset, so a restart keeps the last stable offset.

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
    InvalidTxnStateError,
    LogDirError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from .txn_index import AbortedTxn

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_INT32_MAX = 2**31 - 1
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")
_PREFIX = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes, ProducerSnapshot.json ProducerEntry v1


class BatchMeta(NamedTuple):
    """What the producer state needs from one data batch (all from its header)."""

    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool = False


class MarkerMeta(NamedTuple):
    """A transaction marker (control batch): its producer, result and offset."""

    producer_id: int
    epoch: int
    commit: bool
    coordinator_epoch: int
    offset: int
    timestamp: int


class ProducerInfo(NamedTuple):
    """One producer as DescribeProducers shows it (Kafka's ``activeProducers``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class ProducerEntry:
    """One producer's epoch, its last batches (oldest first) and its transaction."""

    __slots__ = ("producer_id", "epoch", "batches", "last_timestamp", "coordinator_epoch",
                 "txn_first_offset")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: deque[BatchMeta] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp = -1
        self.coordinator_epoch = -1
        #: First offset of the open transaction, -1 when none is open.
        self.txn_first_offset = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def _bump(self, epoch: int) -> None:
        if epoch != self.epoch:  # a new epoch forgets the old epoch's batches
            self.epoch = epoch
            self.batches.clear()

    def add(self, batch: BatchMeta) -> None:
        self._bump(batch.epoch)
        if batch.first_seq >= 0:  # coordinator-written batches (seq -1) keep no metadata
            self.batches.append(batch)
        self.last_timestamp = batch.max_timestamp
        if batch.is_transactional and self.txn_first_offset < 0:
            self.txn_first_offset = batch.first_offset

    def end_txn(self, marker: MarkerMeta) -> int:
        """Apply a marker; returns the first offset of the transaction it closed (-1:
        none was open)."""
        first = self.txn_first_offset
        self._bump(marker.epoch)
        self.txn_first_offset = -1
        self.coordinator_epoch = marker.coordinator_epoch
        self.last_timestamp = marker.timestamp
        return first

    def copy(self) -> ProducerEntry:
        new = ProducerEntry(self.producer_id, self.epoch)
        new.batches.extend(self.batches)
        new.last_timestamp = self.last_timestamp
        new.coordinator_epoch = self.coordinator_epoch
        new.txn_first_offset = self.txn_first_offset
        return new

    def find_duplicate(self, batch: BatchMeta) -> BatchMeta | None:
        if batch.epoch != self.epoch or batch.first_seq < 0:
            return None
        for old in self.batches:
            if old.first_seq == batch.first_seq and old.last_seq == batch.last_seq:
                return old
        return None

    def info(self) -> ProducerInfo:
        return ProducerInfo(self.producer_id, self.epoch, self.last_seq, self.last_timestamp,
                            self.coordinator_epoch, self.txn_first_offset)

    def __repr__(self) -> str:
        return (f"ProducerEntry(producer_id={self.producer_id}, epoch={self.epoch}, "
                f"last_seq={self.last_seq}, batches={len(self.batches)}, "
                f"txn_first_offset={self.txn_first_offset})")


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
    rows = list(entries)
    body += _COUNT.pack(len(rows))
    for e in rows:
        if e.batches:
            last = e.batches[-1]
            body += _ENTRY.pack(e.producer_id, e.epoch, last.last_seq, last.last_offset,
                                last.last_offset - last.first_offset, e.last_timestamp,
                                e.coordinator_epoch, e.txn_first_offset)
        else:
            body += _ENTRY.pack(e.producer_id, e.epoch, -1, -1, 0, e.last_timestamp,
                                e.coordinator_epoch, e.txn_first_offset)
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
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn = _ENTRY.unpack_from(data, pos)
        pos += _ENTRY.size
        if delta < 0 or pid < 0:
            raise CorruptRecordError(f"producer snapshot entry at byte {pos - _ENTRY.size} is "
                                     f"invalid{where}", position=pos - _ENTRY.size,
                                     path=path or None)
        e = ProducerEntry(pid, epoch)
        if last_offset >= 0 and last_seq >= 0:
            first_seq = _decrement_sequence(last_seq, delta)
            e.add(BatchMeta(pid, epoch, first_seq, last_seq, last_offset - delta, last_offset,
                            ts))
        e.last_timestamp = ts
        e.coordinator_epoch = coord
        e.txn_first_offset = txn if txn >= 0 else -1
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
        #: producer id -> first offset of its open transaction.
        self.ongoing: dict[int, int] = {}
        #: Smallest first offset of the open transactions, None when none is open.
        #: Republished after each change (readers take it without the log's lock).
        self.first_unstable_offset: int | None = None
        #: Replicated logs only (``track_unreplicated``): the transactions completed by a
        #: marker that may still be above the high watermark, as (first offset, marker
        #: offset) in marker order (Kafka's ``unreplicatedTxns``). Republished whole.
        self.track_unreplicated = False
        self.unreplicated: tuple[tuple[int, int], ...] = ()

    # ------------------------------------------------------------------ checks
    def validate(self, items: list[BatchMeta | MarkerMeta]
                 ) -> tuple[BatchMeta | None, list[BatchMeta | MarkerMeta]]:
        """Leader-path check of the batches and markers of one append (in order),
        changing nothing.

        Returns:
            (duplicate, accepted): ``duplicate`` is the retained batch an incoming batch
            repeats (the append must then write nothing), else None; ``accepted`` are the
            items to :meth:`commit` once the bytes are written.

        Raises:
            InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError,
            TransactionCoordinatorFencedError.
        """
        producers = self.producers
        if len(items) == 1:  # the Produce path: no copies
            b = items[0]
            entry = producers.get(b.producer_id)
            if entry is not None:
                if type(b) is MarkerMeta:
                    self._check_marker(entry, b)
                else:
                    dup = entry.find_duplicate(b)  # type: ignore[arg-type]
                    if dup is not None:
                        return dup, []
                    self._check(entry, b)  # type: ignore[arg-type]
            return None, items
        # Several items: later ones are judged against the state the earlier ones leave.
        pending: dict[int, ProducerEntry] = {}
        for b in items:
            entry = pending.get(b.producer_id) or producers.get(b.producer_id)
            if entry is not None:
                if type(b) is MarkerMeta:
                    self._check_marker(entry, b)
                else:
                    dup = entry.find_duplicate(b)  # type: ignore[arg-type]
                    if dup is not None:
                        return dup, []
                    self._check(entry, b)  # type: ignore[arg-type]
                entry = entry.copy()
            else:
                entry = ProducerEntry(b.producer_id, b.epoch)
            if type(b) is MarkerMeta:
                entry.end_txn(b)
            else:
                entry.add(b)  # type: ignore[arg-type]
            pending[b.producer_id] = entry
        return None, items

    @staticmethod
    def _check_epoch(entry: ProducerEntry, producer_id: int, epoch: int, offset: int,
                     what: str) -> None:
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {producer_id} at offset {offset} is {epoch}, which is "
                f"smaller than the last seen epoch {entry.epoch} ({what})",
                producer_id=producer_id, epoch=epoch, current_epoch=entry.epoch)

    @classmethod
    def _check_marker(cls, entry: ProducerEntry, m: MarkerMeta) -> None:
        cls._check_epoch(entry, m.producer_id, m.epoch, m.offset, "transaction marker")
        if m.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"transaction marker for producer {m.producer_id} at offset {m.offset} has "
                f"coordinator epoch {m.coordinator_epoch}, which is smaller than the last "
                f"coordinator epoch {entry.coordinator_epoch}: a newer transaction "
                "coordinator owns this producer",
                producer_id=m.producer_id, coordinator_epoch=m.coordinator_epoch,
                current_coordinator_epoch=entry.coordinator_epoch)

    @classmethod
    def _check(cls, entry: ProducerEntry, b: BatchMeta) -> None:
        cls._check_epoch(entry, b.producer_id, b.epoch, b.first_offset, "data batch")
        if b.first_seq < 0:
            pass  # written by a coordinator (base sequence -1): no sequence to check
        elif b.epoch != entry.epoch:
            if b.first_seq != 0:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch {b.epoch} of producer "
                    f"{b.producer_id} at offset {b.first_offset}: {b.first_seq} "
                    f"(expected 0; current epoch {entry.epoch})",
                    producer_id=b.producer_id, sequence=b.first_seq, expected=0)
        elif not _in_sequence(entry.last_seq, b.first_seq):
            # A producer known without batches (from markers or coordinator-written
            # batches) has last sequence -1: its next batch starts at 0, as Kafka's.
            expected = 0 if entry.last_seq == _INT32_MAX else entry.last_seq + 1
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {b.producer_id} at offset "
                f"{b.first_offset}: {b.first_seq} (incoming), {entry.last_seq} (current "
                f"end sequence number)",
                producer_id=b.producer_id, sequence=b.first_seq, expected=expected)
        if not b.is_transactional and entry.txn_first_offset >= 0:
            raise InvalidTxnStateError(
                f"expected a transactional write from producer {b.producer_id} at offset "
                f"{b.first_offset}: it has a transaction open since offset "
                f"{entry.txn_first_offset}; end it (commit or abort) first",
                producer_id=b.producer_id)

    def commit(self, accepted: list[BatchMeta | MarkerMeta],
               end_offset: int) -> list[AbortedTxn]:
        """Record the items :meth:`validate` accepted (after the write succeeded);
        returns the aborted transactions to add to the transaction index."""
        aborted = []
        for b in accepted:
            txn = self.apply(b)
            if txn is not None:
                aborted.append(txn)
        self.map_end_offset = end_offset
        return aborted

    def apply(self, item: BatchMeta | MarkerMeta) -> AbortedTxn | None:
        """Replica append / replay: take the batch or marker as it is, no checks.
        Returns the transaction index entry of an ABORT that closed a transaction with
        data, else None."""
        entry = self.producers.get(item.producer_id)
        if entry is None:
            entry = self.producers[item.producer_id] = ProducerEntry(item.producer_id,
                                                                     item.epoch)
        if type(item) is MarkerMeta:
            aborted = None
            first = entry.end_txn(item)
            if first >= 0:
                del self.ongoing[item.producer_id]
                if self.track_unreplicated:
                    self.unreplicated = (*self.unreplicated, (first, item.offset))
                if not item.commit:
                    others = self.ongoing.values()
                    lso = min(others) if others else item.offset + 1
                    aborted = AbortedTxn(item.producer_id, first, item.offset, lso)
                self._publish()
            if item.offset + 1 > self.map_end_offset:
                self.map_end_offset = item.offset + 1
            return aborted
        b: BatchMeta = item  # type: ignore[assignment]
        entry.add(b)
        if b.is_transactional and b.producer_id not in self.ongoing:
            self.ongoing[b.producer_id] = entry.txn_first_offset
            self._publish()
        if b.last_offset + 1 > self.map_end_offset:
            self.map_end_offset = b.last_offset + 1
        return None

    def _publish(self) -> None:
        self.first_unstable_offset = min(self.ongoing.values()) if self.ongoing else None

    def prune_unreplicated(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below ``high_watermark``."""
        kept = tuple(t for t in self.unreplicated if t[1] >= high_watermark)
        if len(kept) != len(self.unreplicated):
            self.unreplicated = kept

    def active_producers(self) -> list[ProducerInfo]:
        return [e.info() for e in self.producers.values()]

    def expire(self, now_ms: int) -> int:
        """Forget producers idle for ``expiration_ms`` or longer (never one with an open
        transaction); returns how many."""
        gone = [pid for pid, e in self.producers.items()
                if now_ms - e.last_timestamp >= self.expiration_ms and e.txn_first_offset < 0]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def clear(self, end_offset: int = 0) -> None:
        self.producers = {}
        self.map_end_offset = end_offset
        self.ongoing = {}
        self.unreplicated = ()
        self._publish()

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
        return self.write_snapshot(offset, self.encode_snapshot(), sync=sync)

    def encode_snapshot(self) -> bytes:
        """The current state as snapshot bytes (memory only: a Log calls it under its
        append lock and writes them with ``write_snapshot`` after releasing it)."""
        return encode_snapshot(self.producers.values())

    def write_snapshot(self, offset: int, data: bytes, *, sync: bool = True) -> str:
        """Write ``data`` (from ``encode_snapshot``) as ``<offset>.snapshot`` (see
        ``take_snapshot``). Any thread; callers serialise writes of one offset."""
        path = snapshot_path(self.directory, offset)
        tmp = path + ".tmp"
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
            self.ongoing = {e.producer_id: e.txn_first_offset for e in entries
                            if e.txn_first_offset >= 0}
            self.unreplicated = ()
            self._publish()
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
