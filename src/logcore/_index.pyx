# Kafka's memory-mapped offset and time indexes (compiled; twin: logcore/_ref/index.py).
#
# Layouts (big-endian; Kafka's storage/.../log/OffsetIndex.java and TimeIndex.java):
#
#   .index      entry  0 relative_offset int32 | 4 position int32          (8 bytes)
#   .timeindex  entry  0 timestamp int64       | 8 relative_offset int32   (12 bytes)
#
# relative_offset = offset - base_offset. While a segment is active both files are
# preallocated to max_index_size (rounded down to whole entries) and mapped read-write;
# they are trimmed to entries * entry_size when the segment rolls or closes. An existing
# file is assumed trimmed (entries = length / entry_size); sanity_check catches one that
# is not.
#
# Lookups are binary searches that first try the *warm* tail, the last 8 KiB of entries,
# as Kafka's AbstractIndex does: the lookups that matter (followers, caught-up consumers)
# ask for recent offsets, and keeping them inside the last two pages avoids faulting in
# the cold part of a 10 MiB index (Kafka measured produce latency of ~1 s from those
# faults with a plain binary search).
#
# Thread-safety: no method releases the GIL, so each call is atomic with respect to every
# other Python thread: a reader never sees the mapping half-replaced by a trim or resize.
# After close() the index is empty (entries 0), so a reader holding an old segment-list
# snapshot falls back to scanning from position 0 instead of touching freed memory.

cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from posix.mman cimport MAP_FAILED, MAP_SHARED, MS_SYNC, PROT_READ, PROT_WRITE, mmap, msync, munmap

from logcore._includes cimport lc_load_be32, lc_load_be64, lc_store_be32, lc_store_be64

import os

from logcore.errors import CorruptRecordError

cdef enum:
    IDX_WARM_BYTES = 8192
    IDX_OFFSET_ENTRY = 8
    IDX_TIME_ENTRY = 12

cdef int64_t I32_MAX = 2147483647


cdef class _MappedIndex:
    """Shared state of both index kinds: the file, its mapping and the entry count."""

    def __cinit__(self):
        self._map = NULL
        self._map_len = 0
        self._entries = 0
        self._max_entries = 0

    def __dealloc__(self):
        if self._map != NULL:
            munmap(self._map, <size_t>self._map_len)
            self._map = NULL

    cdef int _open(self, str path, int64_t base_offset, Py_ssize_t max_index_size,
                   bint writable) except -1:
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        fd = os.open(path, flags, 0o644)
        try:
            length = os.fstat(fd).st_size
            new = length == 0
            if writable and max_index_size > 0 and new:
                length = max_index_size - max_index_size % self._entry_size
                os.ftruncate(fd, length)
            self._remap(fd, length)
        finally:
            os.close(fd)
        self._entries = 0 if new else length // self._entry_size
        return 0

    cdef int _remap(self, int fd, Py_ssize_t length) except -1:
        """Map ``length`` bytes of fd, then swap the new mapping in and unmap the old.

        No Python call happens between the swap and the unmap, so (with the GIL held)
        no other thread can observe a freed mapping.
        """
        cdef void *p = NULL
        cdef unsigned char *old = self._map
        cdef Py_ssize_t old_len = self._map_len
        cdef int prot = PROT_READ | (PROT_WRITE if self.writable else 0)
        if length > 0:
            p = mmap(NULL, <size_t>length, prot, MAP_SHARED, fd, 0)
            if p == MAP_FAILED:
                raise OSError(f"cannot mmap {self.path}")
        self._map = <unsigned char *>p
        self._map_len = length
        self._max_entries = length // self._entry_size
        if self._entries > self._max_entries:
            self._entries = self._max_entries
        if old != NULL:
            munmap(old, <size_t>old_len)
        return 0

    # --- sizes ---
    @property
    def entries(self):
        return self._entries

    @property
    def max_entries(self):
        return self._max_entries

    @property
    def entry_size(self):
        return self._entry_size

    @property
    def size_in_bytes(self):
        return self._entries * self._entry_size

    def is_full(self):
        return self._entries >= self._max_entries

    cdef int64_t _key(self, Py_ssize_t n) noexcept:
        return 0  # overridden by each index kind

    cdef Py_ssize_t _search(self, int64_t target):
        """Slot of the largest entry whose key <= target, or -1 (warm tail first)."""
        cdef Py_ssize_t n = self._entries, lo, hi, mid, first_hot
        if n == 0 or self._key(0) > target:
            return -1
        first_hot = n - 1 - IDX_WARM_BYTES // self._entry_size
        if first_hot < 0:
            first_hot = 0
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
    def truncate(self):
        """Remove every entry."""
        self._entries = 0

    def trim_to_valid_size(self):
        """Shrink file and mapping to the entries in use (on roll and close)."""
        return self.resize(self._entries * self._entry_size)

    def resize(self, Py_ssize_t new_size):
        """Set the file length to new_size rounded down to an entry (entries are kept).

        Returns True if the length changed.
        """
        if not self.writable:
            raise ValueError(f"index {self.path} is read-only")
        cdef Py_ssize_t rounded = new_size - new_size % self._entry_size
        if rounded < self._entries * self._entry_size:
            rounded = self._entries * self._entry_size
        fd = os.open(self.path, os.O_RDWR)
        try:
            if rounded == self._map_len and os.fstat(fd).st_size == rounded:
                return False
            # The old mapping stays valid while the file changes length: every entry in
            # use lies below the new length, and nobody reads past the entries.
            os.ftruncate(fd, rounded)
            self._remap(fd, rounded)
        finally:
            os.close(fd)
        return True

    def flush(self):
        """msync the mapping (the entries reach the disk)."""
        if self._map != NULL and self.writable:
            if msync(self._map, <size_t>self._map_len, MS_SYNC) != 0:
                raise OSError(f"msync failed on {self.path}")

    def close(self):
        """Trim (when writable) and unmap. Idempotent; afterwards the index is empty."""
        if self._map == NULL and self._max_entries == 0:
            self._entries = 0
            return
        if self.writable:
            self.trim_to_valid_size()
        if self._map != NULL:
            munmap(self._map, <size_t>self._map_len)
            self._map = NULL
            self._map_len = 0
        self._max_entries = 0
        self._entries = 0

    def rename(self, str new_path):
        os.rename(self.path, new_path)
        self.path = new_path

    cdef object _corrupt(self, str kind, str why):
        return CorruptRecordError(f"corrupt {kind} index {self.path}: {why}", path=self.path)

    def __repr__(self):
        return (f"{type(self).__name__}(path={self.path!r}, base_offset={self.base_offset}, "
                f"entries={self._entries}, max_entries={self._max_entries})")


