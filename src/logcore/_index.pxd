# The index classes for cimport by logcore._segment (recovery appends entries directly).
# Layouts and behaviour: _index.pyx.

cimport cython
from libc.stdint cimport int64_t


cdef class _MappedIndex:
    cdef unsigned char *_map
    cdef Py_ssize_t _map_len
    cdef Py_ssize_t _entries
    cdef Py_ssize_t _max_entries
    cdef int _entry_size
    cdef readonly int64_t base_offset
    cdef readonly bint writable
    cdef public str path

    cdef int _open(self, str path, int64_t base_offset, Py_ssize_t max_index_size,
                   bint writable) except -1
    cdef int _remap(self, int fd, Py_ssize_t length) except -1
    cdef int64_t _key(self, Py_ssize_t n) noexcept
    cdef Py_ssize_t _search(self, int64_t target)
    cdef object _corrupt(self, str kind, str why)


@cython.final
cdef class OffsetIndex(_MappedIndex):
    cdef int64_t _pos(self, Py_ssize_t n) noexcept
    cpdef int64_t walk_start(self, int64_t max_position, int64_t max_offset)
    cdef int c_append(self, int64_t offset, int64_t position) except -1


@cython.final
cdef class TimeIndex(_MappedIndex):
    cdef int64_t _rel(self, Py_ssize_t n) noexcept
    cdef int c_append(self, int64_t timestamp, int64_t offset, bint skip_full_check) except -1
