# Declarations of the columnar decoder (_columns.pyx): the Columns class, for cimport.
#
# Columns layout (Arrow-style numpy arrays) for n records: offsets int64[n],
# timestamps int64[n], timestamp_types int8[n], key_offsets / value_offsets int32[n + 1],
# key_data / value_data uint8 (one buffer: values, then keys), key_valid / value_valid
# bool[n], header_counts int32[n]; with copy_values=False value_offsets is None and
# value_starts int64[n] / value_lengths int32[n] locate the values in value_data.


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
    cdef readonly object value_starts       # copy_values=False only, else None
    cdef readonly object value_lengths
    cdef readonly Py_ssize_t num_records
