# CRC-32C for cimport by the other codec units (the C code is include/crc32c.h; its
# extern block is in _includes.pxd).

from libc.stdint cimport uint32_t

from logcore._includes cimport lc_crc32c


cdef inline uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t n) noexcept nogil:
    """Continue a finished CRC-32C `crc` (0 to start) over n bytes at p. Pure arithmetic."""
    return lc_crc32c(crc, p, n)
