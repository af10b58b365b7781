"""decode_columns: every record of a run of RecordBatch v2 as numpy columns.

Output layout (Arrow-style), for n records:

    offsets          int64[n]      base_offset + offset_delta
    timestamps       int64[n]      base_timestamp + timestamp_delta (LogAppendTime:
                                   the batch max_timestamp)
    timestamp_types  int8[n]       0 create, 1 log append
    key_offsets      int32[n + 1]  key i is key_data[key_offsets[i]:key_offsets[i + 1]]
    value_offsets    int32[n + 1]  likewise for value_data
    key_data         uint8[...]    the keys, back to back    } one allocation:
    value_data       uint8[...]    the values, back to back  } values, then keys
    key_valid        bool[n]       False for a null key (its slot is empty)
    value_valid      bool[n]       False for a null value
    header_counts    int32[n]

With ``copy_values=False`` the values are not copied when every batch is uncompressed:
``value_data`` is the input buffer itself (a read-only uint8 array that keeps it alive),
``value_offsets`` is None, and value i is ``value_data[value_starts[i]:value_starts[i] +
value_lengths[i]]`` (``value_starts`` int64[n], ``value_lengths`` int32[n], 0 for a null
value). If any batch is compressed the values are copied as usual and described the same
way (starts and lengths into the copy), so the caller reads one layout either way. With
the default ``copy_values=True``, ``value_starts`` and ``value_lengths`` are None.

Input: concatenated batches (the header of _fields.pxd, the records of _record.pxd),
walked as iter_batches walks them; control batches are skipped, as a consumer does.
The pure-Python twin is logcore._ref.columns.

How this unit is fast: two passes. Pass 1 reads batch headers, checks CRCs, decompresses,
and sums records_count bounded by the bytes present; pass 2 parses every record once
(record_parse, inlined here from _record.pxd) straight into numpy arrays allocated once
at that size, through raw pointers, without the GIL for large inputs. One parse per
record instead of two is what makes this ~10x faster than decoding Record objects.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport INT32_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy

from logcore._consts cimport *
from logcore._cursor cimport Cursor
from logcore._fields cimport be_i16, be_i32, be_i64, wrap_add
from logcore._includes cimport lc_copy, LOGCORE_DEBUG
from logcore._reader cimport RecordBatch
from logcore._record cimport (
    RecordView, WalkError, WalkStats, corrupt, record_parse, records_walk, walk_error,
)

import numpy as np

from logcore.errors import CorruptRecordError


@cython.final
cdef class Columns:
    """Every record of a run of batches as Arrow-style numpy columns.

    Attributes:
        offsets: int64[n]; timestamps: int64[n] (LogAppendTime: the batch max_timestamp);
        timestamp_types: int8[n] (0 create, 1 log append);
        key_offsets, value_offsets: int32[n + 1] (key i is key_data[key_offsets[i]:
            key_offsets[i + 1]]; a null key has an empty slot and key_valid[i] False);
        key_data, value_data: uint8, contiguous; key_valid, value_valid: bool[n];
        header_counts: int32[n]; num_records: n.
        value_starts: int64[n], value_lengths: int32[n], with value_offsets None, when
            decoded with ``copy_values=False`` (see the module docstring); else None.
    """

    def __init__(self, offsets, timestamps, timestamp_types, key_offsets, value_offsets,
                 key_data, value_data, key_valid, value_valid, header_counts,
                 value_starts=None, value_lengths=None):
        self.offsets = offsets
        self.timestamps = timestamps
        self.timestamp_types = timestamp_types
        self.key_offsets = key_offsets
        self.value_offsets = value_offsets
        self.key_data = key_data
        self.value_data = value_data
        self.key_valid = key_valid
        self.value_valid = value_valid
        self.header_counts = header_counts
        self.value_starts = value_starts
        self.value_lengths = value_lengths
        self.num_records = len(offsets)

    def __len__(self):
        return self.num_records

    def __repr__(self):
        return f"Columns(num_records={self.num_records})"


# Pass-1 facts about one data batch, kept for pass 2 (a C array grown by doubling).
cdef struct _ColBatch:
    const unsigned char *section
    const unsigned char *section_end
    int32_t count
    int64_t base_offset
    int64_t base_timestamp
    int64_t max_timestamp
    bint log_append
    Py_ssize_t pos                 # batch position and index, for error messages
    Py_ssize_t index
    bint compressed


# Output of pass 2: raw pointers into the preallocated arrays, plus the key scratch.
cdef struct _ColOut:
    int64_t *offsets
    int64_t *timestamps
    int8_t *ts_types
    int32_t *key_offsets
    int32_t *value_offsets
    uint8_t *key_valid
    uint8_t *value_valid
    int32_t *header_counts
    uint8_t *value_data            # values from the front of the shared data buffer
    bint views                     # copy_values=False, all uncompressed: no value copy
    const unsigned char *base      # the input buffer (views: value_starts are from here)
    int64_t *value_starts          # views: where each value starts in the input buffer
    int32_t *value_lengths
    uint8_t *keys                  # scratch (malloc), copied behind the values at the end
    size_t keys_cap
    int64_t key_len
    int64_t value_len
    int64_t n                      # records written
    Py_ssize_t failed_batch        # on error: index into the batch array
    WalkError err


cdef int _fill_columns(const _ColBatch *batches, Py_ssize_t nbatches, int64_t capacity,
                       _ColOut *o) noexcept nogil:
    """Pass 2: parse every record once, validating as it goes, into the columns.

    Fixed-width columns were allocated for `capacity` records (the sum of records_count
    bounded by the bytes present, exact for valid input), values into a buffer as large
    as all record sections (keys and values are slices of them, so they fit). Keys go to
    a growing scratch buffer, appended behind the values by the caller, so that one
    allocation holds both data columns with no upper-bound waste.
    """
    cdef Py_ssize_t b
    cdef int32_t i
    cdef Cursor c
    cdef RecordView r
    cdef int64_t k = 0, kpos = 0, vpos = 0
    cdef const _ColBatch *cb
    cdef size_t cap
    cdef uint8_t *grown
    o.key_offsets[0] = 0
    o.value_offsets[0] = 0
    for b in range(nbatches):
        cb = &batches[b]
        o.failed_batch = b
        o.err.index = 0
        o.err.value = 0
        c.ptr = cb.section
        c.end = cb.section_end
        for i in range(cb.count):
            o.err.index = i
            if c.ptr >= c.end or k >= capacity:
                o.err.status = ST_MISSING_RECORDS
                o.err.at = c.ptr
                return o.err.status
            if record_parse(&c, &r, &o.err) != ST_OK:
                return o.err.status
            o.offsets[k] = wrap_add(cb.base_offset, r.offset_delta)
            if cb.log_append:
                o.timestamps[k] = cb.max_timestamp
                o.ts_types[k] = 1
            else:
                o.timestamps[k] = wrap_add(cb.base_timestamp, r.timestamp_delta)
                o.ts_types[k] = 0
            if r.key_len >= 0:
                if <size_t>(kpos + r.key_len) > o.keys_cap:
                    cap = o.keys_cap * 2 if o.keys_cap else 4096
                    while cap < <size_t>(kpos + r.key_len):
                        cap *= 2
                    grown = <uint8_t *>realloc(o.keys, cap)
                    if grown == NULL:
                        o.err.status = ST_NO_MEMORY
                        return ST_NO_MEMORY
                    o.keys = grown
                    o.keys_cap = cap
                lc_copy(o.keys + kpos, r.key, <size_t>r.key_len)
                kpos += r.key_len
                o.key_valid[k] = 1
            else:
                o.key_valid[k] = 0
            if o.views:
                # The value stays where it is: its place in the input buffer.
                if r.value_len >= 0:
                    o.value_starts[k] = r.value - o.base
                    o.value_lengths[k] = r.value_len
                    o.value_valid[k] = 1
                else:
                    o.value_starts[k] = 0
                    o.value_lengths[k] = 0
                    o.value_valid[k] = 0
            elif r.value_len >= 0:
                lc_copy(o.value_data + vpos, r.value, <size_t>r.value_len)
                vpos += r.value_len
                o.value_valid[k] = 1
            else:
                o.value_valid[k] = 0
            # int32 offsets: checked against INT32_MAX by the caller before use
            o.key_offsets[k + 1] = <int32_t>kpos
            if not o.views:
                o.value_offsets[k + 1] = <int32_t>vpos
            o.header_counts[k] = r.header_count
            k += 1
        if c.ptr != c.end:
            o.err.status = ST_TRAILING_BYTES
            o.err.at = c.ptr
            o.err.value = c.end - c.ptr
            return o.err.status
    o.n = k
    o.key_len = kpos
    o.value_len = vpos
    return ST_OK


# numpy entry points and dtypes resolved once: module attribute lookups and dtype
# coercion cost ~0.1 us each, and decode_columns makes nine arrays per call.
cdef object _np_empty = np.empty
cdef object _DT_I64 = np.dtype(np.int64)
cdef object _DT_I32 = np.dtype(np.int32)
cdef object _DT_I8 = np.dtype(np.int8)
cdef object _DT_U8 = np.dtype(np.uint8)
cdef object _DT_BOOL = np.dtype(np.bool_)


cdef void *_array_ptr(object arr) except NULL:
    """Address of a (C-contiguous, non-empty) numpy array's data.

    Through the buffer protocol rather than a typed memoryview: acquiring a Cython
    memoryview costs ~0.4 us, PyObject_GetBuffer ~0.05 us. The pointer stays valid after
    the release because the array, which owns the memory, is never resized.
    """
    cdef Py_buffer view
    cdef void *ptr
    PyObject_GetBuffer(arr, &view, PyBUF_SIMPLE)
    ptr = view.buf
    PyBuffer_Release(&view)
    return ptr


cdef object _columns_first_error(const _ColBatch *batches, Py_ssize_t upto, exc):
    """An error found in pass 1 at batch `upto` is reported only if no earlier batch has
    a bad record: _ref checks batch by batch, and so the first bad batch wins here too."""
    cdef Py_ssize_t b
    cdef WalkStats stats
    cdef WalkError e
    for b in range(upto):
        if records_walk(batches[b].section, batches[b].section_end, batches[b].count, 0, 0,
                        False, False, False, &stats, &e) != ST_OK:
            return walk_error(&e, batches[b].index, batches[b].pos, batches[b].section,
                               -1 if batches[b].compressed else batches[b].pos + HDR_SIZE,
                               batches[b].count)
    return exc


def decode_columns(object source not None, *, bint copy_values=True):
    """Decode every record of every complete data batch into numpy columns.

    Batches are walked as iter_batches does (a truncated trailing batch is skipped);
    control batches are skipped, as a consumer does; each data batch's CRC is checked.

    Two passes. Pass 1 reads the batch headers, checks CRCs, decompresses compressed
    sections, and sums records_count, each bounded by the bytes present (a record is at
    least 7 bytes), so nothing is allocated from an untrusted count. Pass 2 parses every
    record once, validating it, straight into arrays allocated at that size (exact for
    valid input), without the GIL for large inputs. One parse per record instead of two
    is what makes this ~10x faster than decoding Record objects.

    Args:
        source: the batches (any buffer).
        copy_values: False: values are not copied out of an all-uncompressed ``source``
            (``value_data`` is ``source``, read-only, kept alive by the columns; values
            located by ``value_starts`` / ``value_lengths``, ``value_offsets`` None; see
            the module docstring). The caller must not modify ``source`` meanwhile.

    Returns:
        Columns.

    Raises:
        CorruptRecordError: a CRC mismatch or any malformed batch or record.
    """
    cdef const unsigned char[::1] buffer = source
    cdef Py_ssize_t n = buffer.shape[0]
    cdef const unsigned char *base = &buffer[0] if n > 0 else NULL
    cdef Py_ssize_t pos = 0, size, index = 0
    cdef const unsigned char *p
    cdef int32_t batch_length, count
    cdef int16_t attrs
    cdef _ColBatch *batches = NULL
    cdef _ColBatch *grown
    cdef _ColBatch *cb
    cdef Py_ssize_t nbatches = 0, cap = 0
    cdef int64_t capacity = 0, data_bound = 0, bound
    cdef int st
    cdef RecordBatch rb
    cdef list keep = []            # decompressed sections, alive until pass 2 is done
    cdef WalkStats stats
    cdef WalkError e
    cdef int64_t unchecked = 0     # decompressed bytes kept without a walk yet
    cdef const unsigned char *sec
    cdef Py_ssize_t sec_len
    cdef _ColOut o
    cdef bint any_compressed = False
    o.keys = NULL
    o.keys_cap = 0
    o.views = False
    # Every error path must free the two C allocations (batch array, key scratch): the
    # whole body is one try/finally.
    try:
        # Pass 1: headers, CRCs, decompression, bounded sizes.
        while n - pos >= HDR_PROBE_SIZE:
            p = base + pos
            try:
                batch_length = be_i32(p + HDR_BATCH_LENGTH)
                if batch_length < HDR_MIN_BATCH_LENGTH:
                    raise corrupt(
                        f"batch_length {batch_length} is below the minimum "
                        f"{HDR_MIN_BATCH_LENGTH}", index, pos)
                size = HDR_LOG_OVERHEAD + <Py_ssize_t>batch_length
                if size > n - pos:
                    break
                if p[HDR_MAGIC] != MAGIC_V2:
                    raise corrupt(f"unsupported magic {<int8_t>p[HDR_MAGIC]} (expected 2)",
                                   index, pos)
                attrs = be_i16(p + HDR_ATTRIBUTES)
                if attrs & ATTR_CONTROL:
                    # A consumer never hands control records (transaction markers) to the
                    # application; _ref skips them before their CRC, and so do we.
                    pos += size
                    index += 1
                    continue
                rb = RecordBatch.new(buffer[pos:pos + size], pos, index)
                rb._check_crc()
                count = be_i32(p + HDR_RECORDS_COUNT)
                if count < 0:
                    raise rb._err(f"negative records_count {count}")
                data = rb._section()
            except CorruptRecordError as exc:
                raise _columns_first_error(batches, nbatches, exc) from None
            if data is None:
                sec = p + HDR_SIZE
                sec_len = size - HDR_SIZE
            else:
                sec = <const unsigned char *>PyBytes_AS_STRING(data)
                sec_len = PyBytes_GET_SIZE(data)
                # Each batch may decompress to 256 MiB (_compression's bound): keeping
                # every section unchecked until pass 2 would let a buffer of garbage
                # bombs pile up gigabytes. Up to COLUMNS_UNCHECKED_LIMIT bytes of
                # sections wait for pass 2 (one parse per record, the fast path of
                # every ordinary fetch); past it each section is walked before it is
                # kept, so only valid records (which the columns hold anyway) pile up.
                if unchecked + sec_len > COLUMNS_UNCHECKED_LIMIT:
                    if records_walk(sec, sec + sec_len, count, 0, 0, False, False, False,
                                    &stats, &e) != ST_OK:
                        raise _columns_first_error(
                            batches, nbatches, walk_error(&e, index, pos, sec, -1, count))
                else:
                    unchecked += sec_len
                keep.append(data)
            if nbatches == cap:
                cap = cap * 2 if cap else 16
                grown = <_ColBatch *>PyMem_Realloc(batches, <size_t>cap * sizeof(_ColBatch))
                if grown == NULL:
                    raise MemoryError()
                batches = grown
            cb = &batches[nbatches]
            cb.section = sec
            cb.section_end = sec + sec_len
            cb.count = count
            cb.base_offset = be_i64(p + HDR_BASE_OFFSET)
            cb.base_timestamp = be_i64(p + HDR_BASE_TIMESTAMP)
            cb.max_timestamp = be_i64(p + HDR_MAX_TIMESTAMP)
            cb.log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
            cb.pos = pos
            cb.index = index
            cb.compressed = data is not None
            any_compressed = any_compressed or cb.compressed
            nbatches += 1
            # records_count is untrusted: at most one record per 7 bytes present.
            bound = sec_len // RECORD_MIN_SIZE
            capacity += count if count < bound else bound
            data_bound += sec_len
            pos += size
            index += 1

        # Pass 2: arrays at their bounded sizes, one parse per record.
        offsets = _np_empty(capacity, _DT_I64)
        timestamps = _np_empty(capacity, _DT_I64)
        ts_types = _np_empty(capacity, _DT_I8)
        key_offsets = _np_empty(capacity + 1, _DT_I32)
        value_offsets = _np_empty(capacity + 1, _DT_I32)
        key_valid = _np_empty(capacity, _DT_BOOL)
        value_valid = _np_empty(capacity, _DT_BOOL)
        header_counts = _np_empty(capacity, _DT_I32)
        # Views: the values stay in the input; the data buffer holds the keys only (their
        # total is known after pass 2: the scratch is copied into a buffer of that size).
        o.views = not copy_values and not any_compressed
        o.base = base
        value_starts = value_lengths = None
        if not copy_values:
            value_starts = _np_empty(capacity, _DT_I64)
            value_lengths = _np_empty(capacity, _DT_I32)
            if o.views and capacity > 0:
                o.value_starts = <int64_t *>_array_ptr(value_starts)
                o.value_lengths = <int32_t *>_array_ptr(value_lengths)
        data_buf = _np_empty(0 if o.views else data_bound, _DT_U8)
        o.n = 0
        o.key_len = 0
        o.value_len = 0
        o.key_offsets = <int32_t *>_array_ptr(key_offsets)
        o.value_offsets = <int32_t *>_array_ptr(value_offsets)
        if capacity > 0:
            o.offsets = <int64_t *>_array_ptr(offsets)
            o.timestamps = <int64_t *>_array_ptr(timestamps)
            o.ts_types = <int8_t *>_array_ptr(ts_types)
            o.key_valid = <uint8_t *>_array_ptr(key_valid)
            o.value_valid = <uint8_t *>_array_ptr(value_valid)
            o.header_counts = <int32_t *>_array_ptr(header_counts)
            o.value_data = (<uint8_t *>_array_ptr(data_buf) if data_bound > 0 and not o.views
                            else NULL)
        if capacity >= 4096:
            with nogil:
                st = _fill_columns(batches, nbatches, capacity, &o)
        else:
            st = _fill_columns(batches, nbatches, capacity, &o)
        if st != ST_OK:
            if st == ST_NO_MEMORY:
                raise MemoryError()
            cb = &batches[o.failed_batch]
            raise walk_error(&o.err, cb.index, cb.pos, cb.section,
                              -1 if cb.compressed else cb.pos + HDR_SIZE, cb.count)
        if LOGCORE_DEBUG and (o.n != capacity or o.key_len + o.value_len > data_bound):
            raise AssertionError(f"decode_columns filled {o.n} of {capacity} records, "
                                 f"{o.key_len + o.value_len} of {data_bound} data bytes")
        if o.key_len > INT32_MAX or o.value_len > INT32_MAX:
            raise CorruptRecordError("key or value data exceeds the int32 offsets of Columns")
        if o.views:
            value_data = np.frombuffer(source, dtype=_DT_U8)
            value_data.flags.writeable = False
            key_data = _np_empty(o.key_len, _DT_U8)
            if o.key_len > 0:
                memcpy(_array_ptr(key_data), o.keys, <size_t>o.key_len)
            value_offsets = None
        else:
            # Keys behind the values in the one data buffer (keys + values <= data_bound).
            if o.key_len > 0:
                memcpy(o.value_data + o.value_len, o.keys, <size_t>o.key_len)
            key_data = data_buf[o.value_len:o.value_len + o.key_len]
            value_data = data_buf[:o.value_len]
            if not copy_values:  # compressed input: the copies, located as views are
                value_starts = value_offsets[:o.n].astype(_DT_I64)
                value_lengths = np.diff(value_offsets[:o.n + 1])
                value_offsets = None
        cols = Columns.__new__(Columns)
        (<Columns>cols).offsets = offsets
        (<Columns>cols).timestamps = timestamps
        (<Columns>cols).timestamp_types = ts_types
        (<Columns>cols).key_offsets = key_offsets
        (<Columns>cols).value_offsets = value_offsets
        (<Columns>cols).key_data = key_data
        (<Columns>cols).value_data = value_data
        (<Columns>cols).value_starts = value_starts
        (<Columns>cols).value_lengths = value_lengths
        (<Columns>cols).key_valid = key_valid
        (<Columns>cols).value_valid = value_valid
        (<Columns>cols).header_counts = header_counts
        (<Columns>cols).num_records = <Py_ssize_t>o.n
        return cols
    finally:
        PyMem_Free(batches)
        free(o.keys)
