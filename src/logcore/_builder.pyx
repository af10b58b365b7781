"""BatchBuilder: one RecordBatch v2, the producer's side.

What it writes, big-endian (Kafka's DefaultRecordBatch.java and DefaultRecord.java):

    offset  field                   type
    0       base_offset             int64
    8       batch_length            int32   bytes after this field (>= 49)
    12      partition_leader_epoch  int32   outside the CRC: the broker stamps it freely
    16      magic                   int8    = 2
    17      crc                     uint32  CRC-32C of bytes 21 .. end of batch
    21      attributes              int16   bits 0-2 codec, 3 timestamp type (1 = Log-
                                            AppendTime), 4 transactional, 5 control,
                                            6 delete horizon (KIP-534)
    23      last_offset_delta       int32
    27      base_timestamp          int64
    35      max_timestamp           int64
    43      producer_id             int64
    51      producer_epoch          int16
    53      base_sequence           int32
    57      records_count           int32
    61      records                 (one compressed blob when the codec is not none)

    record (one per append), all varints zig-zag:
        length varint | attributes int8 (0) | timestamp_delta varlong |
        offset_delta varint | key_length varint (-1 = null) | key |
        value_length varint (-1 = null) | value | header_count varint |
        header_count x (key_length varint | key utf-8 |
                        value_length varint (-1 = null) | value)

base_timestamp is the first record's timestamp and each record stores its delta from
it; offset_delta is the record's index; last_offset_delta = count - 1. The header and
CRC (over bytes 21 .. end, after compressing the records section) are written last,
by build(). The pure-Python twin is logcore._ref.builder.

How this unit is fast: records are encoded straight into one growing C buffer
(amortised doubling), and each record's length is computed up front from the varint
sizes, so a record is written once, in place, with no temporary and no memmove.
append_many is a C loop over the sequences with no Python call per record.
"""

cimport cython
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBuffer_Release
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport (
    INT32_MAX, INT64_MAX, INT64_MIN, int16_t, int32_t, int64_t, uint16_t, uint32_t, uint64_t,
)
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from logcore._consts cimport *
from logcore._crc32c cimport byte_buffer_get, crc32c_update
from logcore._includes cimport (
    lc_crc32c_init, lc_store_be16, lc_store_be32, lc_store_be64, LOGCORE_DEBUG,
    PyUnicode_AsUTF8AndSize,
)
from logcore._varint cimport varint_encode_u64, varint_size_u64, zigzag_encode64

from logcore import _compression

lc_crc32c_init()

cdef dict _TIMESTAMP_TYPES = {
    "create": 0, "log_append": 1, "CreateTime": 0, "LogAppendTime": 1, 0: 0, 1: 1,
}


cdef inline int64_t _now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef int64_t _check_i64(str name, object value, int64_t lo, int64_t hi) except? -1:
    """`value` as an int64 in [lo, hi]: TypeError for a non-int (bool too), else
    ValueError out of range (as _ref's _check_int)."""
    cdef int overflow = 0
    cdef long long v
    if type(value) is int:
        # Fast path: no PyLong temporaries for the bounds (they cost ~20 ns per call).
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow == 0 and lo <= v <= hi:
            return v
    elif isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    elif lo <= value <= hi:
        return int(value)
    raise ValueError(f"{name} {value} is outside [{lo}, {hi}]")


@cython.final
cdef class _Bytes:
    """(pointer, length) of a bytes-like argument; holds a buffer export when needed."""
    cdef Py_buffer view
    cdef bint held

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef inline object _bytes_arg(object obj, str name, const unsigned char **ptr,
                              Py_ssize_t *size):
    """Point at the bytes of a key / value / header value (None -> size -1).

    bytes, the common case, is read in place (returns None); any other buffer is
    exported through the returned _Bytes holder, which the caller keeps until the bytes
    have been copied.
    """
    cdef _Bytes h
    if obj is None:
        ptr[0] = NULL
        size[0] = -1
        return None
    if type(obj) is bytes:
        ptr[0] = <const unsigned char *>PyBytes_AS_STRING(obj)
        size[0] = PyBytes_GET_SIZE(obj)
        return None
    if isinstance(obj, str):
        raise TypeError(f"{name} must be bytes-like or None, not str")
    h = _Bytes.__new__(_Bytes)
    try:
        # the byte-buffer rules of every other entry point (ValueError for array("I"),
        # BufferError for a strided view), as _ref's _as_bytes applies them
        byte_buffer_get(obj, &h.view)
    except TypeError:
        raise TypeError(f"{name} must be bytes-like or None, not {type(obj).__name__}") from None
    h.held = True
    ptr[0] = <const unsigned char *>h.view.buf
    size[0] = h.view.len
    return h


