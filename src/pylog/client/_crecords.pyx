# The consumer's per-record path, compiled: the twin of ``records.py``'s ``ConsumerRecord``
# (same fields, behaviour and equality) and of ``aio/_fetcher.py``'s ``_decode`` loop for a
# consumer without deserializers. The loop parses each record in place with logcore's
# ``record_parse`` (inlined from ``_record.pxd``) and builds the ``ConsumerRecord`` from the
# parsed fields: no intermediate logcore ``Record`` object and no iterator protocol per
# record. The Python code stays the reference (LOGCORE_PUREPYTHON=1 runs it alone; the unit
# tests compare the two).
#
# Garbage collection: a ``ConsumerRecord`` holds objects, so its type takes part in the
# cyclic garbage collector; a fetch of 100,000 records then costs the collector more than
# the decoding (every 700 allocations a generation-0 pass, and older passes over every
# record still alive: ~250 of ~490 ns per record, measured in-process). The records made
# here hold only a str, ints, bytes or None and a list of (str, bytes | None) headers, and
# cannot be part of a reference cycle, so they are untracked as they are made, as CPython
# untracks tuples and dicts of atomic values (``_PyTuple_MaybeUntrack``). Every way a
# cycle could form afterwards goes through an attribute setter or the ``headers`` getter
# (which hands out the mutable list), and those track the record again first (as
# CPython's dicts do when given a tracked value).
"""The consumer's per-record path in C (see ``pylog.client.records``)."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t

from logcore._consts cimport (
    ATTR_TIMESTAMP_TYPE, HDR_ATTRIBUTES, HDR_BASE_OFFSET, HDR_BASE_TIMESTAMP,
    HDR_MAX_TIMESTAMP, HDR_PARTITION_LEADER_EPOCH, HDR_RECORDS_COUNT, HDR_SIZE, ST_OK,
    ST_TRAILING_BYTES,
)
from logcore._cursor cimport Cursor, cursor_init
from logcore._fields cimport be_i16, be_i32, be_i64, wrap_add
from logcore._reader cimport RecordBatch
from logcore._record cimport (
    RecordView, WalkError, corrupt, decode_headers, record_parse, walk_error,
)


cdef extern from "Python.h":
    void PyObject_GC_Track(object o)
    void PyObject_GC_UnTrack(object o)
    bint PyObject_GC_IsTracked(object o)


cdef inline void _track(object o) noexcept:
    """Track ``o`` again before it may take part in a reference cycle (see the header)."""
    if not PyObject_GC_IsTracked(o):
        PyObject_GC_Track(o)


cdef class ConsumerRecord:
    """One consumed record (``pylog.client.records`` has the documented twin).

    Attributes:
        topic, partition, offset: where it was read.
        timestamp: milliseconds since the epoch; ``timestamp_type`` 0 create time, 1 log
            append time.
        key, value: bytes or None (or what the deserializers made of them).
        headers: list of (str, bytes | None) (made on first access for a record without
            headers).
        leader_epoch: the batch's partition leader epoch (-1 if unknown).
    """

    cdef object _topic
    cdef object _partition
    cdef object _offset
    cdef object _timestamp
    cdef object _timestamp_type
    cdef object _key
    cdef object _value
    cdef object _headers
    cdef object _leader_epoch

    _FIELDS = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value",
               "headers", "leader_epoch")

    def __init__(self, topic, partition, offset, timestamp, timestamp_type, key, value,
                 headers, leader_epoch=-1):
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._timestamp = timestamp
        self._timestamp_type = timestamp_type
        self._key = key
        self._value = value
        self._headers = headers
        self._leader_epoch = leader_epoch

    # Getters and setters (the setters track the record again, see the module header).
    @property
    def topic(self):
        return self._topic

    @topic.setter
    def topic(self, v):
        _track(self)
        self._topic = v

    @property
    def partition(self):
        return self._partition

    @partition.setter
    def partition(self, v):
        _track(self)
        self._partition = v

    @property
    def offset(self):
        return self._offset

    @offset.setter
    def offset(self, v):
        _track(self)
        self._offset = v

    @property
    def timestamp(self):
        return self._timestamp

    @timestamp.setter
    def timestamp(self, v):
        _track(self)
        self._timestamp = v

    @property
    def timestamp_type(self):
        return self._timestamp_type

    @timestamp_type.setter
    def timestamp_type(self, v):
        _track(self)
        self._timestamp_type = v

    @property
    def key(self):
        return self._key

    @key.setter
    def key(self, v):
        _track(self)
        self._key = v

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, v):
        _track(self)
        self._value = v

    @property
    def leader_epoch(self):
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, v):
        _track(self)
        self._leader_epoch = v

    @property
    def headers(self):
        # The list is mutable: the record may end up in it, so it is tracked from here on.
        _track(self)
        if self._headers is None:
            self._headers = []
        return self._headers

    @headers.setter
    def headers(self, value):
        _track(self)
        self._headers = value

    def __repr__(self):
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other):
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, a) == getattr(other, a) for a in self._FIELDS)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __reduce__(self):
        return (ConsumerRecord, (self._topic, self._partition, self._offset, self._timestamp,
                                 self._timestamp_type, self._key, self._value, self._headers,
                                 self._leader_epoch))


def decode_records(list batches, str topic, object partition, object position, list out):
    """Append to ``out`` a ``ConsumerRecord`` for every record at or after ``position`` of
    ``batches`` ((RecordBatch, start, end) spans, as the fetcher selects them); keys and
    values as they are (no deserializers).

    Raises:
        CorruptRecordError: as iterating the batches' records would (records before the
            bad one are appended first).
    """
    cdef RecordBatch batch
    cdef RecordView r
    cdef WalkError e
    cdef Cursor cur
    cdef ConsumerRecord cr
    cdef const unsigned char *p
    cdef const unsigned char *section
    cdef Py_ssize_t section_pos
    cdef int32_t count, i
    cdef int64_t base_offset, base_timestamp, max_timestamp, offset
    cdef int64_t pos = position
    cdef bint log_append
    cdef object ts_type, epoch, data
    for span in batches:
        batch = <RecordBatch?>span[0]
        p = batch._p
        count = be_i32(p + HDR_RECORDS_COUNT)
        if count < 0:
            raise batch._err(f"negative records_count {count}")
        data = batch._section()  # None when uncompressed; else kept alive for the loop
        if data is None:
            section = p + HDR_SIZE
            cursor_init(&cur, section, <size_t>(batch._size - HDR_SIZE))
            section_pos = batch._position + HDR_SIZE
        else:
            section = <const unsigned char *>PyBytes_AS_STRING(data)
            cursor_init(&cur, section, <size_t>PyBytes_GET_SIZE(data))
            section_pos = -1
        base_offset = be_i64(p + HDR_BASE_OFFSET)
        base_timestamp = be_i64(p + HDR_BASE_TIMESTAMP)
        max_timestamp = be_i64(p + HDR_MAX_TIMESTAMP)
        log_append = (be_i16(p + HDR_ATTRIBUTES) & ATTR_TIMESTAMP_TYPE) != 0
        ts_type = 1 if log_append else 0
        epoch = be_i32(p + HDR_PARTITION_LEADER_EPOCH)
        for i in range(count):
            if cur.ptr >= cur.end:
                raise corrupt(f"records_count is {count} but the records end after {i}",
                              batch._batch_index, batch._position)
            if record_parse(&cur, &r, &e) != ST_OK:
                e.index = i
                raise walk_error(&e, batch._batch_index, batch._position, section,
                                 section_pos, count)
            offset = wrap_add(base_offset, r.offset_delta)
            if offset < pos:
                continue
            cr = ConsumerRecord.__new__(ConsumerRecord)
            cr._topic = topic
            cr._partition = partition
            cr._offset = offset
            cr._timestamp = max_timestamp if log_append else wrap_add(base_timestamp,
                                                                     r.timestamp_delta)
            cr._timestamp_type = ts_type
            if r.key_len >= 0:
                cr._key = PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
            if r.value_len >= 0:
                cr._value = PyBytes_FromStringAndSize(<const char *>r.value, r.value_len)
            # No empty list for a record without headers (made on first access).
            if r.header_count > 0:
                cr._headers = decode_headers(&r, batch._batch_index, batch._position, i)
            cr._leader_epoch = epoch
            PyObject_GC_UnTrack(cr)  # atomic fields only: see the module header
            out.append(cr)
        if cur.ptr != cur.end:
            e.status = ST_TRAILING_BYTES
            e.value = cur.end - cur.ptr
            e.at = cur.ptr
            raise walk_error(&e, batch._batch_index, batch._position, section, section_pos,
                             count)
