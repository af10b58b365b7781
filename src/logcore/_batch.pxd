# Declarations of the compiled RecordBatch v2 codec (_batch.pyx) for cimport by other
# logcore units (segment recovery, index rebuild): the record walker and the classes.

from libc.stdint cimport int16_t, int32_t, int64_t

from logcore._cursor cimport Cursor


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


cdef int records_walk(const unsigned char *p, const unsigned char *end, int32_t count,
                      int64_t base_timestamp, int64_t header_max_timestamp, bint log_append,
                      bint check_offset_deltas, bint check_header_utf8, WalkStats *stats,
                      WalkError *err) noexcept nogil


cdef class Record:
    cdef readonly object offset      # exposed as slot descriptors, see _batch.pyx
    cdef readonly object timestamp
    cdef readonly object key
    cdef readonly object value
    cdef object _headers
    cdef bint _log_append


cdef class RecordBatch:
    cdef const unsigned char[::1] _view     # exactly this batch; holds the buffer
    cdef const unsigned char *_p
    cdef Py_ssize_t _size                   # 12 + batch_length
    cdef Py_ssize_t _position               # of the batch in the buffer it came from
    cdef object _batch_index                # None when built directly

    @staticmethod
    cdef RecordBatch new(const unsigned char[::1] view, Py_ssize_t position,
                         object batch_index)
    cdef object _err(self, str reason, Py_ssize_t position=*)
    cdef object _section(self)
    cdef int _check_crc(self) except -1


cdef class Columns:
    cdef readonly object offsets
    cdef readonly object timestamps
    cdef readonly object timestamp_types
    cdef readonly object key_offsets
    cdef readonly object value_offsets
    cdef readonly object key_data
    cdef readonly object value_data
    cdef readonly object key_valid
    cdef readonly object value_valid
    cdef readonly object header_counts
    cdef readonly Py_ssize_t num_records


cdef class AppendInfo:
    cdef readonly int64_t first_offset
    cdef readonly int64_t last_offset
    cdef readonly int64_t record_count
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly int64_t min_timestamp
    cdef readonly Py_ssize_t size_in_bytes
    cdef readonly Py_ssize_t batch_count
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t first_sequence
    cdef readonly int32_t last_sequence
    cdef readonly bint is_transactional
    cdef readonly bint is_control
    cdef readonly str timestamp_type


cdef class BatchBuilder:
    cdef unsigned char *_buf                # header space + encoded records
    cdef size_t _len
    cdef size_t _cap
    cdef int _codec
    cdef object _level
    cdef int16_t _attributes
    cdef int64_t _base_offset
    cdef int64_t _producer_id
    cdef int16_t _producer_epoch
    cdef int32_t _base_sequence
    cdef int32_t _leader_epoch
    cdef int64_t _base_timestamp
    cdef int64_t _max_timestamp
    cdef int32_t _count

    cdef int _reserve(self, size_t extra) except -1
    cdef int _put(self, int64_t timestamp, const unsigned char *key, Py_ssize_t key_len,
                  const unsigned char *value, Py_ssize_t value_len,
                  const unsigned char *headers, Py_ssize_t headers_len,
                  Py_ssize_t header_count) except -1