cdef inline unsigned char *_put_bytes(unsigned char *w, const unsigned char *p,
                                      Py_ssize_t n) noexcept nogil:
    # length varint (-1 = null) then the bytes
    if n < 0:
        w[0] = 1                   # zig-zag(-1)
        return w + 1
    w += varint_encode_u64(w, zigzag_encode64(n))
    memcpy(w, p, <size_t>n)
    return w + n


cdef bytes _encode_headers(object headers, Py_ssize_t *count):
    """Encode a sequence of (str, bytes-like | None) as the record's header section
    (without the count); the rare path, so plain and obviously right."""
    cdef list parts = []
    cdef Py_ssize_t total = 0, klen, vlen, k = 0
    cdef const char *kp
    cdef const unsigned char *vp
    cdef object holder = None
    cdef bytes out
    cdef unsigned char *w
    cdef unsigned char tmp[10]
    cdef int m
    for header in headers:
        h_key, h_value = header
        if not isinstance(h_key, str):
            raise TypeError(f"header key must be str, not {type(h_key).__name__}")
        kp = PyUnicode_AsUTF8AndSize(h_key, &klen)
        holder = _bytes_arg(h_value, "header value", &vp, &vlen)
        m = varint_encode_u64(tmp, zigzag_encode64(klen))
        parts.append(PyBytes_FromStringAndSize(<char *>tmp, m))
        parts.append(PyBytes_FromStringAndSize(kp, klen))
        if vlen < 0:
            parts.append(b"\x01")
        else:
            m = varint_encode_u64(tmp, zigzag_encode64(vlen))
            parts.append(PyBytes_FromStringAndSize(<char *>tmp, m))
            parts.append(PyBytes_FromStringAndSize(<const char *>vp, vlen))
        k += 1
    count[0] = k
    return b"".join(parts)


