"""Reading RecordBatch v2: the RecordBatch view, its record iterator, iter_batches.

Batch layout, big-endian (apache/kafka clients/src/main/java/org/apache/kafka/common/
record/DefaultRecordBatch.java; KIP-98 for the producer fields):

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

Batches are concatenated with nothing between them: the next one starts at
12 + batch_length. iter_batches walks them as Kafka's ByteBufferLogInputStream does
(fewer than 17 bytes left ends the walk, so does a last batch cut short by a fetch's
max_bytes). The records section (decompressed by logcore._compression when the codec
is not none) is parsed by the walker of _record.pyx; the pure-Python twin of this unit
is logcore._ref.reader.

How this unit is fast:
- every entry point takes a typed memoryview once and then reads header fields in place
  (_fields.pxd) and walks records with raw pointers: no per-field Python objects;
- record_parse is inlined here from _record.pxd; Record objects are made with tp_new
  (no __init__ argument parsing), with keys and values from PyBytes_FromStringAndSize
  and a headers list only when the record has headers;
- CRC-32C uses the CPU instruction (include/crc32c.h), at memory speed, without the GIL
  above CRC32C_NOGIL_THRESHOLD bytes.

Thread-safety: RecordBatch and Record are immutable views and may be shared between
threads as long as nobody mutates the underlying buffer.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t

from logcore._consts cimport *
from logcore._crc32c cimport crc32c_update
from logcore._cursor cimport Cursor, cursor_init
from logcore._fields cimport be_i16, be_i32, be_i64, wrap_add
from logcore._includes cimport lc_crc32c_init, lc_load_be32
from logcore._record cimport (
    Record, RecordView, WalkError, WalkStats, corrupt, decode_headers, record_parse,
    records_walk, walk_error,
)

from logcore import _compression
from logcore.errors import CorruptRecordError

lc_crc32c_init()

cdef tuple _CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
cdef str _CREATE = "create"
cdef str _LOG_APPEND = "log_append"


# ---------------------------------------------------------------------------------------
# Records of one batch
# ---------------------------------------------------------------------------------------

@cython.final
cdef class _RecordIter:
    """Iterator over a batch's records; parses one record per __next__."""
    cdef RecordBatch batch
    cdef object data                 # decompressed section (bytes) or None; kept alive
    cdef const unsigned char *section
    cdef Py_ssize_t section_pos      # -1 for a decompressed section
    cdef Cursor cur
    cdef int32_t count
    cdef int32_t index
    cdef int64_t base_offset
    cdef int64_t base_timestamp
    cdef int64_t max_timestamp
    cdef bint log_append
    cdef bint done

    def __iter__(self):
        return self

    def __next__(self):
        cdef RecordView r
        cdef WalkError e
        cdef Record rec
        # One record per call, parsed in place; a malformed record raises when it is
        # reached, after the good records before it were yielded (as _ref does).
        if self.done:
            raise StopIteration
        if self.index >= self.count:
            self.done = True
            if self.cur.ptr != self.cur.end:
                e.status = ST_TRAILING_BYTES
                e.value = self.cur.end - self.cur.ptr
                e.at = self.cur.ptr
                raise walk_error(&e, self.batch._batch_index, self.batch._position,
                                  self.section, self.section_pos, self.count)
            raise StopIteration
        if self.cur.ptr >= self.cur.end:
            self.done = True
            raise corrupt(
                f"records_count is {self.count} but the records end after {self.index}",
                self.batch._batch_index, self.batch._position)
        if record_parse(&self.cur, &r, &e) != ST_OK:
            self.done = True
            e.index = self.index
            raise walk_error(&e, self.batch._batch_index, self.batch._position,
                              self.section, self.section_pos, self.count)
        # tp_new without __init__: no argument tuple, no keyword parsing. The cast skips
        # the type test Cython adds for a class cimported from another module (tp_new of
        # Record returns a Record).
        rec = <Record>Record.__new__(Record)
        rec.offset = wrap_add(self.base_offset, r.offset_delta)
        if self.log_append:
            rec.timestamp = self.max_timestamp
            rec._log_append = True
        else:
            rec.timestamp = wrap_add(self.base_timestamp, r.timestamp_delta)
        if r.key_len >= 0:
            rec.key = PyBytes_FromStringAndSize(<const char *>r.key, r.key_len)
        if r.value_len >= 0:
            rec.value = PyBytes_FromStringAndSize(<const char *>r.value, r.value_len)
        if r.header_count > 0:
            rec._headers = decode_headers(&r, self.batch._batch_index,
                                           self.batch._position, self.index)
        self.index += 1
        return rec



