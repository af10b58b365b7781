# Declarations of append validation (_append.pyx): the AppendInfo class, for cimport.

from libc.stdint cimport int16_t, int32_t, int64_t


cdef class AppendInfo:
    cdef readonly int64_t first_offset
    cdef readonly int64_t last_offset
    cdef readonly int64_t record_count
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly int64_t shallow_offset_of_max_timestamp
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
