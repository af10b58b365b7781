"""One record of a RecordBatch v2: the nogil record walker and the Record class.

Record layout (Kafka's DefaultRecord.java), all varints zig-zag:

    length varint | attributes int8 (unused) | timestamp_delta varlong |
    offset_delta varint | key_length varint (-1 = null) | key |
    value_length varint (-1 = null) | value | header_count varint |
    header_count x (key_length varint (>= 0) | key utf-8 |
                    value_length varint (-1 = null) | value)

An int32 field's varint may take at most 5 bytes, a varlong at most 10; the smallest
record is 7 bytes. Every field is read through bounds (_cursor.pxd, _varint.pxd): the
record's declared length must fit in its section, every field must fit in the record,
and the record must end exactly at its declared length.

One walker serves every reader of records (iteration in _reader, validate(), columnar
decode in _columns, validate_for_append in _append): record_parse (inline, in
_record.pxd) parses one record in place and returns a status code instead of raising,
so it runs without the GIL; records_walk checks a whole records section against
records_count as Kafka's record iterator does. The GIL-holding caller turns a status
into CorruptRecordError with walk_error(). The pure-Python twin is logcore._ref.record.

Record objects are created with tp_new by the reader (no __init__ argument parsing),
kept out of the cyclic GC, and their fields are slot descriptors, which CPython's
attribute cache specialises (see _install_record_slots). A Record owns its data.
"""

cimport cython
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport INT64_MAX, INT64_MIN, int32_t, int64_t

from logcore._consts cimport *
from logcore._cursor cimport Cursor, cursor_read_varint, cursor_read_varlong, cursor_remaining
from logcore._fields cimport wrap_add
from logcore._includes cimport (
    lc_utf8_valid, PyDescr_NewMember, PyMemberDef, PyType_Modified, PyTypeObjectDict,
    READONLY, T_OBJECT_EX,
)

from logcore.errors import CorruptRecordError

cdef str _CREATE = "create"
cdef str _LOG_APPEND = "log_append"


# ---------------------------------------------------------------------------------------
# Errors: status codes from the nogil walkers become CorruptRecordError here
# ---------------------------------------------------------------------------------------

cdef object corrupt(str reason, object batch_index, Py_ssize_t position):
    """CorruptRecordError naming the batch and the byte position, as _ref words it."""
    if batch_index is None:
        where = f"batch at byte {position}"
    else:
        where = f"batch {batch_index} at byte {position}"
    return CorruptRecordError(f"{where}: {reason}", batch_index=batch_index, position=position)


cdef str _status_reason(int status, int64_t value):
    """A human reason for a walker status code."""
    if status == ST_TRUNCATED:
        return "truncated record"
    if status == ST_VARINT_TOO_LONG:
        return "varint longer than its field allows (5 bytes int32, 10 bytes int64)"
    if status == ST_VARINT_OVERFLOW:
        return "varint overflows its field"
    if status == ST_BAD_RECORD_LENGTH:
        return f"record length {value} is below the minimum"
    if status == ST_RECORD_PAST_END:
        return f"record of {value} bytes runs past the end of the records"
    if status == ST_FIELD_PAST_RECORD:
        return "field runs past the end of its record"
    if status == ST_BAD_KEY_LENGTH:
        return f"invalid key length {value}"
    if status == ST_BAD_VALUE_LENGTH:
        return f"invalid value length {value}"
    if status == ST_BAD_HEADER_COUNT:
        return f"invalid header count {value}"
    if status == ST_BAD_HEADER_KEY_LENGTH:
        return f"invalid header key length {value}"
    if status == ST_BAD_HEADER_VALUE_LENGTH:
        return f"invalid header value length {value}"
    if status == ST_RECORD_SIZE_MISMATCH:
        return f"record does not end at its declared length ({value} bytes left)"
    if status == ST_BAD_OFFSET_DELTA:
        return f"offset_delta {value} does not match the record's index"
    if status == ST_NO_MEMORY:
        return "out of memory"
    return f"corrupt record (status {status})"


