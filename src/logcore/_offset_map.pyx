# The log cleaner's offset map and its record loops (the pure-Python twin is
# logcore/_ref/offset_map.py; both give the same answers for the same input).
#
# OffsetMap is Kafka's SkimpyOffsetMap: a fixed-size open-addressing table of 24-byte
# entries, a 16-byte hash of the record key and the int64 offset of the key's latest
# record. Kafka hashes with MD5; any well-mixed 128-bit hash does the same job here (the
# map never leaves memory), so keys are hashed with MurmurHash3 x64-128, which needs no
# crypto library and runs without the GIL. Collisions between two different keys' 128-bit
# hashes are as unlikely as with MD5; equal hashes are treated as equal keys, as in Kafka.
# Slots are probed linearly from the first hash word; an entry with offset -1 is empty.
# Entries are never deleted: the cleaner clears the whole map between rounds.
#
# put_records fills the map from one batch's (decompressed) record section and
# retain_records copies the records that survive a clean; both walk the records with the
# GIL released. A record section is `count` records, each:
#   length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
#   key_length varint (-1 = null) | key | value_length varint (-1 = null) | value | headers

from libc.stdint cimport int32_t, int64_t, uint64_t, int8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from logcore._cursor cimport (
    Cursor,
    cursor_init,
    cursor_read_i8,
    cursor_read_varint,
    cursor_read_varlong,
    cursor_skip,
)
from logcore._includes cimport lc_prefetch, lc_table_alloc, lc_table_free
from logcore._varint cimport varint_encode_u64, zigzag_encode64

from logcore.errors import CorruptRecordError

ENTRY_SIZE = 24


cdef struct Entry:
    uint64_t h1
    uint64_t h2
    int64_t offset


cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _fmix(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xff51afd7ed558ccdULL
    k ^= k >> 33
    k *= 0xc4ceb9fe1a85ec53ULL
    k ^= k >> 33
    return k


cdef inline uint64_t _le64(const unsigned char *p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(7, -1, -1):
        v = (v << 8) | p[i]
    return v


cdef void murmur3_128(const unsigned char *data, size_t n, uint64_t *out1,
                      uint64_t *out2) noexcept nogil:
    """MurmurHash3 x64-128, seed 0 (Austin Appleby's public-domain algorithm)."""
    cdef uint64_t c1 = 0x87c37b91114253d5ULL
    cdef uint64_t c2 = 0x4cf5ad432745937fULL
    cdef uint64_t h1 = 0, h2 = 0, k1, k2
    cdef size_t nblocks = n // 16, i
    cdef const unsigned char *tail
    cdef size_t rest
    for i in range(nblocks):
        k1 = _le64(data + 16 * i)
        k2 = _le64(data + 16 * i + 8)
        k1 *= c1
        k1 = _rotl(k1, 31)
        k1 *= c2
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * 5 + 0x52dce729
        k2 *= c2
        k2 = _rotl(k2, 33)
        k2 *= c1
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * 5 + 0x38495ab5
    tail = data + nblocks * 16
    rest = n & 15
    k1 = 0
    k2 = 0
    if rest > 8:
        for i in range(rest - 1, 7, -1):
            k2 = (k2 << 8) | tail[i]
        k2 *= c2
        k2 = _rotl(k2, 33)
        k2 *= c1
        h2 ^= k2
    if rest > 0:
        for i in range((rest if rest < 8 else 8) - 1, -1, -1):
            k1 = (k1 << 8) | tail[i]
        k1 *= c1
        k1 = _rotl(k1, 31)
        k1 *= c2
        h1 ^= k1
    h1 ^= <uint64_t>n
    h2 ^= <uint64_t>n
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    out1[0] = h1
    out2[0] = h2


def key_hash(key) -> bytes:
    """The 16-byte hash the map stores for ``key`` (h1 then h2, little-endian)."""
    cdef const unsigned char[::1] v = key
    cdef uint64_t h1, h2
    cdef unsigned char out[16]
    cdef int i
    murmur3_128(&v[0] if v.shape[0] else <const unsigned char *>b"", v.shape[0], &h1, &h2)
    for i in range(8):
        out[i] = (h1 >> (8 * i)) & 0xFF
        out[8 + i] = (h2 >> (8 * i)) & 0xFF
    return bytes(out[:16])


# Status codes of the nogil record walks.
cdef enum:
    _OK = 0
    _BAD = -1
    _FULL = -2

# Records hashed (and their slots prefetched) before the first of them is probed.
cdef enum:
    _CHUNK = 16


cdef struct _Rec:
    const unsigned char *start  # the length varint
    const unsigned char *rest   # after the timestamp delta
    const unsigned char *end
    int64_t offset
    int64_t tsdelta
    uint64_t h1
    uint64_t h2
    int32_t klen
    int32_t vlen
    int8_t attrs


cdef class OffsetMap:
    """key hash -> offset of the key's latest record, in ``memory`` bytes (24 per slot).

    Args:
        memory: bytes for the table (Kafka: log.cleaner.dedupe.buffer.size / threads);
            at least two entries.
        load_factor: the map counts as full at ``slots * load_factor`` entries
            (log.cleaner.io.buffer.load.factor, 0.9): beyond that probes get long.

    Raises:
        ValueError: memory below two entries, or load_factor not in (0, 1].
        MemoryError: the table cannot be allocated.

    Not thread-safe: one cleaner thread owns one map.
    """

    cdef Entry *table
    cdef readonly Py_ssize_t slots
    cdef readonly Py_ssize_t capacity
    cdef readonly Py_ssize_t size
    cdef readonly int64_t latest_offset
    cdef readonly double load_factor

    def __cinit__(self, Py_ssize_t memory, double load_factor=0.9):
        self.table = NULL
        if memory < 2 * ENTRY_SIZE:
            raise ValueError(
                f"an offset map needs at least {2 * ENTRY_SIZE} bytes, got {memory}")
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load_factor must be in (0, 1], got {load_factor}")
        self.slots = memory // ENTRY_SIZE
        self.load_factor = load_factor
        # one slot always stays empty, so that a probe for a missing key ends
        self.capacity = min(max(1, <Py_ssize_t>(self.slots * load_factor)), self.slots - 1)
        self.table = <Entry *>lc_table_alloc(self.slots * sizeof(Entry))
        if self.table == NULL:
            raise MemoryError(f"cannot allocate an offset map of {memory} bytes")
        self.clear()

    def __dealloc__(self):
        lc_table_free(self.table, self.slots * sizeof(Entry))

    def clear(self) -> None:
        """Empty the map (between cleaning rounds)."""
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.slots):
                self.table[i].offset = -1
        self.size = 0
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    @property
    def full(self) -> bool:
        """True once ``capacity`` entries are in (the cleaner stops filling)."""
        return self.size >= self.capacity

    cdef int _put(self, uint64_t h1, uint64_t h2, int64_t offset) noexcept nogil:
        cdef Py_ssize_t i = <Py_ssize_t>(h1 % <uint64_t>self.slots)
        cdef Entry *e
        while True:
            e = &self.table[i]
            if e.offset < 0:
                if self.size >= self.slots - 1:
                    return _FULL
                e.h1 = h1
                e.h2 = h2
                e.offset = offset
                self.size += 1
                break
            if e.h1 == h1 and e.h2 == h2:
                e.offset = offset
                break
            i += 1
            if i == self.slots:
                i = 0
        self.latest_offset = offset
        return _OK

    cdef int64_t _get(self, uint64_t h1, uint64_t h2) noexcept nogil:
        cdef Py_ssize_t i = <Py_ssize_t>(h1 % <uint64_t>self.slots)
        cdef Py_ssize_t probes = 0
        cdef Entry *e
        while probes < self.slots:
            e = &self.table[i]
            if e.offset < 0:
                return -1
            if e.h1 == h1 and e.h2 == h2:
                return e.offset
            i += 1
            probes += 1
            if i == self.slots:
                i = 0
        return -1

    def put(self, key, int64_t offset) -> None:
        """Record ``offset`` as the latest of ``key`` (bytes-like).

        Raises:
            OverflowError: the table has no free slot left.
        """
        cdef const unsigned char[::1] v = key
        cdef uint64_t h1, h2
        murmur3_128(&v[0] if v.shape[0] else <const unsigned char *>b"", v.shape[0], &h1, &h2)
        if self._put(h1, h2, offset) != _OK:
            raise OverflowError(f"offset map full ({self.slots} slots)")

    def get(self, key) -> int:
        """Offset of ``key``'s latest record, or -1 when the map does not hold the key."""
        cdef const unsigned char[::1] v = key
        cdef uint64_t h1, h2
        murmur3_128(&v[0] if v.shape[0] else <const unsigned char *>b"", v.shape[0], &h1, &h2)
        return self._get(h1, h2)

    def put_records(self, section, int32_t count, int64_t base_offset,
                    int64_t stop_offset) -> int:
        """Put every keyed record of a record section whose offset is below ``stop_offset``.

        Returns:
            the number of records put (keyless records are skipped, as Kafka skips them).

        Raises:
            CorruptRecordError: the section does not hold ``count`` well-formed records.
            OverflowError: the table ran out of slots (check ``full`` per batch before).
        """
        cdef const unsigned char[::1] v = section
        cdef Py_ssize_t n = v.shape[0]
        cdef const unsigned char *p = &v[0] if n else NULL
        cdef int st = _OK
        cdef int32_t i = 0, length, odelta, klen, j, m
        cdef int8_t attrs
        cdef int64_t tsdelta, offset
        cdef Cursor c, body
        cdef Py_ssize_t put = 0
        # Records are hashed a chunk at a time and their slots prefetched before any is
        # probed: the probes' cache misses then overlap instead of queueing.
        cdef uint64_t hs1[_CHUNK]
        cdef uint64_t hs2[_CHUNK]
        cdef int64_t offs[_CHUNK]
        with nogil:
            cursor_init(&c, p, n)
            while i < count and st == _OK:
                m = 0
                while i < count and m < _CHUNK:
                    if cursor_read_varint(&c, &length) != 0 or length < 6:
                        st = _BAD
                        break
                    body.ptr = c.ptr
                    body.end = c.ptr + length
                    if cursor_skip(&c, length) != 0:
                        st = _BAD
                        break
                    if (cursor_read_i8(&body, &attrs) != 0
                            or cursor_read_varlong(&body, &tsdelta) != 0
                            or cursor_read_varint(&body, &odelta) != 0
                            or cursor_read_varint(&body, &klen) != 0
                            or klen < -1 or body.end - body.ptr < klen):
                        st = _BAD
                        break
                    i += 1
                    offset = base_offset + odelta
                    if klen < 0 or offset >= stop_offset:
                        continue
                    murmur3_128(body.ptr, klen, &hs1[m], &hs2[m])
                    lc_prefetch(&self.table[hs1[m] % <uint64_t>self.slots])
                    offs[m] = offset
                    m += 1
                for j in range(m):
                    if self._put(hs1[j], hs2[j], offs[j]) != _OK:
                        st = _FULL
                        break
                    put += 1
        if st == _BAD:
            raise CorruptRecordError(f"malformed record {i} of {count} in a record section")
        if st == _FULL:
            raise OverflowError(f"offset map full ({self.slots} slots)")
        return put

    def retain_records(self, section, int32_t count, int64_t base_offset,
                       int64_t base_timestamp, int64_t new_base_timestamp,
                       bint retain_deletes, int64_t retain_from):
        """The records of a section that a clean keeps, re-encoded if the base moves.

        A record at or past ``retain_from`` (the end of the section the map covers) is
        kept whatever it holds (Kafka's ``pastLatestOffset``: the map knows nothing of
        later records, so a tombstone there may still hide an older value). Below it a
        record is kept when it has a key, the map holds no later offset for the key, and
        it has a value or ``retain_deletes`` (tombstones before their horizon).
        Kept records are copied unchanged, or with their timestamp delta rewritten
        against ``new_base_timestamp`` (a batch that gets its delete horizon, KIP-534).

        Returns:
            (kept section bytes, kept count, tombstones kept, max timestamp of the kept
            records (-1 if none), keyless records dropped)

        Raises:
            CorruptRecordError: the section does not hold ``count`` well-formed records.
        """
        cdef const unsigned char[::1] v = section
        cdef Py_ssize_t n = v.shape[0]
        cdef const unsigned char *p = &v[0] if n else NULL
        # a rewritten timestamp delta grows by at most 9 bytes, the length varint by 4
        cdef Py_ssize_t cap = n + <Py_ssize_t>count * 13 + 16
        cdef unsigned char *out = <unsigned char *>malloc(cap)
        cdef Py_ssize_t w = 0
        cdef int st = _OK
        cdef int32_t i = 0, length, odelta, j, m
        cdef int64_t found, ts, max_ts = -1
        cdef Cursor c, body
        cdef _Rec recs[_CHUNK]
        cdef _Rec *r
        cdef int32_t kept = 0, tombstones = 0, keyless = 0
        cdef unsigned char tmp[16]
        cdef int tl, ll
        if out == NULL:
            raise MemoryError()
        with nogil:
            cursor_init(&c, p, n)
            while i < count and st == _OK:
                # parse and hash a chunk, prefetching the slots the map will probe ...
                m = 0
                while i < count and m < _CHUNK:
                    r = &recs[m]
                    r.start = c.ptr
                    if cursor_read_varint(&c, &length) != 0 or length < 6:
                        st = _BAD
                        break
                    body.ptr = c.ptr
                    body.end = c.ptr + length
                    if cursor_skip(&c, length) != 0:
                        st = _BAD
                        break
                    r.end = c.ptr
                    if (cursor_read_i8(&body, &r.attrs) != 0
                            or cursor_read_varlong(&body, &r.tsdelta) != 0):
                        st = _BAD
                        break
                    r.rest = body.ptr
                    if (cursor_read_varint(&body, &odelta) != 0
                            or cursor_read_varint(&body, &r.klen) != 0
                            or r.klen < -1 or body.end - body.ptr < r.klen):
                        st = _BAD
                        break
                    r.offset = base_offset + odelta
                    if r.klen >= 0:
                        if r.offset < retain_from:
                            murmur3_128(body.ptr, r.klen, &r.h1, &r.h2)
                            lc_prefetch(&self.table[r.h1 % <uint64_t>self.slots])
                        cursor_skip(&body, r.klen)
                    if cursor_read_varint(&body, &r.vlen) != 0 or r.vlen < -1:
                        st = _BAD
                        break
                    i += 1
                    m += 1
                if st != _OK:
                    break
                # ... then decide and copy
                for j in range(m):
                    r = &recs[j]
                    if r.offset < retain_from:
                        if r.klen < 0:
                            keyless += 1
                            continue
                        found = self._get(r.h1, r.h2)
                        if found >= 0 and r.offset < found:
                            continue
                        if r.vlen < 0 and not retain_deletes:
                            continue
                    kept += 1
                    if r.vlen < 0:
                        tombstones += 1
                    ts = base_timestamp + r.tsdelta
                    if ts > max_ts:
                        max_ts = ts
                    if new_base_timestamp == base_timestamp:
                        memcpy(out + w, r.start, r.end - r.start)
                        w += r.end - r.start
                    else:
                        # attributes, the new delta, then the rest of the body unchanged
                        tl = varint_encode_u64(tmp, zigzag_encode64(ts - new_base_timestamp))
                        length = <int32_t>(1 + tl + (r.end - r.rest))
                        ll = varint_encode_u64(out + w, zigzag_encode64(length))
                        w += ll
                        out[w] = <unsigned char>r.attrs
                        w += 1
                        memcpy(out + w, tmp, tl)
                        w += tl
                        memcpy(out + w, r.rest, r.end - r.rest)
                        w += r.end - r.rest
            if st == _OK and c.ptr != c.end:
                st = _BAD
        try:
            if st == _BAD:
                raise CorruptRecordError(f"malformed record section ({count} records)")
            return out[:w], kept, tombstones, max_ts, keyless
        finally:
            free(out)
