"""Pure-Python twin of logcore._index: Kafka's memory-mapped offset and time indexes.

Layouts (big-endian, Kafka's ``OffsetIndex.java`` and ``TimeIndex.java`` under
``storage/src/main/java/org/apache/kafka/storage/internals/log/``):

    .index      entry  0 relative_offset int32 | 4 position int32              (8 bytes)
    .timeindex  entry  0 timestamp int64       | 8 relative_offset int32       (12 bytes)

relative_offset = offset - base_offset of the segment. Both files are preallocated to
``max_index_size`` (rounded down to a whole entry) while their segment is active, mapped
read-write, and trimmed to ``entries * entry_size`` when the segment rolls or closes. An
existing file is assumed trimmed: its entry count is its length / entry size
(``sanity_check`` catches an untrimmed or torn one).

Lookups are binary searches over the entries; like Kafka's ``AbstractIndex`` they first
try the *warm* tail (the last 8 KiB of entries), because the readers that matter (followers
and caught-up consumers) ask for recent offsets, and keeping their searches inside the
last few pages avoids page faults on the cold part of a large index.

Thread-safety: one writer and many readers. Every method takes the index's lock, so a
reader never sees a mapping that a concurrent trim or resize is replacing.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading

from ..errors import CorruptRecordError

_WARM_BYTES = 8192
_I32_MAX = 2**31 - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _Index:
    entry_size = 0
    _kind = ""

    def __init__(
        self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self._lock = threading.RLock()
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self._mm: mmap.mmap | None = None
        self._entries = 0
        self._max_entries = 0
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        try:
            fd = os.open(path, flags, 0o644)
        except OSError:
            raise
        try:
            length = os.fstat(fd).st_size
            new = length == 0
            if writable and max_index_size > 0 and new:
                length = max_index_size - max_index_size % self.entry_size
                os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)
        # A new file has no entries; an existing one is assumed trimmed (Kafka does the same).
        self._entries = 0 if new else length // self.entry_size

    def _map(self, fd: int, length: int) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if length > 0:
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self._mm = mmap.mmap(fd, length, access=access)
        self._max_entries = length // self.entry_size

    # --- sizes ---
    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # --- entry access ---
    def _key(self, n: int) -> int:
        raise NotImplementedError

    def _search(self, target: int) -> int:
        """Slot of the largest entry whose key <= target, or -1 (warm tail first)."""
        n = self._entries
        if n == 0 or self._key(0) > target:
            return -1
        warm = _WARM_BYTES // self.entry_size
        first_hot = max(0, n - 1 - warm)
        if self._key(first_hot) <= target:
            lo, hi = first_hot, n - 1
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # --- maintenance ---
    def truncate(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._entries = 0

    def trim_to_valid_size(self) -> None:
        """Shrink file and mapping to the entries in use (on roll and close)."""
        self.resize(self._entries * self.entry_size)

    def resize(self, new_size: int) -> bool:
        """Set the file's length to ``new_size`` rounded down to an entry (keeps entries).

        Returns True if the length changed.
        """
        if not self.writable:
            raise ValueError(f"index {self.path} is read-only")
        with self._lock:
            rounded = new_size - new_size % self.entry_size
            rounded = max(rounded, self._entries * self.entry_size)
            if rounded == self._max_entries * self.entry_size and os.path.getsize(self.path) == rounded:
                return False
            if self._mm is not None:
                self._mm.flush()
            fd = os.open(self.path, os.O_RDWR)
            try:
                if self._mm is not None:
                    self._mm.close()
                    self._mm = None
                os.ftruncate(fd, rounded)
                self._map(fd, rounded)
            finally:
                os.close(fd)
            return True

    def flush(self) -> None:
        with self._lock:
            if self._mm is not None and self.writable:
                self._mm.flush()

    def close(self) -> None:
        """Trim (when writable) and unmap. Idempotent."""
        with self._lock:
            if self._mm is None and self._max_entries == 0:
                return
            if self.writable:
                self.trim_to_valid_size()
            if self._mm is not None:
                self._mm.close()
                self._mm = None
            # A reader still holding this index (an old segment-list snapshot) now sees
            # an empty index and falls back to scanning from position 0.
            self._max_entries = 0
            self._entries = 0

    def rename(self, new_path: str) -> None:
        with self._lock:
            os.rename(self.path, new_path)
            self.path = new_path

    def _corrupt(self, why: str) -> CorruptRecordError:
        return CorruptRecordError(f"corrupt {self._kind} index {self.path}: {why}", path=self.path)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={self.path!r}, base_offset={self.base_offset}, "
            f"entries={self._entries}, max_entries={self._max_entries})"
        )


class OffsetIndex(_Index):
    """Sparse map from offsets to log file positions (``.index``, 8-byte entries).

    Args:
        path: the index file; created when missing (when ``writable``).
        base_offset: the segment's base offset (entries store offsets relative to it).
        max_index_size: preallocated size for a new file (``segment_index_bytes``).
        writable: map read-write (active segment) or read-only.
    """

    entry_size = 8
    _kind = "offset"

    def _key(self, n: int) -> int:
        assert self._mm is not None
        return _OFFSET_ENTRY.unpack_from(self._mm, n * 8)[0]

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (absolute offset, position)."""
        with self._lock:
            if not 0 <= n < self._entries:
                raise IndexError(f"entry {n} out of range [0, {self._entries})")
            assert self._mm is not None
            rel, pos = _OFFSET_ENTRY.unpack_from(self._mm, n * 8)
            return self.base_offset + rel, pos

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or base_offset when empty."""
        with self._lock:
            return self.entry(self._entries - 1)[0] if self._entries else self.base_offset

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target: (offset, position); (base_offset, 0) if none."""
        with self._lock:
            rel = target_offset - self.base_offset
            if rel > _I32_MAX:
                rel = _I32_MAX
            slot = self._search(rel) if rel >= 0 else -1
            if slot < 0:
                return self.base_offset, 0
            return self.entry(slot)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """Largest entry with position <= ``position``; (base_offset, 0) if none."""
        with self._lock:
            assert self._mm is not None or self._entries == 0
            lo, hi = 0, self._entries - 1
            best = -1
            while lo <= hi:
                mid = (lo + hi) >> 1
                if _OFFSET_ENTRY.unpack_from(self._mm, mid * 8)[1] <= position:  # type: ignore[arg-type]
                    best, lo = mid, mid + 1
                else:
                    hi = mid - 1
            return self.entry(best) if best >= 0 else (self.base_offset, 0)

    def walk_start(self, max_position: int, max_offset: int) -> int:
        """Where a read's extent walk may start (the index entry before the bound).

        Let k be the last entry with position <= ``max_position`` and offset <=
        ``max_offset``. Every batch before entry k-1's position ends within
        ``max_position`` and has offsets below ``max_offset``, and the batch at it does
        too, so a walk from there skips only batches that belong in the read and still
        sees at least one. Returns 0 when k < 1.
        """
        with self._lock:
            k = -1
            lo, hi = 0, self._entries - 1
            while lo <= hi:
                mid = (lo + hi) >> 1
                rel, pos = _OFFSET_ENTRY.unpack_from(self._mm, mid * 8)  # type: ignore[arg-type]
                if pos <= max_position and self.base_offset + rel <= max_offset:
                    k, lo = mid, mid + 1
                else:
                    hi = mid - 1
            if k < 1:
                return 0
            return _OFFSET_ENTRY.unpack_from(self._mm, (k - 1) * 8)[1]  # type: ignore[arg-type]

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offset must exceed the last entry's.

        Raises:
            ValueError: the index is full, the offset does not increase, or does not fit
                in an int32 relative to base_offset, or position is out of range.
        """
        with self._lock:
            if self._entries >= self._max_entries:
                raise ValueError(f"offset index {self.path} is full ({self._entries} entries)")
            rel = offset - self.base_offset
            if not 0 <= rel <= _I32_MAX:
                raise ValueError(f"offset {offset} does not fit index with base {self.base_offset}")
            if not 0 <= position <= _I32_MAX:
                raise ValueError(f"position {position} out of range")
            if self._entries and rel <= self._key(self._entries - 1):
                raise ValueError(
                    f"offset {offset} is not larger than the last indexed offset "
                    f"{self.last_offset} in {self.path}"
                )
            assert self._mm is not None
            _OFFSET_ENTRY.pack_into(self._mm, self._entries * 8, rel, position)
            self._entries += 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        with self._lock:
            rel = offset - self.base_offset
            if rel <= 0:
                self._entries = 0
                return
            slot = self._search(min(rel, _I32_MAX))
            if slot < 0:
                self._entries = 0
            elif self._key(slot) == rel:
                self._entries = slot
            else:
                self._entries = slot + 1

    def sanity_check(self, log_size: int | None = None) -> None:
        """Check that the file is a trimmed, well-formed index (Kafka's sanityCheck and more).

        Relative offsets >= 0 and strictly increasing, positions strictly increasing and
        before ``log_size``. Catches an untrimmed preallocated tail, a torn write and most
        scribbles.

        Raises:
            CorruptRecordError: the first problem found, with the entry number.
        """
        with self._lock:
            size = os.path.getsize(self.path)
            if size % 8:
                raise self._corrupt(f"length {size} is not a multiple of 8")
            prev_rel = prev_pos = -1
            if not self._entries:
                return
            assert self._mm is not None
            view = memoryview(self._mm)[: self._entries * 8]
            try:
                for i, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(view)):
                    if rel <= prev_rel or pos <= prev_pos:
                        raise self._corrupt(
                            f"entry {i} ({rel}, {pos}) does not increase after "
                            f"({prev_rel}, {prev_pos})"
                            + (" (untrimmed or torn index)" if rel == 0 else "")
                        )
                    if log_size is not None and pos >= log_size:
                        raise self._corrupt(f"entry {i} position {pos} is past the log end {log_size}")
                    prev_rel, prev_pos = rel, pos
            finally:
                view.release()


class TimeIndex(_Index):
    """Map from timestamps to offsets (``.timeindex``, 12-byte entries).

    An entry (T, O) says: the largest timestamp seen in the segment before offset O is T.
    Timestamps never decrease; an entry is added only when the largest timestamp grows.
    """

    entry_size = 12
    _kind = "time"

    def _key(self, n: int) -> int:
        assert self._mm is not None
        return _TIME_ENTRY.unpack_from(self._mm, n * 12)[0]

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry as (timestamp, absolute offset)."""
        with self._lock:
            if not 0 <= n < self._entries:
                raise IndexError(f"entry {n} out of range [0, {self._entries})")
            assert self._mm is not None
            ts, rel = _TIME_ENTRY.unpack_from(self._mm, n * 12)
            return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base_offset) when empty."""
        with self._lock:
            return self.entry(self._entries - 1) if self._entries else (-1, self.base_offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target: (timestamp, offset); (-1, base) if none."""
        with self._lock:
            slot = self._search(target_timestamp)
            return self.entry(slot) if slot >= 0 else (-1, self.base_offset)

    def append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Kafka's ``maybeAppend``: add (timestamp, offset) if timestamp exceeds the last one.

        Returns True if an entry was written.

        Raises:
            ValueError: the index is full (unless ``skip_full_check`` and a slot is left),
                the offset or timestamp goes backwards, or the offset does not fit.
        """
        with self._lock:
            if self._entries >= self._max_entries:
                if not skip_full_check:
                    raise ValueError(f"time index {self.path} is full ({self._entries} entries)")
                return False
            last_ts, last_off = self.last_entry()
            if self._entries and offset < last_off:
                raise ValueError(
                    f"offset {offset} is before the last time index offset {last_off} in {self.path}"
                )
            if self._entries and timestamp < last_ts:
                raise ValueError(
                    f"timestamp {timestamp} is before the last time index timestamp {last_ts}"
                )
            if timestamp <= last_ts:
                return False
            rel = offset - self.base_offset
            if not 0 <= rel <= _I32_MAX:
                raise ValueError(f"offset {offset} does not fit index with base {self.base_offset}")
            assert self._mm is not None
            _TIME_ENTRY.pack_into(self._mm, self._entries * 12, timestamp, rel)
            self._entries += 1
            return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        with self._lock:
            rel = offset - self.base_offset
            n = self._entries
            # Offsets are non-decreasing too: find the first entry with rel >= target.
            lo, hi = 0, n
            while lo < hi:
                mid = (lo + hi) >> 1
                if _TIME_ENTRY.unpack_from(self._mm, mid * 12)[1] < rel:  # type: ignore[arg-type]
                    lo = mid + 1
                else:
                    hi = mid
            self._entries = lo

    def sanity_check(self, log_size: int | None = None) -> None:
        """Check that the file is a trimmed, well-formed time index.

        Timestamps strictly increase (entries are added only when the largest timestamp
        grows), relative offsets are >= 0 and never decrease.

        Raises:
            CorruptRecordError: the first problem found, with the entry number.
        """
        with self._lock:
            size = os.path.getsize(self.path)
            if size % 12:
                raise self._corrupt(f"length {size} is not a multiple of 12")
            if not self._entries:
                return
            prev_ts, prev_rel = -1, 0
            assert self._mm is not None
            view = memoryview(self._mm)[: self._entries * 12]
            try:
                for i, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(view)):
                    if ts <= prev_ts or rel < prev_rel:
                        raise self._corrupt(
                            f"entry {i} ({ts}, {rel}) does not increase after "
                            f"({prev_ts}, {prev_rel})"
                            + (" (untrimmed or torn index)" if ts == 0 else "")
                        )
                    prev_ts, prev_rel = ts, rel
            finally:
                view.release()