cdef object walk_error(const WalkError *e, object batch_index, Py_ssize_t batch_pos,
                        const unsigned char *section, Py_ssize_t section_pos,
                        int32_t count):
    """CorruptRecordError for a failed records_walk / record_parse.

    section_pos is the records section's byte position in the caller's buffer, or -1
    for a decompressed section (then the batch position is reported).
    """
    cdef Py_ssize_t pos
    if e.status == ST_MISSING_RECORDS:
        return corrupt(f"records_count is {count} but the records end after {e.index}",
                        batch_index, batch_pos)
    if e.status == ST_TRAILING_BYTES:
        return corrupt(f"{e.value} bytes after the last of {count} records",
                        batch_index, batch_pos)
    if e.status == ST_BAD_RECORDS_COUNT:
        return corrupt(f"negative records_count {count}", batch_index, batch_pos)
    if e.status == ST_BAD_HEADER_KEY_UTF8:
        return corrupt(f"record {e.index}: header key is not valid utf-8",
                        batch_index, batch_pos)
    if e.status == ST_BAD_OFFSET_DELTA:
        return corrupt(f"record {e.index} has offset_delta {e.value}, expected {e.index}",
                        batch_index, batch_pos)
    if section_pos >= 0:
        pos = section_pos + (e.at - section)
        return corrupt(f"record {e.index}: {_status_reason(e.status, e.value)} at byte {pos}",
                        batch_index, pos)
    pos = e.at - section
    return corrupt(f"record {e.index} (decompressed records): "
                    f"{_status_reason(e.status, e.value)} at byte {pos}",
                    batch_index, batch_pos)


# ---------------------------------------------------------------------------------------
# The record walker (no GIL, no Python objects)
# ---------------------------------------------------------------------------------------

cdef int record_parse_checked(Cursor *c, RecordView *r, WalkError *e) noexcept nogil:
    """Parse the record at c.ptr into r, saying exactly what failed and where.

    The slow twin of record_parse, which calls it only when its fast path fails.

    Each field is read through a cursor bounded by the record's declared length, so a
    field cannot run into the next record, and the record must end exactly at that
    length. On failure e.status / e.at / e.value say what and where; c.ptr is undefined.
    """
    cdef int32_t length, n
    cdef int st
    cdef Cursor body
    cdef int32_t i
    e.at = c.ptr
    st = cursor_read_varint(c, &length)
    if st != ST_OK:
        e.status = st
        return st
    if length < RECORD_MIN_BODY:
        e.status = ST_BAD_RECORD_LENGTH
        e.value = length
        return e.status
    if <size_t>length > cursor_remaining(c):
        e.status = ST_RECORD_PAST_END
        e.value = length
        return e.status
    body.ptr = c.ptr + 1          # skip the attributes byte (length >= 6: it is there)
    body.end = c.ptr + length
    # From here a truncated read means a field runs past the record's declared length.
    e.at = body.ptr
    st = cursor_read_varlong(&body, &r.timestamp_delta)
    if st != ST_OK:
        e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
        return e.status
    e.at = body.ptr
    st = cursor_read_varint(&body, &r.offset_delta)
    if st != ST_OK:
        e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
        return e.status
    e.at = body.ptr
    st = cursor_read_varint(&body, &n)
    if st != ST_OK:
        e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
        return e.status
    if n < -1:
        e.status = ST_BAD_KEY_LENGTH
        e.value = n
        return e.status
    r.key_len = n
    r.key = body.ptr
    if n > 0:
        e.at = body.ptr
        if <size_t>n > <size_t>(body.end - body.ptr):
            e.status = ST_FIELD_PAST_RECORD
            return e.status
        body.ptr += n
    e.at = body.ptr
    st = cursor_read_varint(&body, &n)
    if st != ST_OK:
        e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
        return e.status
    if n < -1:
        e.status = ST_BAD_VALUE_LENGTH
        e.value = n
        return e.status
    r.value_len = n
    r.value = body.ptr
    if n > 0:
        e.at = body.ptr
        if <size_t>n > <size_t>(body.end - body.ptr):
            e.status = ST_FIELD_PAST_RECORD
            return e.status
        body.ptr += n
    e.at = body.ptr
    st = cursor_read_varint(&body, &n)
    if st != ST_OK:
        e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
        return e.status
    if n < 0:
        e.status = ST_BAD_HEADER_COUNT
        e.value = n
        return e.status
    r.header_count = n
    r.headers = body.ptr
    # An absurd header_count cannot make this loop long: each header consumes at
    # least 2 bytes of the record or fails.
    for i in range(r.header_count):
        e.at = body.ptr
        st = cursor_read_varint(&body, &n)
        if st != ST_OK:
            e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
            return e.status
        if n < 0:
            e.status = ST_BAD_HEADER_KEY_LENGTH
            e.value = n
            return e.status
        if <size_t>n > <size_t>(body.end - body.ptr):
            e.status = ST_FIELD_PAST_RECORD
            return e.status
        body.ptr += n
        e.at = body.ptr
        st = cursor_read_varint(&body, &n)
        if st != ST_OK:
            e.status = ST_FIELD_PAST_RECORD if st == ST_TRUNCATED else st
            return e.status
        if n < -1:
            e.status = ST_BAD_HEADER_VALUE_LENGTH
            e.value = n
            return e.status
        if n > 0:
            if <size_t>n > <size_t>(body.end - body.ptr):
                e.status = ST_FIELD_PAST_RECORD
                return e.status
            body.ptr += n
    if body.ptr != body.end:
        e.at = body.ptr
        e.status = ST_RECORD_SIZE_MISMATCH
        e.value = body.end - body.ptr
        return e.status
    r.end = body.end
    c.ptr = body.end
    return ST_OK



