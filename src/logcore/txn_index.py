"""Transaction index (``<base>.txnindex``) and transaction markers (control batches).

Kafka's ``TransactionIndex`` / ``AbortedTxn`` and ``EndTransactionMarker`` (docs/formats.md):

- ``.txnindex``: append-only, not mapped, not preallocated, created the first time an
  entry is added. One 34-byte entry per aborted transaction whose ABORT marker landed in
  the segment: int16 version (0), int64 producer id, int64 first offset, int64 last
  offset (the marker's), int64 last stable offset (the first offset of the oldest other
  open transaction when the marker was written, else marker offset + 1). Read
  ``Fetch`` with read_committed uses them to tell consumers which ranges to drop.
- Control batch: magic 2, attributes transactional (0x10) + control (0x20), the
  transaction's producer id and epoch, base sequence -1, one record: key = int16
  version 0 + int16 type (0 ABORT, 1 COMMIT), value = int16 version 0 + int32
  coordinator epoch. Readers accept larger versions and read the v0 prefix.

Thread-safety: a :class:`TransactionIndex` is changed by the log's writer only (under the
log's lock); readers (``entries``) get an immutable tuple published after each change (the
first load from the file and the changes hold the index's own lock).
"""

from __future__ import annotations

import os
import struct
import threading
from typing import Any, NamedTuple

from .errors import CorruptRecordError, LogDirError

ENTRY = struct.Struct(">hqqqq")  # 34 bytes, AbortedTxn.java
ENTRY_VERSION = 0
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
_HEADER_SIZE = 61


