# Declarations of the batch builder (_builder.pyx): the BatchBuilder class, for cimport.

from libc.stdint cimport int16_t, int32_t, int64_t


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