# ---------------------------------------------------------------------------------------
# RecordBatch
# ---------------------------------------------------------------------------------------

@cython.final
cdef class RecordBatch:
    """A read-only, zero-copy view of one RecordBatch v2 at the start of a buffer.

    The view keeps the buffer alive (and an mmap exported) while it lives; trailing bytes
    after the batch are ignored. Header properties never raise once constructed.
    validate() checks the CRC and every record (decompressing); iteration checks the
    record structure (not the CRC) and yields Record objects whose key/value are bytes
    copies.

    Args:
        buffer: bytes, bytearray, memoryview, mmap or any other contiguous byte buffer.

    Raises:
        CorruptRecordError: (position=0) fewer than 61 bytes, batch_length < 49, the batch
            runs past the end of the buffer, or magic != 2.
    """

    def __init__(self, const unsigned char[::1] buffer not None):
        cdef Py_ssize_t n = buffer.shape[0]
        cdef const unsigned char *p
        cdef int32_t batch_length
        if n < HDR_SIZE:
            raise corrupt(f"batch header needs {HDR_SIZE} bytes, only {n} present", None, 0)
        p = &buffer[0]
        batch_length = be_i32(p + HDR_BATCH_LENGTH)
        if batch_length < HDR_MIN_BATCH_LENGTH:
            raise corrupt(
                f"batch_length {batch_length} is below the minimum {HDR_MIN_BATCH_LENGTH}",
                None, 0)
        if HDR_LOG_OVERHEAD + <Py_ssize_t>batch_length > n:
            raise corrupt(
                f"batch of {HDR_LOG_OVERHEAD + <Py_ssize_t>batch_length} bytes runs past the "
                f"end of the buffer ({n} bytes left)", None, 0)
        if p[HDR_MAGIC] != MAGIC_V2:
            raise corrupt(f"unsupported magic {<int8_t>p[HDR_MAGIC]} (expected 2)", None, 0)
        self._size = HDR_LOG_OVERHEAD + <Py_ssize_t>batch_length
        self._view = buffer[:self._size]
        self._p = p
        self._position = 0
        self._batch_index = None

    @staticmethod
    cdef RecordBatch new(const unsigned char[::1] view, Py_ssize_t position,
                         object batch_index):
        """A batch the caller has already checked; `view` spans exactly the batch."""
        cdef RecordBatch self = RecordBatch.__new__(RecordBatch)
        self._view = view
        self._p = &view[0]
        self._size = view.shape[0]
        self._position = position
        self._batch_index = batch_index
        return self

    # -- header fields ------------------------------------------------------------------

    @property
    def base_offset(self):
        return be_i64(self._p + HDR_BASE_OFFSET)

    @property
    def batch_length(self):
        return be_i32(self._p + HDR_BATCH_LENGTH)

    @property
    def partition_leader_epoch(self):
        return be_i32(self._p + HDR_PARTITION_LEADER_EPOCH)

    @property
    def magic(self):
        return <int8_t>self._p[HDR_MAGIC]

    @property
    def crc(self):
        return lc_load_be32(self._p + HDR_CRC)

    @property
    def attributes(self):
        return be_i16(self._p + HDR_ATTRIBUTES)

    @property
    def last_offset_delta(self):
        return be_i32(self._p + HDR_LAST_OFFSET_DELTA)

    @property
    def base_timestamp(self):
        return be_i64(self._p + HDR_BASE_TIMESTAMP)

    @property
    def max_timestamp(self):
        return be_i64(self._p + HDR_MAX_TIMESTAMP)

    @property
    def producer_id(self):
        return be_i64(self._p + HDR_PRODUCER_ID)

    @property
    def producer_epoch(self):
        return be_i16(self._p + HDR_PRODUCER_EPOCH)

    @property
    def base_sequence(self):
        return be_i32(self._p + HDR_BASE_SEQUENCE)

    @property
    def records_count(self):
        return be_i32(self._p + HDR_RECORDS_COUNT)

    @property
    def last_offset(self):
        return wrap_add(be_i64(self._p + HDR_BASE_OFFSET), be_i32(self._p + HDR_LAST_OFFSET_DELTA))

    @property
    def size_in_bytes(self):
        return self._size

    @property
    def compression(self):
        """Codec name; "unknown" for the invalid ids 5-7 (validate() rejects those)."""
        cdef int codec = self._p[HDR_ATTRIBUTES + 1] & ATTR_CODEC_MASK
        return _CODEC_NAMES[codec] if codec <= CODEC_MAX else "unknown"

    @property
    def timestamp_type(self):
        return _LOG_APPEND if self._p[HDR_ATTRIBUTES + 1] & ATTR_TIMESTAMP_TYPE else _CREATE

    @property
    def is_transactional(self):
        return (self._p[HDR_ATTRIBUTES + 1] & ATTR_TRANSACTIONAL) != 0

    @property
    def is_control(self):
        return (self._p[HDR_ATTRIBUTES + 1] & ATTR_CONTROL) != 0

    def __repr__(self):
        return (
            f"RecordBatch(base_offset={self.base_offset}, records_count={self.records_count}, "
            f"compression={self.compression!r}, size_in_bytes={self.size_in_bytes})"
        )

    # -- validation ---------------------------------------------------------------------

    cdef object _err(self, str reason, Py_ssize_t position=-1):
        return corrupt(reason, self._batch_index,
                        self._position if position < 0 else position)

    cdef int _check_crc(self) except -1:
        cdef uint32_t stored = lc_load_be32(self._p + HDR_CRC)
        cdef uint32_t actual
        cdef size_t n = <size_t>(self._size - HDR_ATTRIBUTES)
        if n >= CRC32C_NOGIL_THRESHOLD:
            with nogil:
                actual = crc32c_update(0, self._p + HDR_ATTRIBUTES, n)
        else:
            actual = crc32c_update(0, self._p + HDR_ATTRIBUTES, n)
        if actual != stored:
            raise self._err(f"CRC mismatch: stored 0x{stored:08x}, computed 0x{actual:08x}")
        return 0

    cdef object _section(self):
        """The decompressed records section (bytes), or None when uncompressed.

        Raises CorruptRecordError for an unknown codec or bad compressed data.
        """
        cdef int codec = self._p[HDR_ATTRIBUTES + 1] & ATTR_CODEC_MASK
        if codec == CODEC_NONE:
            return None
        if codec > CODEC_MAX:
            raise self._err(f"unknown compression codec id {codec}")
        try:
            return _compression.decompress(codec, self._view[HDR_SIZE:])
        except CorruptRecordError as exc:
            raise self._err(str(exc), self._position + HDR_SIZE) from None

    def validate(self):
        """Check the CRC, the codec and every record (decompressing if needed).

        Raises:
            CorruptRecordError: the first problem found, naming the batch position; a CRC
                mismatch names both the stored and the computed CRC.
        """
        cdef WalkStats stats
        cdef WalkError e
        cdef const unsigned char *sec
        cdef Py_ssize_t sec_len, sec_pos
        cdef int st
        cdef int32_t count
        self._check_crc()
        count = be_i32(self._p + HDR_RECORDS_COUNT)
        if count < 0:
            raise self._err(f"negative records_count {count}")
        data = self._section()
        if data is None:
            sec = self._p + HDR_SIZE
            sec_len = self._size - HDR_SIZE
            sec_pos = self._position + HDR_SIZE
        else:
            sec = <const unsigned char *>PyBytes_AS_STRING(data)
            sec_len = PyBytes_GET_SIZE(data)
            sec_pos = -1
        if sec_len >= WALK_NOGIL_THRESHOLD:
            with nogil:
                st = records_walk(sec, sec + sec_len, count, 0, 0, False, False, True, &stats, &e)
        else:
            st = records_walk(sec, sec + sec_len, count, 0, 0, False, False, True, &stats, &e)
        if st != ST_OK:
            raise walk_error(&e, self._batch_index, self._position, sec, sec_pos, count)

    def is_valid(self):
        """True if validate() would not raise."""
        try:
            self.validate()
        except CorruptRecordError:
            return False
        return True

    # -- records ------------------------------------------------------------------------

    def __iter__(self):
        """Iterate the batch's Records (decompressing if needed; the CRC is not checked).

        Raises:
            CorruptRecordError: malformed records, unknown codec, bad compressed data.
        """
        cdef _RecordIter it = _RecordIter.__new__(_RecordIter)
        cdef int16_t attrs = be_i16(self._p + HDR_ATTRIBUTES)
        it.batch = self
        it.count = be_i32(self._p + HDR_RECORDS_COUNT)
        if it.count < 0:
            raise self._err(f"negative records_count {it.count}")
        it.data = self._section()
        if it.data is None:
            it.section = self._p + HDR_SIZE
            cursor_init(&it.cur, it.section, <size_t>(self._size - HDR_SIZE))
            it.section_pos = self._position + HDR_SIZE
        else:
            it.section = <const unsigned char *>PyBytes_AS_STRING(it.data)
            cursor_init(&it.cur, it.section, <size_t>PyBytes_GET_SIZE(it.data))
            it.section_pos = -1
        it.base_offset = be_i64(self._p + HDR_BASE_OFFSET)
        it.base_timestamp = be_i64(self._p + HDR_BASE_TIMESTAMP)
        it.max_timestamp = be_i64(self._p + HDR_MAX_TIMESTAMP)
        it.log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
        return it


