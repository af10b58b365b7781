# One record of a RecordBatch v2, for cimport by the codec units that read records
# (_reader, _columns, _append). The walker itself is in _record.pyx.
#
# Record layout (Kafka's DefaultRecord.java), all varints zig-zag:
#
#   length varint | attributes int8 (unused) | timestamp_delta varlong |
#   offset_delta varint | key_length varint (-1 = null) | key |
#   value_length varint (-1 = null) | value | header_count varint |
#   header_count x (key_length varint (>= 0) | key utf-8 |
#                   value_length varint (-1 = null) | value)
#
# record_parse, the per-record fast path, is inline here so that it is compiled into
# each module that walks records (no call across modules per record); its slow twin
# record_parse_checked and the per-batch records_walk are ordinary functions of
# _record.pyx, reached through Cython's cimported function pointers.

from libc.stdint cimport int32_t, int64_t

from logcore._consts cimport RECORD_MIN_BODY, ST_OK
from logcore._cursor cimport Cursor
from logcore._varint cimport varint_read_i32, varint_read_i64


# One record parsed in place: pointers into the records section, nothing copied.
cdef struct RecordView:
    int64_t timestamp_delta
    int32_t offset_delta
    int32_t key_len                 # -1 = null
    int32_t value_len               # -1 = null
    int32_t header_count
    const unsigned char *key
    const unsigned char *value
    const unsigned char *headers    # first header; header_count of them up to `end`
    const unsigned char *end        # one past the record


# Where and why a walk failed (filled by record_parse / records_walk).
cdef struct WalkError:
    int status                      # ST_* from _consts.pxd
    const unsigned char *at         # the failing byte
    int32_t index                   # record index in its batch
    int64_t value                   # the offending value (a length, a count), if any


# What a full walk of a records section found.
cdef struct WalkStats:
    int32_t count
    int64_t max_timestamp           # LogAppendTime batches: the header max_timestamp
    int32_t max_timestamp_index     # first record holding max_timestamp
    int64_t min_timestamp
    int64_t key_bytes
    int64_t value_bytes


cdef int record_parse_checked(Cursor *c, RecordView *r, WalkError *e) noexcept nogil

cdef int records_walk(const unsigned char *p, const unsigned char *end, int32_t count,
                      int64_t base_timestamp, int64_t header_max_timestamp, bint log_append,
                      bint check_offset_deltas, bint check_header_utf8, WalkStats *stats,
                      WalkError *err) noexcept nogil

# Errors: status codes from the nogil walkers become CorruptRecordError (with the GIL).
cdef object corrupt(str reason, object batch_index, Py_ssize_t position)
cdef object walk_error(const WalkError *e, object batch_index, Py_ssize_t batch_pos,
                       const unsigned char *section, Py_ssize_t section_pos, int32_t count)

# The (already parsed) headers of r as a list of (str, bytes | None).
cdef list decode_headers(const RecordView *r, object batch_index, Py_ssize_t batch_pos,
                         int32_t index)


cdef class Record:
    cdef readonly object offset      # exposed as slot descriptors, see _record.pyx
    cdef readonly object timestamp
    cdef readonly object key
    cdef readonly object value
    cdef object _headers
    cdef bint _log_append


cdef inline int record_parse(Cursor *c, RecordView *r, WalkError *e) noexcept nogil:
    """Parse the record at c.ptr into r; on success leave c.ptr just after it.

    Every field is read through bounds: the record's declared length must fit in the
    section and every field must fit in the record, which must end exactly at its
    declared length. This fast path keeps the position in a register and only learns
    *that* something failed; then record_parse_checked re-parses the record to fill e
    with what and where (errors are rare, the happy path is the hot one). Measured:
    about 9 ns per 116-byte record either way on this CPU; the walk is bound by the
    chain of dependent varint loads, not by the status bookkeeping.
    """
    cdef const unsigned char *p = c.ptr
    cdef const unsigned char *end
    cdef int32_t length, n, i
    p = varint_read_i32(p, c.end, &length)
    if p == NULL or length < RECORD_MIN_BODY or <size_t>length > <size_t>(c.end - p):
        return record_parse_checked(c, r, e)
    end = p + length
    p = varint_read_i64(p + 1, end, &r.timestamp_delta)      # + 1: attributes byte
    if p == NULL:
        return record_parse_checked(c, r, e)
    p = varint_read_i32(p, end, &r.offset_delta)
    if p == NULL:
        return record_parse_checked(c, r, e)
    p = varint_read_i32(p, end, &n)
    if p == NULL or n < -1 or (n > 0 and <size_t>n > <size_t>(end - p)):
        return record_parse_checked(c, r, e)
    r.key_len = n
    r.key = p
    if n > 0:
        p += n
    p = varint_read_i32(p, end, &n)
    if p == NULL or n < -1 or (n > 0 and <size_t>n > <size_t>(end - p)):
        return record_parse_checked(c, r, e)
    r.value_len = n
    r.value = p
    if n > 0:
        p += n
    p = varint_read_i32(p, end, &r.header_count)
    if p == NULL or r.header_count < 0:
        return record_parse_checked(c, r, e)
    r.headers = p
    for i in range(r.header_count):
        p = varint_read_i32(p, end, &n)
        if p == NULL or n < 0 or <size_t>n > <size_t>(end - p):
            return record_parse_checked(c, r, e)
        p += n
        p = varint_read_i32(p, end, &n)
        if p == NULL or n < -1 or (n > 0 and <size_t>n > <size_t>(end - p)):
            return record_parse_checked(c, r, e)
        if n > 0:
            p += n
    if p != end:
        return record_parse_checked(c, r, e)
    r.end = end
    c.ptr = end
    return ST_OK
