# Declarations of the RecordBatch reader (_reader.pyx) for cimport by the other codec
# units: _columns checks CRCs and decompresses through RecordBatch's C methods.
#
# A RecordBatch is a zero-copy view of one batch (the 61-byte header of _fields.pxd,
# then its records section); batches follow each other with nothing between them.


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