# ---------------------------------------------------------------------------------------
# iter_batches
# ---------------------------------------------------------------------------------------

@cython.final
cdef class _BatchIter:
    """Walks concatenated batches as Kafka's ByteBufferLogInputStream.nextBatch does."""
    cdef const unsigned char[::1] view
    cdef Py_ssize_t pos
    cdef Py_ssize_t index

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t n = self.view.shape[0]
        cdef Py_ssize_t pos = self.pos
        cdef const unsigned char *p
        cdef int32_t batch_length
        cdef Py_ssize_t size
        cdef RecordBatch b
        # Kafka's order (ByteBufferLogInputStream.nextBatch): fewer than 17 bytes is the
        # end; a too-small batch_length is corruption; a batch that does not fit is a
        # fetch response cut at max_bytes (skipped silently); only then the magic.
        if n - pos < HDR_PROBE_SIZE:
            raise StopIteration
        p = &self.view[0] + pos
        batch_length = be_i32(p + HDR_BATCH_LENGTH)
        if batch_length < HDR_MIN_BATCH_LENGTH:
            raise corrupt(
                f"batch_length {batch_length} is below the minimum {HDR_MIN_BATCH_LENGTH}",
                self.index, pos)
        size = HDR_LOG_OVERHEAD + <Py_ssize_t>batch_length
        if size > n - pos:
            self.pos = n          # truncated trailing batch: stop, and stay stopped
            raise StopIteration
        if p[HDR_MAGIC] != MAGIC_V2:
            raise corrupt(f"unsupported magic {<int8_t>p[HDR_MAGIC]} (expected 2)",
                           self.index, pos)
        # A slice of the typed memoryview shares the parent's buffer export: zero-copy,
        # and the view keeps the buffer (an mmap, say) exported while it lives.
        b = RecordBatch.new(self.view[pos:pos + size], pos, self.index)
        self.pos = pos + size
        self.index += 1
        return b


def iter_batches(const unsigned char[::1] buffer not None):
    """Yield a zero-copy RecordBatch view for each batch in concatenated batches.

    Fewer than 17 bytes left, or a batch whose declared size runs past the end of the
    buffer, ends the iteration silently (a truncated trailing batch, as Kafka clients
    treat a fetch response cut at max_bytes). Checks follow Kafka's
    ByteBufferLogInputStream.nextBatch: size first, then whether it fits, then magic.

    Raises:
        CorruptRecordError: batch_length < 49 or magic != 2 (position = batch start).
    """
    cdef _BatchIter it = _BatchIter.__new__(_BatchIter)
    it.view = buffer
    it.pos = 0
    it.index = 0
    return it