cdef class OffsetIndex(_MappedIndex):
    """Sparse map from offsets to ``.log`` positions (``.index``, 8-byte entries).

    Args:
        path: the index file; created when missing (when ``writable``).
        base_offset: the segment's base offset (entries store offsets relative to it).
        max_index_size: preallocated size for a new file (``segment_index_bytes``).
        writable: map read-write (active segment) or read-only.
    """

    def __init__(self, str path, int64_t base_offset, Py_ssize_t max_index_size=-1,
                 bint writable=True):
        self._entry_size = IDX_OFFSET_ENTRY
        self._open(path, base_offset, max_index_size, writable)

    cdef int64_t _key(self, Py_ssize_t n) noexcept:
        return <int32_t>lc_load_be32(self._map + n * IDX_OFFSET_ENTRY)

    cdef int64_t _pos(self, Py_ssize_t n) noexcept:
        return <int32_t>lc_load_be32(self._map + n * IDX_OFFSET_ENTRY + 4)

    def entry(self, Py_ssize_t n):
        """The n-th entry as (absolute offset, position)."""
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range [0, {self._entries})")
        return self.base_offset + self._key(n), self._pos(n)

    @property
    def last_offset(self):
        """Offset of the last entry, or base_offset when empty."""
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._key(self._entries - 1)

    def lookup(self, int64_t target_offset):
        """Largest entry with offset <= target: (offset, position); (base_offset, 0) if none."""
        cdef int64_t rel = target_offset - self.base_offset
        cdef Py_ssize_t slot
        if rel < 0:
            return self.base_offset, 0
        if rel > I32_MAX:
            rel = I32_MAX
        slot = self._search(rel)
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._key(slot), self._pos(slot)

    def lookup_position(self, int64_t position):
        """Largest entry with position <= ``position``; (base_offset, 0) if none."""
        cdef Py_ssize_t lo = 0, hi = self._entries - 1, mid, best = -1
        while lo <= hi:
            mid = (lo + hi) >> 1
            if self._pos(mid) <= position:
                best = mid
                lo = mid + 1
            else:
                hi = mid - 1
        if best < 0:
            return self.base_offset, 0
        return self.base_offset + self._key(best), self._pos(best)

    cpdef int64_t walk_start(self, int64_t max_position, int64_t max_offset):
        """Where a read's extent walk may start (the index entry before the bound).

        Let k be the last entry with position <= max_position and offset <= max_offset.
        Every batch before entry k-1's position ends within max_position with offsets
        below max_offset, and so does the batch at it, so a walk from there skips only
        batches that belong in the read and still sees at least one. 0 when k < 1.
        """
        cdef Py_ssize_t lo = 0, hi = self._entries - 1, mid, k = -1
        cdef int64_t rel_max = max_offset - self.base_offset
        while lo <= hi:
            mid = (lo + hi) >> 1
            if self._pos(mid) <= max_position and self._key(mid) <= rel_max:
                k = mid
                lo = mid + 1
            else:
                hi = mid - 1
        if k < 1:
            return 0
        return self._pos(k - 1)

    def append(self, int64_t offset, int64_t position):
        """Add (offset, position); offset must exceed the last entry's.

        Raises:
            ValueError: the index is full, the offset does not increase or does not fit
                in an int32 relative to base_offset, or the position is out of range.
        """
        self.c_append(offset, position)

    cdef int c_append(self, int64_t offset, int64_t position) except -1:
        cdef int64_t rel = offset - self.base_offset
        cdef unsigned char *p
        if self._entries >= self._max_entries:
            raise ValueError(f"offset index {self.path} is full ({self._entries} entries)")
        if not 0 <= rel <= I32_MAX:
            raise ValueError(f"offset {offset} does not fit index with base {self.base_offset}")
        if not 0 <= position <= I32_MAX:
            raise ValueError(f"position {position} out of range")
        if self._entries and rel <= self._key(self._entries - 1):
            raise ValueError(
                f"offset {offset} is not larger than the last indexed offset "
                f"{self.last_offset} in {self.path}")
        p = self._map + self._entries * IDX_OFFSET_ENTRY
        lc_store_be32(p, <uint32_t>rel)
        lc_store_be32(p + 4, <uint32_t>position)
        self._entries += 1
        return 0

    def truncate_to(self, int64_t offset):
        """Remove every entry with offset >= ``offset``."""
        cdef int64_t rel = offset - self.base_offset
        cdef Py_ssize_t slot
        if rel <= 0:
            self._entries = 0
            return
        if rel > I32_MAX:
            rel = I32_MAX
        slot = self._search(rel)
        if slot < 0:
            self._entries = 0
        elif self._key(slot) == rel:
            self._entries = slot
        else:
            self._entries = slot + 1

    def sanity_check(self, log_size=None):
        """Check that the file is a trimmed, well-formed index (Kafka's sanityCheck and more).

        One pass over the entries (a few milliseconds for a full 10 MiB index): relative
        offsets >= 0 and strictly increasing, positions strictly increasing and before
        ``log_size``. Catches an untrimmed preallocated tail, a torn write and most
        scribbles.

        Raises:
            CorruptRecordError: the first problem found, with the entry number.
        """
        cdef Py_ssize_t i
        cdef int64_t rel, pos, prev_rel = -1, prev_pos = -1
        cdef int64_t limit = -1 if log_size is None else <int64_t>log_size
        size = os.path.getsize(self.path)
        if size % IDX_OFFSET_ENTRY:
            raise self._corrupt("offset", f"length {size} is not a multiple of 8")
        for i in range(self._entries):
            rel = self._key(i)
            pos = self._pos(i)
            if rel <= prev_rel or pos <= prev_pos:
                raise self._corrupt(
                    "offset", f"entry {i} ({rel}, {pos}) does not increase after "
                    f"({prev_rel}, {prev_pos})" + (" (untrimmed or torn index)" if rel == 0 else ""))
            if limit >= 0 and pos >= limit:
                raise self._corrupt(
                    "offset", f"entry {i} position {pos} is past the log end {limit}")
            prev_rel = rel
            prev_pos = pos


