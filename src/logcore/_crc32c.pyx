"""CRC-32C (Castagnoli), the checksum of Kafka's RecordBatch v2.

The CRC covers a batch from its attributes field (byte 21) to its end; the partition
leader epoch (bytes 12..15) sits outside it so the broker can stamp it without
recomputing (DefaultRecordBatch.java; java.util.zip.CRC32C; KIP-98).

The arithmetic is in include/crc32c.h: the CPU's CRC32 instruction (SSE4.2 on x86_64,
ARMv8 CRC on aarch64) with a 3-way interleaved loop, detected at run time, and a portable
slice-by-8 fallback. Buffers of CRC32C_NOGIL_THRESHOLD bytes or more are checksummed
with the GIL released (pure arithmetic on memory the caller's buffer keeps alive).
"""

from cpython.buffer cimport PyBuffer_Release
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint32_t

from logcore._consts cimport CRC32C_NOGIL_THRESHOLD
from logcore._crc32c cimport byte_buffer_get, crc32c_update
from logcore._includes cimport lc_crc32c_impl_name, lc_crc32c_init, lc_crc32c_portable

lc_crc32c_init()

#: Which implementation runs: "sse4.2", "armv8-crc" or "slice-by-8".
IMPLEMENTATION = lc_crc32c_impl_name().decode("ascii")
#: Buffers at least this long are checksummed without the GIL.
NOGIL_THRESHOLD = CRC32C_NOGIL_THRESHOLD


def crc32c(data, crc=0):
    """CRC-32C of `data` (any buffer), continuing from `crc` (a finished CRC, 0 to start).

    `crc32c(b, crc32c(a)) == crc32c(a + b)`, like the `crc32c` package's crc32c(data, value).

    Returns:
        The CRC as an int in [0, 2**32).

    Raises:
        TypeError: data does not support the buffer protocol.
        ValueError: not a flat buffer of bytes. BufferError: not contiguous.
    """
    cdef Py_buffer view
    cdef uint32_t start
    if not isinstance(crc, int):
        # a float would silently truncate through a C conversion; _ref refuses it too
        raise TypeError(f"crc must be an int, not {type(crc).__name__}")
    start = crc            # OverflowError outside [0, 2**32)
    # bytes is read in place; other buffers through byte_buffer_get, not a typed
    # memoryview: acquiring one costs ~0.15 us, twice the CRC of 1 KiB.
    if type(data) is bytes:
        return _crc_of(start, <const unsigned char *>PyBytes_AS_STRING(data),
                       <size_t>PyBytes_GET_SIZE(data))
    byte_buffer_get(data, &view)
    try:
        return _crc_of(start, <const unsigned char *>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)


cdef inline uint32_t _crc_of(uint32_t crc, const unsigned char *p, size_t n) noexcept:
    if n >= CRC32C_NOGIL_THRESHOLD:
        with nogil:
            crc = crc32c_update(crc, p, n)
        return crc
    return crc32c_update(crc, p, n)


def crc32c_portable(const unsigned char[::1] data, uint32_t crc=0):
    """The same CRC through the portable slice-by-8 tables (tests, benchmarks)."""
    cdef size_t n = <size_t>data.shape[0]
    if n == 0:
        return crc
    return lc_crc32c_portable(crc, &data[0], n)
