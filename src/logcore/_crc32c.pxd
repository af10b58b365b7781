# CRC-32C for cimport by the other codec units (the C code is include/crc32c.h; its
# extern block is in _includes.pxd).

from libc.stdint cimport uint32_t

from logcore._includes cimport lc_crc32c


cdef inline uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t n) noexcept nogil:
    """Continue a finished CRC-32C `crc` (0 to start) over n bytes at p. Pure arithmetic."""
    return lc_crc32c(crc, p, n)


from cpython.buffer cimport PyBUF_FULL_RO, PyBuffer_Release, PyObject_GetBuffer


cdef inline int byte_buffer_get(object obj, Py_buffer *view) except -1:
    """Export `obj` as a flat byte buffer, with the rules of a `const unsigned char[::1]`
    argument (and of _ref's byte_view), for callers that skip the typed memoryview
    because acquiring one costs more than their work on small inputs.

    Raises TypeError (not a buffer), ValueError (not one-dimensional, or items that are
    not bytes, e.g. array("I")), BufferError (not C-contiguous). On success the caller
    owns the export and must PyBuffer_Release(view).
    """
    cdef bytes fmt
    PyObject_GetBuffer(obj, view, PyBUF_FULL_RO)
    if view.ndim != 1:
        n = view.ndim
        PyBuffer_Release(view)
        raise ValueError(f"Buffer has wrong number of dimensions (expected 1, got {n})")
    fmt = view.format if view.format != NULL else b"B"
    if fmt != b"B" and fmt != b"c":
        PyBuffer_Release(view)
        raise ValueError(
            f"Buffer dtype mismatch, expected unsigned bytes but got format {fmt.decode()!r}")
    # contiguity as memoryview.c_contiguous decides it for one dimension
    if view.strides != NULL and view.shape[0] != 1 and view.strides[0] != 1:
        PyBuffer_Release(view)
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return 0