cdef inline int _header_at(Cursor *c, const unsigned char **key, int32_t *key_len,
                           const unsigned char **value, int32_t *value_len) noexcept nogil:
    """Read the header at c.ptr of a record that record_parse accepted; leave c.ptr
    after it. The statuses cannot fail for such a record, but they are checked: no
    length is used unless its varint was read."""
    cdef int st = cursor_read_varint(c, key_len)
    if st != ST_OK:
        return st
    key[0] = c.ptr
    c.ptr += key_len[0]
    st = cursor_read_varint(c, value_len)
    if st != ST_OK:
        return st
    value[0] = c.ptr
    if value_len[0] > 0:
        c.ptr += value_len[0]
    return ST_OK


cdef bint _headers_utf8(const RecordView *r, WalkError *e) noexcept nogil:
    """True if every header key of the (already parsed) record r is strict UTF-8."""
    cdef Cursor c
    cdef int32_t i, kn, vn
    cdef const unsigned char *k
    cdef const unsigned char *v
    cdef int st
    c.ptr = r.headers
    c.end = r.end
    for i in range(r.header_count):
        st = _header_at(&c, &k, &kn, &v, &vn)
        if st != ST_OK:
            e.status = st
            e.at = c.ptr
            return False
        if not lc_utf8_valid(k, <size_t>kn):
            e.status = ST_BAD_HEADER_KEY_UTF8
            e.at = k
            return False
    return True


cdef int records_walk(const unsigned char *p, const unsigned char *end, int32_t count,
                      int64_t base_timestamp, int64_t header_max_timestamp, bint log_append,
                      bint check_offset_deltas, bint check_header_utf8, WalkStats *stats,
                      WalkError *err) noexcept nogil:
    """Walk exactly `count` records covering [p, end), as Kafka's record iterator does.

    Fills stats (timestamps already absolute: base + delta, or the header max_timestamp
    for LogAppendTime batches). With check_offset_deltas, record i must have
    offset_delta i (a produced batch). With check_header_utf8, header keys must be
    strict UTF-8 (what iteration decodes; validate() promises iteration succeeds).
    Returns ST_OK or the failing status (err filled).
    """
    cdef Cursor c
    cdef RecordView r
    cdef int32_t i
    cdef int64_t ts
    cdef int st
    c.ptr = p
    c.end = end
    stats.count = 0
    stats.max_timestamp = INT64_MIN
    stats.max_timestamp_index = 0
    stats.min_timestamp = INT64_MAX
    stats.key_bytes = 0
    stats.value_bytes = 0
    err.index = 0
    err.value = 0
    if count < 0:
        err.status = ST_BAD_RECORDS_COUNT
        err.at = p
        return err.status
    # `count` comes off the wire, but it only bounds a loop: every iteration consumes at
    # least RECORD_MIN_SIZE bytes or fails, so a huge count ends at the section's end.
    # Kafka's iterator reads exactly records_count records, then insists nothing is
    # left (DefaultRecordBatch.RecordIterator / ensureNoneRemaining): so do we.
    for i in range(count):
        err.index = i
        if c.ptr >= c.end:
            err.status = ST_MISSING_RECORDS
            err.at = c.ptr
            return err.status
        st = record_parse(&c, &r, err)
        if st != ST_OK:
            return st
        if check_header_utf8 and r.header_count > 0 and not _headers_utf8(&r, err):
            return err.status
        if check_offset_deltas and r.offset_delta != i:
            err.status = ST_BAD_OFFSET_DELTA
            err.value = r.offset_delta
            return err.status
        # LogAppendTime batches: every record's timestamp is the batch max_timestamp
        # (DefaultRecordBatch.DefaultRecordIterator), whatever its delta says.
        ts = header_max_timestamp if log_append else wrap_add(base_timestamp, r.timestamp_delta)
        # strictly greater: the first record holding the max wins (offset_of_max_timestamp)
        if ts > stats.max_timestamp or i == 0:
            stats.max_timestamp = ts
            stats.max_timestamp_index = i
        if ts < stats.min_timestamp:
            stats.min_timestamp = ts
        if r.key_len > 0:
            stats.key_bytes += r.key_len
        if r.value_len > 0:
            stats.value_bytes += r.value_len
    stats.count = count
    if c.ptr != c.end:
        err.status = ST_TRAILING_BYTES
        err.at = c.ptr
        err.value = c.end - c.ptr
        return err.status
    return ST_OK


# ---------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------