class AbortedTxn(NamedTuple):
    """One ``.txnindex`` entry (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class CompletedTxn(NamedTuple):
    """A transaction a marker closed (Kafka's ``CompletedTxn``): its first data offset,
    the marker's offset, and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def encode_entry(txn: AbortedTxn) -> bytes:
    return ENTRY.pack(ENTRY_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                      txn.last_stable_offset)


def decode_entries(data: bytes, path: str = "") -> list[AbortedTxn]:
    """Parse a whole ``.txnindex``; raises CorruptRecordError naming the bad entry."""
    where = f" in {path}" if path else ""
    if len(data) % ENTRY.size:
        raise CorruptRecordError(
            f"transaction index of {len(data)} bytes is not a whole number of "
            f"{ENTRY.size}-byte entries{where}", position=len(data) - len(data) % ENTRY.size,
            path=path or None)
    out = []
    for pos in range(0, len(data), ENTRY.size):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            raise CorruptRecordError(f"transaction index entry at byte {pos} has version "
                                     f"{version}, expected {ENTRY_VERSION}{where}",
                                     position=pos, path=path or None)
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    """The ``.txnindex`` of one segment (see the module docstring)."""

    __slots__ = ("path", "_entries", "dirty", "_lock")

    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: tuple[AbortedTxn, ...] | None = None  # loaded lazily
        self.dirty = False
        # A reader's first load must not publish what it read before a concurrent append.
        self._lock = threading.Lock()

    def entries(self) -> tuple[AbortedTxn, ...]:
        """Every entry, oldest first (read from the file the first time)."""
        entries = self._entries
        if entries is None:
            with self._lock:
                entries = self._load()
        return entries

    def _load(self) -> tuple[AbortedTxn, ...]:
        entries = self._entries
        if entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot read {self.path}", path=self.path) from exc
            entries = self._entries = tuple(decode_entries(data, self.path))
        return entries

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (creating the file). Last offsets must increase (Kafka checks the
        same: a marker is appended after every earlier one)."""
        with self._lock:
            entries = self._load()
            if entries and txn.last_offset <= entries[-1].last_offset:
                raise ValueError(
                    f"aborted transaction with last offset {txn.last_offset} is not after the "
                    f"last one in {self.path} ({entries[-1].last_offset})")
            self._write(encode_entry(txn), append=True)
            self._entries = entries + (txn,)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose last offset is >= ``offset`` (their markers are gone)."""
        with self._lock:
            entries = self._load()
            keep = tuple(e for e in entries if e.last_offset < offset)
            if len(keep) == len(entries):
                return
            self._write(b"".join(encode_entry(e) for e in keep), append=False)
            self._entries = keep

    def reset(self) -> None:
        """Delete the file (the segment is being recovered: entries are rebuilt)."""
        with self._lock:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise LogDirError(exc.errno, f"cannot delete {self.path}",
                                  path=self.path) from exc
            self._entries = ()
            self.dirty = False

    def collect(self, fetch_offset: int, upper_bound: int,
                out: list[AbortedTxn]) -> bool:
        """Kafka's ``collectAbortedTxns``: add to ``out`` the entries overlapping
        [fetch_offset, upper_bound); True once an entry shows that no later segment can
        hold more (its last stable offset is >= upper_bound)."""
        for e in self.entries():
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return True
        return False

    def flush(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return
        except OSError as exc:
            self.dirty = True
            raise LogDirError(exc.errno, f"cannot open {self.path}", path=self.path) from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            self.dirty = True
            raise LogDirError(exc.errno, f"cannot fsync {self.path}", path=self.path) from exc
        finally:
            os.close(fd)

    def _write(self, data: bytes, *, append: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        flags |= os.O_APPEND if append else os.O_TRUNC
        try:
            fd = os.open(self.path, flags, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            raise LogDirError(exc.errno, f"cannot write {self.path}", path=self.path) from exc
        self.dirty = True


# --- control batches ----------------------------------------------------------------


def control_batch(producer_id: int, producer_epoch: int, *, commit: bool,
                  coordinator_epoch: int, timestamp_ms: int,
                  partition_leader_epoch: int = -1) -> bytearray:
    """A COMMIT or ABORT marker batch (``MemoryRecords.writeEndTransactionalMarker``)."""
    from . import BatchBuilder

    builder = BatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=-1, transactional=True, is_control=True,
                           partition_leader_epoch=partition_leader_epoch)
    builder.append(_CONTROL_VALUE.pack(0, coordinator_epoch),
                   key=_CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
                   timestamp_ms=timestamp_ms)
    return bytearray(builder.build())


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, next position)."""
    shift = raw = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptRecordError("truncated varint in a control record", position=pos)
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def parse_control(batch: Any, pos: int = 0) -> tuple[int, int, int]:
    """(control type, coordinator epoch, record timestamp delta) of the control batch at
    ``pos`` of ``batch``. A batch without records (emptied by the cleaner) gives type -1.

    Raises:
        CorruptRecordError: the record is not a control record Kafka would accept.
    """
    (count,) = struct.unpack_from(">i", batch, pos + 57)
    if count <= 0:
        return -1, -1, 0
    p = pos + _HEADER_SIZE
    _length, p = _varint(batch, p)
    p += 1  # attributes
    ts_delta, p = _varint(batch, p)
    _offset_delta, p = _varint(batch, p)
    key_len, p = _varint(batch, p)
    if key_len < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control record key of {key_len} bytes is too short",
                                 position=p)
    _kv, ctype = _CONTROL_KEY.unpack_from(batch, p)
    p += key_len
    value_len, p = _varint(batch, p)
    coordinator_epoch = -1
    if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
        if value_len < _CONTROL_VALUE.size:
            raise CorruptRecordError(
                f"transaction marker value of {value_len} bytes is too short", position=p)
        _vv, coordinator_epoch = _CONTROL_VALUE.unpack_from(batch, p)
    return ctype, coordinator_epoch, ts_delta


def _encode_varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def rebase_records(batch: Any, pos: int, size: int, base_ts: int, new_base_ts: int) -> bytes:
    """The records section of the (uncompressed) batch at ``pos`` with every record's
    timestamp delta rebased from ``base_ts`` to ``new_base_ts`` (record timestamps kept):
    what setting a delete horizon on a control batch needs."""
    (count,) = struct.unpack_from(">i", batch, pos + 57)
    out = bytearray()
    p = pos + _HEADER_SIZE
    for _ in range(count):
        length, body = _varint(batch, p)
        end = body + length
        delta, rest = _varint(batch, body + 1)
        new_body = (bytes(batch[body:body + 1]) + _encode_varint(base_ts + delta - new_base_ts)
                    + bytes(batch[rest:end]))
        out += _encode_varint(len(new_body)) + new_body
        p = end
    if p != pos + size:
        raise CorruptRecordError(f"records of the batch at position {pos} end at {p}, the "
                                 f"batch at {pos + size}", position=pos)
    return bytes(out)


class CleanedTxns:
    """Transaction state while the cleaner walks a range (Kafka's
    ``CleanedTransactionMetadata``), fed the batches in log order.

    Built from the aborted transactions of the range (``Log.aborted_transactions``):
    a transactional batch of a producer whose aborted transaction has started is aborted
    data (the cleaner drops it); a marker is discardable (once its delete horizon has
    passed) when no batch of its transaction was met in the range, i.e. its data is
    already gone. An ABORT marker that must stay (its data was met, and is dropped now)
    keeps its ``.txnindex`` entry: those are collected in ``kept`` for the cleaned segment.
    """

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._committed: set[int] = set()
        self._aborted: dict[int, list[Any]] = {}  # producer id -> [AbortedTxn, met data]
        self.kept: list[AbortedTxn] = []

    def _consume(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self._aborted[txn.producer_id] = [txn, False]

    def on_control(self, producer_id: int, control_type: int, last_offset: int) -> bool:
        """A control batch; True if it may be discarded (its transaction has no data left)."""
        self._consume(last_offset)
        if control_type == CONTROL_ABORT:
            state = self._aborted.pop(producer_id, None)
            if state is not None and state[1]:
                self.kept.append(state[0])
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return False
            return True
        return control_type < 0  # an emptied batch goes; other control types stay

    def on_batch(self, producer_id: int, transactional: bool, last_offset: int) -> bool:
        """A data batch; True if it belongs to an aborted transaction."""
        self._consume(last_offset)
        if not transactional:
            return False
        state = self._aborted.get(producer_id)
        if state is not None:
            state[1] = True
            return True
        self._committed.add(producer_id)
        return False
