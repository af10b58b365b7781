# A bounded reader over a byte range [ptr, end): every read checks that its bytes are
# present, then advances. Nothing here can read past `end`, whatever the input says
# (the shape of MagicStack/py-pgproto's frb.pxd).
#
# Reads return a status (ST_OK or a negative ST_* code from _consts.pxd) so that they
# work without the GIL; on failure the cursor is left on the field that failed, which
# is the byte position reported in CorruptRecordError.

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint32_t

from logcore._consts cimport ST_OK, ST_TRUNCATED
from logcore._includes cimport lc_load_be16, lc_load_be32, lc_load_be64
from logcore._varint cimport varint_decode_i32, varint_decode_i64


cdef struct Cursor:
    const unsigned char *ptr
    const unsigned char *end


cdef inline void cursor_init(Cursor *c, const unsigned char *ptr, size_t n) noexcept nogil:
    c.ptr = ptr
    c.end = ptr + n


cdef inline size_t cursor_remaining(const Cursor *c) noexcept nogil:
    return <size_t>(c.end - c.ptr)


cdef inline int cursor_skip(Cursor *c, size_t n) noexcept nogil:
    if n > <size_t>(c.end - c.ptr):
        return ST_TRUNCATED
    c.ptr += n
    return ST_OK


cdef inline int cursor_read_i8(Cursor *c, int8_t *out) noexcept nogil:
    if c.ptr >= c.end:
        return ST_TRUNCATED
    out[0] = <int8_t>c.ptr[0]
    c.ptr += 1
    return ST_OK


cdef inline int cursor_read_i16(Cursor *c, int16_t *out) noexcept nogil:
    if <size_t>(c.end - c.ptr) < 2:
        return ST_TRUNCATED
    out[0] = <int16_t>lc_load_be16(c.ptr)
    c.ptr += 2
    return ST_OK


cdef inline int cursor_read_i32(Cursor *c, int32_t *out) noexcept nogil:
    if <size_t>(c.end - c.ptr) < 4:
        return ST_TRUNCATED
    out[0] = <int32_t>lc_load_be32(c.ptr)
    c.ptr += 4
    return ST_OK


cdef inline int cursor_read_i64(Cursor *c, int64_t *out) noexcept nogil:
    if <size_t>(c.end - c.ptr) < 8:
        return ST_TRUNCATED
    out[0] = <int64_t>lc_load_be64(c.ptr)
    c.ptr += 8
    return ST_OK


cdef inline int cursor_read_varint(Cursor *c, int32_t *out) noexcept nogil:
    """Zig-zag varint of an int32 field (at most 5 bytes)."""
    return varint_decode_i32(&c.ptr, c.end, out)


cdef inline int cursor_read_varlong(Cursor *c, int64_t *out) noexcept nogil:
    """Zig-zag varlong of an int64 field (at most 10 bytes)."""
    return varint_decode_i64(&c.ptr, c.end, out)