# no_gc: Records are created by the thousand; keeping them out of the cyclic GC saves
# the GC header and the gen-0 collections their allocation triggers (list(batch) of
# 1000 records: 94 -> 66 ns per record; iterate and touch: 84 -> 77 ns). A Record's
# fields are bytes, ints, str and a list of (str, bytes) tuples: it cannot be part of a
# reference cycle unless a caller puts it inside its own headers list, which would then
# leak (never crash).
@cython.final
@cython.no_gc
cdef class Record:
    """One record of a batch.

    Attributes: offset (base_offset + offset_delta), timestamp (base_timestamp + delta;
    LogAppendTime batches: the batch max_timestamp), timestamp_type ("create" or
    "log_append"), key and value (bytes copies, or None for null), headers (list of
    (str, bytes | None)). A Record owns its data and outlives the buffer it came from.
    """

    def __init__(self, int64_t offset, int64_t timestamp, str timestamp_type, key, value,
                 list headers):
        self.offset = offset
        self.timestamp = timestamp
        self._log_append = timestamp_type == _LOG_APPEND
        self.key = key
        self.value = value
        self._headers = headers

    @property
    def timestamp_type(self):
        return _LOG_APPEND if self._log_append else _CREATE

    @property
    def headers(self):
        # Most records have no headers: the empty list is made on first access only.
        if self._headers is None:
            self._headers = []
        return self._headers

    @property
    def headers_or_none(self):
        """The headers list, or None when the record has none: unlike ``headers``, no
        empty list is made (a consumer decoding millions of records saves an allocation
        and a garbage-collector-tracked object per record)."""
        return self._headers if self._headers else None

    def __repr__(self):
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, "
            f"timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )


# Why Record's offset/timestamp/key/value are slot descriptors: Cython exposes
# `cdef readonly` attributes as getset properties, and CPython 3.11+ does not specialise
# LOAD_ATTR for getsets, so `record.value` took ~15 ns through the generic attribute
# path. A member descriptor of type T_OBJECT_EX (what `__slots__` creates) gets the
# LOAD_ATTR_SLOT fast path (~2 ns): per-record decode of the benchmark workload went from
# 132 to ~85 ns per record. The members point at the same C struct fields Cython uses,
# which are never NULL (tp_new sets them to None), so the semantics are unchanged.
cdef PyMemberDef _record_slots[4]


cdef Py_ssize_t _field_offset(Record probe, object marker) except -1:
    """Byte offset of the field of `probe` that holds `marker` (Cython gives no offsetof
    for object attributes, so find the pointer in the instance's memory)."""
    cdef void **words = <void **><void *>probe
    cdef Py_ssize_t i, n = Record.__basicsize__ // sizeof(void *)
    for i in range(n):
        if words[i] == <void *>marker:
            return i * <Py_ssize_t>sizeof(void *)
    raise RuntimeError("Record field not found")


cdef int _install_record_slots() except -1:
    cdef Record probe = Record.__new__(Record)
    cdef int i
    cdef dict type_dict = <dict>(<PyTypeObjectDict *>Record).tp_dict
    markers = [object() for _ in range(4)]
    probe.offset, probe.timestamp, probe.key, probe.value = markers
    _record_slots[0].name = "offset"
    _record_slots[1].name = "timestamp"
    _record_slots[2].name = "key"
    _record_slots[3].name = "value"
    for i in range(4):
        _record_slots[i].offset = _field_offset(probe, markers[i])
        _record_slots[i].type = T_OBJECT_EX
        _record_slots[i].flags = READONLY
        _record_slots[i].doc = NULL
        type_dict[_record_slots[i].name.decode("ascii")] = PyDescr_NewMember(
            Record, &_record_slots[i])
    PyType_Modified(Record)
    return 0


_install_record_slots()


cdef list decode_headers(const RecordView *r, object batch_index, Py_ssize_t batch_pos,
                         int32_t index):
    """The (already validated) headers of r as a list of (str, bytes | None)."""
    cdef Cursor c
    cdef int32_t i, kn, vn
    cdef const unsigned char *k
    cdef const unsigned char *v
    cdef list out = []
    cdef object name, value
    c.ptr = r.headers
    c.end = r.end
    for i in range(r.header_count):
        if _header_at(&c, &k, &kn, &v, &vn) != ST_OK:
            raise corrupt(f"record {index}: truncated header", batch_index, batch_pos)
        try:
            name = PyUnicode_DecodeUTF8(<char *>k, kn, NULL)
        except UnicodeDecodeError:
            # Kafka's clients decode header keys strictly (kafka-python, aiokafka).
            raise corrupt(f"record {index}: header key is not valid utf-8",
                          batch_index, batch_pos) from None
        value = None if vn < 0 else PyBytes_FromStringAndSize(<const char *>v, vn)
        out.append((name, value))
    return out
