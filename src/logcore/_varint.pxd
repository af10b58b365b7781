# Varints of Kafka's record format, inline for cimport by the codecs.
#
# Unsigned varint (ByteUtils.writeUnsignedVarint, protobuf base 128): 7 bits per byte,
# least significant group first, high bit set on every byte but the last.
# Signed varint / varlong (ByteUtils.writeVarint / writeVarlong): the zig-zag
# transform (n << 1) ^ (n >> 63) maps small magnitudes of either sign to small
# unsigned numbers, then the unsigned encoding above.
# apache/kafka: clients/src/main/java/org/apache/kafka/common/utils/ByteUtils.java
#
# Limits enforced by the decoders (Kafka rejects longer encodings too):
#   int32 fields: at most 5 bytes, and the 5th byte may only carry bits 28..31;
#   int64 fields: at most 10 bytes, and the 10th byte may only carry bit 63.
# They return a status (ST_* from _consts.pxd) instead of raising so that the record
# walkers can run without the GIL; the caller raises CorruptRecordError.

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from logcore._consts cimport (
    ST_OK, ST_TRUNCATED, ST_VARINT_OVERFLOW, ST_VARINT_TOO_LONG,
)


cdef inline uint64_t zigzag_encode64(int64_t n) noexcept nogil:
    return (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)


cdef inline int64_t zigzag_decode64(uint64_t v) noexcept nogil:
    return <int64_t>((v >> 1) ^ (0 - (v & 1)))


cdef inline int32_t zigzag_decode32(uint32_t v) noexcept nogil:
    return <int32_t>((v >> 1) ^ (0 - (v & 1)))


cdef inline int varint_size_u64(uint64_t v) noexcept nogil:
    """Bytes needed to encode v as an unsigned varint (1..10)."""
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline int varint_encode_u64(unsigned char *p, uint64_t v) noexcept nogil:
    """Write v as an unsigned varint at p (room for 10 bytes required); return its size."""
    cdef int n = 0
    while v >= 0x80:
        p[n] = <unsigned char>(v | 0x80)
        v >>= 7
        n += 1
    p[n] = <unsigned char>v
    return n + 1


cdef inline int varint_decode_u64(const unsigned char **pp, const unsigned char *end,
                                  uint64_t *out) noexcept nogil:
    """Read an unsigned varint of up to 10 bytes in [*pp, end); advance *pp on success."""
    cdef const unsigned char *p = pp[0]
    cdef uint64_t b, v
    cdef int shift
    if p >= end:
        return ST_TRUNCATED
    b = p[0]
    # One-byte varints (lengths < 64, small deltas) are the common case in records.
    if b < 0x80:
        out[0] = b
        pp[0] = p + 1
        return ST_OK
    v = b & 0x7F
    shift = 7
    p += 1
    while True:
        if p >= end:
            return ST_TRUNCATED
        b = p[0]
        p += 1
        if shift == 63:
            # 10th byte: only bit 63 is left, and no continuation may follow.
            if b & 0x80:
                return ST_VARINT_TOO_LONG
            if b > 1:
                return ST_VARINT_OVERFLOW
        v |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    out[0] = v
    pp[0] = p
    return ST_OK


cdef inline int varint_decode_u32(const unsigned char **pp, const unsigned char *end,
                                  uint32_t *out) noexcept nogil:
    """Read an unsigned varint of up to 5 bytes (an int32 field); advance *pp on success."""
    cdef const unsigned char *p = pp[0]
    cdef uint32_t b, v
    cdef int shift
    if p >= end:
        return ST_TRUNCATED
    b = p[0]
    if b < 0x80:
        out[0] = b
        pp[0] = p + 1
        return ST_OK
    v = b & 0x7F
    shift = 7
    p += 1
    while True:
        if p >= end:
            return ST_TRUNCATED
        b = p[0]
        p += 1
        if shift == 28:
            # 5th byte: only bits 28..31 are left.
            if b & 0x80:
                return ST_VARINT_TOO_LONG
            if b > 0x0F:
                return ST_VARINT_OVERFLOW
        v |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    out[0] = v
    pp[0] = p
    return ST_OK


cdef inline int varint_decode_i32(const unsigned char **pp, const unsigned char *end,
                                  int32_t *out) noexcept nogil:
    """Read a zig-zag varint (int32 field)."""
    cdef uint32_t u
    cdef int st = varint_decode_u32(pp, end, &u)
    if st == ST_OK:
        out[0] = zigzag_decode32(u)
    return st


cdef inline int varint_decode_i64(const unsigned char **pp, const unsigned char *end,
                                  int64_t *out) noexcept nogil:
    """Read a zig-zag varlong (int64 field)."""
    cdef uint64_t u
    cdef int st = varint_decode_u64(pp, end, &u)
    if st == ST_OK:
        out[0] = zigzag_decode64(u)
    return st


# Pointer-returning forms for the record parser's fast path: they return the position
# after the varint, or NULL on any failure (the caller then re-parses with the
# status-returning forms above to say what failed). Returning the cursor by value keeps
# it in a register; the status forms write it back through a pointer after every field.

cdef inline const unsigned char *varint_read_i32(const unsigned char *p,
                                                 const unsigned char *end,
                                                 int32_t *out) noexcept nogil:
    cdef uint32_t u
    # 1- and 2-byte varints unrolled: in a record of ~100-byte values the length, the
    # value length and most deltas take two bytes, so the loop below is the rare case.
    if end - p >= 2:
        if p[0] < 0x80:
            out[0] = zigzag_decode32(p[0])
            return p + 1
        if p[1] < 0x80:
            out[0] = zigzag_decode32((p[0] & 0x7F) | (<uint32_t>p[1] << 7))
            return p + 2
    elif p < end and p[0] < 0x80:
        out[0] = zigzag_decode32(p[0])
        return p + 1
    if varint_decode_u32(&p, end, &u) != ST_OK:
        return NULL
    out[0] = zigzag_decode32(u)
    return p


cdef inline const unsigned char *varint_read_i64(const unsigned char *p,
                                                 const unsigned char *end,
                                                 int64_t *out) noexcept nogil:
    cdef uint64_t u
    if end - p >= 2:
        if p[0] < 0x80:
            out[0] = zigzag_decode64(p[0])
            return p + 1
        if p[1] < 0x80:
            out[0] = zigzag_decode64((p[0] & 0x7F) | (<uint64_t>p[1] << 7))
            return p + 2
    elif p < end and p[0] < 0x80:
        out[0] = zigzag_decode64(p[0])
        return p + 1
    if varint_decode_u64(&p, end, &u) != ST_OK:
        return NULL
    out[0] = zigzag_decode64(u)
    return p