@cython.final
cdef class BatchBuilder:
    """Builds one RecordBatch v2 (the producer's side).

    Records are encoded straight into one growing C buffer; build() writes the header
    and CRC (compressing the record section first when asked). Uncompressed output is
    byte-identical to aiokafka's DefaultRecordBatchBuilder for the same inputs.
    Not thread-safe.

    Args (keyword-only):
        compression: "none", "gzip", "snappy", "lz4" or "zstd".
        compression_level: None for the codec's Kafka default, else checked (ValueError).
        base_offset, partition_leader_epoch, producer_id, producer_epoch, base_sequence:
            written into the header as given.
        timestamp_type: "create" / "log_append" (also "CreateTime", "LogAppendTime", 0, 1).
        transactional, is_control: attribute bits 4 and 5.
    """

    def __cinit__(self):
        self._buf = NULL
        self._len = HDR_SIZE
        self._cap = 0

    def __dealloc__(self):
        PyMem_Free(self._buf)

    def __init__(self, *, compression="none", compression_level=None, base_offset=0,
                 timestamp_type="create", producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, transactional=False, is_control=False,
                 partition_leader_epoch=-1):
        self._codec = _compression.codec_id(compression)
        self._level = _compression.check_level(self._codec, compression_level)
        try:
            ts_type = _TIMESTAMP_TYPES[timestamp_type]
        except (KeyError, TypeError):
            raise ValueError(
                f"unknown timestamp_type {timestamp_type!r}; expected 'create' or 'log_append'"
            ) from None
        self._base_offset = _check_i64("base_offset", base_offset, INT64_MIN, INT64_MAX)
        self._producer_id = _check_i64("producer_id", producer_id, INT64_MIN, INT64_MAX)
        self._producer_epoch = <int16_t>_check_i64("producer_epoch", producer_epoch,
                                                   -(1 << 15), (1 << 15) - 1)
        self._base_sequence = <int32_t>_check_i64("base_sequence", base_sequence,
                                                  -(1 << 31), INT32_MAX)
        self._leader_epoch = <int32_t>_check_i64("partition_leader_epoch",
                                                 partition_leader_epoch, -(1 << 31), INT32_MAX)
        self._attributes = <int16_t>self._codec
        if ts_type:
            self._attributes |= ATTR_TIMESTAMP_TYPE
        if transactional:
            self._attributes |= ATTR_TRANSACTIONAL
        if is_control:
            self._attributes |= ATTR_CONTROL
        self._count = 0
        self._len = HDR_SIZE           # also when __init__ is called again
        self._base_timestamp = 0
        self._max_timestamp = 0
        self._reserve(4096)

    cdef int _reserve(self, size_t extra) except -1:
        """Make room for `extra` more bytes (doubling, so appends are amortised O(1))."""
        cdef size_t need = self._len + extra
        cdef size_t cap
        cdef unsigned char *grown
        if need <= self._cap:
            return 0
        cap = self._cap * 2 if self._cap else 4096
        while cap < need:
            cap *= 2
        grown = <unsigned char *>PyMem_Realloc(self._buf, cap)
        if grown == NULL:
            raise MemoryError()
        self._buf = grown
        self._cap = cap
        return 0

    cdef int _put(self, int64_t timestamp, const unsigned char *key, Py_ssize_t key_len,
                  const unsigned char *value, Py_ssize_t value_len,
                  const unsigned char *headers, Py_ssize_t headers_len,
                  Py_ssize_t header_count) except -1:
        """Encode one record at the end of the buffer.

        The record's length is computed first from the varint sizes, so the record is
        written once, in place, with no temporary and no memmove.
        """
        cdef int64_t delta
        cdef uint64_t zdelta, zoff
        cdef size_t body
        cdef unsigned char *w
        if self._count == INT32_MAX:
            raise ValueError("a batch holds at most 2**31 - 1 records")
        # Timestamps are stored as deltas from the first record's (base_timestamp), as
        # the Java producer and aiokafka write them; max_timestamp is tracked as we go.
        if self._count == 0:
            delta = 0
        else:
            # The delta must fit a varlong (int64), as _ref's encode_varint demands.
            if ((self._base_timestamp > 0 and timestamp < INT64_MIN + self._base_timestamp)
                    or (self._base_timestamp < 0
                        and timestamp > INT64_MAX + self._base_timestamp)):
                raise ValueError(
                    f"timestamp {timestamp} is too far from the batch's base timestamp "
                    f"{self._base_timestamp}")
            delta = timestamp - self._base_timestamp
        zdelta = zigzag_encode64(delta)
        zoff = zigzag_encode64(self._count)
        body = 1 + <size_t>varint_size_u64(zdelta) + <size_t>varint_size_u64(zoff)
        body += 1 if key_len < 0 else <size_t>varint_size_u64(<uint64_t>key_len * 2) + <size_t>key_len
        body += 1 if value_len < 0 else <size_t>varint_size_u64(<uint64_t>value_len * 2) + <size_t>value_len
        body += <size_t>varint_size_u64(<uint64_t>header_count * 2) + <size_t>headers_len
        if body > <size_t>INT32_MAX or self._len + body + 5 > <size_t>INT32_MAX:
            raise ValueError("record too large for a batch (over 2 GiB)")
        # + 5: the record's own length varint (an int32 field: at most 5 bytes).
        self._reserve(body + 5)
        w = self._buf + self._len
        w += varint_encode_u64(w, zigzag_encode64(<int64_t>body))
        w[0] = 0                   # record attributes: unused, always 0
        w += 1
        w += varint_encode_u64(w, zdelta)
        w += varint_encode_u64(w, zoff)
        w = _put_bytes(w, key, key_len)
        w = _put_bytes(w, value, value_len)
        w += varint_encode_u64(w, <uint64_t>header_count * 2)
        if headers_len > 0:
            memcpy(w, headers, <size_t>headers_len)
            w += headers_len
        if LOGCORE_DEBUG and <size_t>(w - self._buf) != (
                self._len + <size_t>varint_size_u64(zigzag_encode64(<int64_t>body)) + body):
            raise AssertionError("BatchBuilder wrote a record of another size than computed")
        self._len = <size_t>(w - self._buf)
        if self._count == 0:
            self._base_timestamp = timestamp
            self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count += 1
        return 0

    def append(self, value, key=None, timestamp_ms=None, headers=None):
        """Add one record; return its offset delta.

        Args:
            value, key: bytes-like or None (null).
            timestamp_ms: None for the current wall-clock time in ms.
            headers: a sequence of (str, bytes-like | None) or None.

        Raises:
            TypeError: wrong types. ValueError: a timestamp outside int64, or too many
                records for one batch.
        """
        cdef const unsigned char *vp
        cdef const unsigned char *kp
        cdef Py_ssize_t vn, kn, hcount = 0
        cdef object vh, kh
        cdef int64_t ts
        cdef bytes hdr = None
        cdef int32_t delta = self._count
        vh = _bytes_arg(value, "value", &vp, &vn)
        kh = _bytes_arg(key, "key", &kp, &kn)
        if timestamp_ms is None:
            ts = _now_ms()
        else:
            ts = _check_i64("timestamp_ms", timestamp_ms, INT64_MIN, INT64_MAX)
        if headers:
            hdr = _encode_headers(headers, &hcount)
            self._put(ts, kp, kn, vp, vn, <const unsigned char *>PyBytes_AS_STRING(hdr),
                      PyBytes_GET_SIZE(hdr), hcount)
        else:
            self._put(ts, kp, kn, vp, vn, NULL, 0, 0)
        return delta

    def append_many(self, values, keys=None, timestamps_ms=None):
        """Append len(values) records without headers (keys/timestamps None: nulls / now).

        A tight C loop over the sequences: no Python call per record.

        Raises:
            ValueError: keys or timestamps_ms of a different length than values.
            TypeError: an item of the wrong type (the records before it are kept).
        """
        cdef Py_ssize_t n = len(values), i
        cdef const unsigned char *vp
        cdef const unsigned char *kp = NULL
        cdef Py_ssize_t vn, kn = -1
        cdef object vh, kh
        cdef int64_t now = 0, ts
        cdef bint have_keys = keys is not None
        cdef bint have_ts = timestamps_ms is not None
        if have_keys and len(keys) != n:
            raise ValueError(f"{len(keys)} keys for {n} values")
        if have_ts and len(timestamps_ms) != n:
            raise ValueError(f"{len(timestamps_ms)} timestamps for {n} values")
        # list/tuple items are read directly (PySequence_Fast), other sequences copied once.
        vals = values if type(values) is list or type(values) is tuple else list(values)
        ks = None
        if have_keys:
            ks = keys if type(keys) is list or type(keys) is tuple else list(keys)
        tss = None
        if have_ts:
            tss = timestamps_ms if type(timestamps_ms) is list or type(timestamps_ms) is tuple else list(timestamps_ms)
        else:
            now = _now_ms()
        # vh / kh hold a buffer export of non-bytes items until _put has copied them;
        # reassigning them on the next item releases the previous export.
        for i in range(n):
            vh = _bytes_arg(vals[i], "value", &vp, &vn)
            if have_keys:
                kh = _bytes_arg(ks[i], "key", &kp, &kn)
            if have_ts:
                t = tss[i]
                ts = _check_i64("timestamp_ms", t, INT64_MIN, INT64_MAX)
            else:
                ts = now
            self._put(ts, kp, kn, vp, vn, NULL, 0, 0)

    def estimated_size(self):
        """Size of the built batch if uncompressed (an upper bound on it)."""
        return self._len

    def __len__(self):
        return self._count

    def build(self):
        """Return the batch's bytes (header, CRC, records, compressed if asked).

        Raises:
            ValueError: no record was appended.
        """
        cdef bytes out
        cdef unsigned char *o
        cdef size_t total
        if self._count == 0:
            raise ValueError("cannot build an empty batch")
        # The header is written last, into the output only: the builder's buffer keeps
        # just the records, so build() can be called again after more appends.
        if self._codec == CODEC_NONE:
            total = self._len
            out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
            o = <unsigned char *>PyBytes_AS_STRING(out)
            memcpy(o + HDR_SIZE, self._buf + HDR_SIZE, total - HDR_SIZE)
        else:
            # The compressor gets a bytes copy of the records, not a view of our buffer:
            # a view could outlive the builder (kept by the library or a traceback) and
            # point at freed memory. The copy costs ~1% of the compression itself.
            records = PyBytes_FromStringAndSize(<char *>self._buf + HDR_SIZE,
                                                <Py_ssize_t>(self._len - HDR_SIZE))
            compressed = _compression.compress(self._codec, records, self._level)
            total = HDR_SIZE + <size_t>len(compressed)
            if total - HDR_LOG_OVERHEAD > <size_t>INT32_MAX:
                raise ValueError("batch too large (over 2 GiB)")
            out = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
            o = <unsigned char *>PyBytes_AS_STRING(out)
            memcpy(o + HDR_SIZE, PyBytes_AS_STRING(compressed), total - HDR_SIZE)
        # A fresh bytes object is ours to fill until it is returned.
        lc_store_be64(o + HDR_BASE_OFFSET, <uint64_t>self._base_offset)
        lc_store_be32(o + HDR_BATCH_LENGTH, <uint32_t>(total - HDR_LOG_OVERHEAD))
        lc_store_be32(o + HDR_PARTITION_LEADER_EPOCH, <uint32_t>self._leader_epoch)
        o[HDR_MAGIC] = MAGIC_V2
        lc_store_be16(o + HDR_ATTRIBUTES, <uint16_t>self._attributes)
        lc_store_be32(o + HDR_LAST_OFFSET_DELTA, <uint32_t>(self._count - 1))
        lc_store_be64(o + HDR_BASE_TIMESTAMP, <uint64_t>self._base_timestamp)
        lc_store_be64(o + HDR_MAX_TIMESTAMP, <uint64_t>self._max_timestamp)
        lc_store_be64(o + HDR_PRODUCER_ID, <uint64_t>self._producer_id)
        lc_store_be16(o + HDR_PRODUCER_EPOCH, <uint16_t>self._producer_epoch)
        lc_store_be32(o + HDR_BASE_SEQUENCE, <uint32_t>self._base_sequence)
        lc_store_be32(o + HDR_RECORDS_COUNT, <uint32_t>self._count)
        lc_store_be32(o + HDR_CRC, crc32c_update(0, o + HDR_ATTRIBUTES, total - HDR_ATTRIBUTES))
        return out