cdef class TimeIndex(_MappedIndex):
    """Map from timestamps to offsets (``.timeindex``, 12-byte entries).

    An entry (T, O) says: the largest timestamp seen in the segment before offset O is T.
    Timestamps never decrease; an entry is added only when the largest timestamp grows.
    """

    def __init__(self, str path, int64_t base_offset, Py_ssize_t max_index_size=-1,
                 bint writable=True):
        self._entry_size = IDX_TIME_ENTRY
        self._open(path, base_offset, max_index_size, writable)

    cdef int64_t _key(self, Py_ssize_t n) noexcept:
        return <int64_t>lc_load_be64(self._map + n * IDX_TIME_ENTRY)

    cdef int64_t _rel(self, Py_ssize_t n) noexcept:
        return <int32_t>lc_load_be32(self._map + n * IDX_TIME_ENTRY + 8)

    def entry(self, Py_ssize_t n):
        """The n-th entry as (timestamp, absolute offset)."""
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range [0, {self._entries})")
        return self._key(n), self.base_offset + self._rel(n)

    def last_entry(self):
        """(timestamp, offset) of the last entry; (-1, base_offset) when empty."""
        if self._entries == 0:
            return -1, self.base_offset
        return self._key(self._entries - 1), self.base_offset + self._rel(self._entries - 1)

    def lookup(self, int64_t target_timestamp):
        """Largest entry with timestamp <= target: (timestamp, offset); (-1, base) if none."""
        cdef Py_ssize_t slot = self._search(target_timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self._key(slot), self.base_offset + self._rel(slot)

    def append(self, int64_t timestamp, int64_t offset, bint skip_full_check=False):
        """Kafka's ``maybeAppend``: add (timestamp, offset) if timestamp exceeds the last.

        Returns True if an entry was written.

        Raises:
            ValueError: the index is full (unless ``skip_full_check``, which then skips
                the entry), the offset or timestamp goes backwards, or the offset does
                not fit.
        """
        return self.c_append(timestamp, offset, skip_full_check) == 1

    cdef int c_append(self, int64_t timestamp, int64_t offset, bint skip_full_check) except -1:
        """1 if written, 0 if skipped."""
        cdef int64_t last_ts = -1, last_off = self.base_offset
        cdef int64_t rel = offset - self.base_offset
        cdef unsigned char *p
        if self._entries >= self._max_entries:
            if not skip_full_check:
                raise ValueError(f"time index {self.path} is full ({self._entries} entries)")
            return 0
        if self._entries:
            last_ts = self._key(self._entries - 1)
            last_off = self.base_offset + self._rel(self._entries - 1)
            if offset < last_off:
                raise ValueError(
                    f"offset {offset} is before the last time index offset {last_off} "
                    f"in {self.path}")
            if timestamp < last_ts:
                raise ValueError(
                    f"timestamp {timestamp} is before the last time index timestamp {last_ts}")
        if timestamp <= last_ts:
            return 0
        if not 0 <= rel <= I32_MAX:
            raise ValueError(f"offset {offset} does not fit index with base {self.base_offset}")
        p = self._map + self._entries * IDX_TIME_ENTRY
        lc_store_be64(p, <uint64_t>timestamp)
        lc_store_be32(p + 8, <uint32_t>rel)
        self._entries += 1
        return 1

    def truncate_to(self, int64_t offset):
        """Remove every entry with offset >= ``offset``."""
        cdef int64_t rel = offset - self.base_offset
        cdef Py_ssize_t lo = 0, hi = self._entries, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._rel(mid) < rel:
                lo = mid + 1
            else:
                hi = mid
        self._entries = lo

    def sanity_check(self, log_size=None):
        """Check that the file is a trimmed, well-formed time index.

        Timestamps strictly increase (entries are added only when the largest timestamp
        grows), relative offsets are >= 0 and never decrease.

        Raises:
            CorruptRecordError: the first problem found, with the entry number.
        """
        cdef Py_ssize_t i
        cdef int64_t ts, rel, prev_ts = -1, prev_rel = 0
        size = os.path.getsize(self.path)
        if size % IDX_TIME_ENTRY:
            raise self._corrupt("time", f"length {size} is not a multiple of 12")
        for i in range(self._entries):
            ts = self._key(i)
            rel = self._rel(i)
            if ts <= prev_ts or rel < prev_rel:
                raise self._corrupt(
                    "time", f"entry {i} ({ts}, {rel}) does not increase after "
                    f"({prev_ts}, {prev_rel})" + (" (untrimmed or torn index)" if ts == 0 else ""))
            prev_ts = ts
            prev_rel = rel
