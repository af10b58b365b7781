"""Kafka varints for Python callers (tools and tests); the codecs cimport _varint.pxd.

Layout (apache/kafka clients/src/main/java/org/apache/kafka/common/utils/ByteUtils.java):
    unsigned varint: 7 bits per byte, least significant group first, high bit = more follows
    signed varint/varlong: zig-zag ((n << 1) ^ (n >> 63)) then the unsigned encoding
Both cover the 64-bit range here: at most 10 bytes, the 10th carrying only bit 63.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint64_t

from logcore._consts cimport ST_OK, ST_TRUNCATED, ST_VARINT_TOO_LONG
from logcore._varint cimport (
    varint_decode_u64, varint_encode_u64, zigzag_decode64, zigzag_encode64,
)

from logcore.errors import CorruptRecordError

_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_U64_MAX = (1 << 64) - 1


cdef int64_t _check_signed(object n) except? -1:
    if not isinstance(n, int):
        raise TypeError(f"an int is required, not {type(n).__name__}")
    if n < _I64_MIN or n > _I64_MAX:
        raise ValueError(f"{n} is out of the signed 64-bit range")
    return n


cdef uint64_t _check_unsigned(object n) except? 0xFFFFFFFFFFFFFFFF:
    if not isinstance(n, int):
        raise TypeError(f"an int is required, not {type(n).__name__}")
    if n < 0 or n > _U64_MAX:
        raise ValueError(f"{n} is out of the unsigned 64-bit range")
    return n


def zigzag_encode(n):
    """Zig-zag map a signed 64-bit int to unsigned: 0, -1, 1, -2 -> 0, 1, 2, 3.

    Raises:
        ValueError: n outside [-2**63, 2**63 - 1].
    """
    return zigzag_encode64(_check_signed(n))


def zigzag_decode(n):
    """Inverse of zigzag_encode for n in [0, 2**64 - 1].

    Raises:
        ValueError: n outside the unsigned 64-bit range.
    """
    return zigzag_decode64(_check_unsigned(n))


def encode_unsigned_varint(n):
    """Encode n (0 <= n < 2**64) as an unsigned varint.

    Raises:
        ValueError: n out of range.
    """
    cdef unsigned char tmp[10]
    cdef int size = varint_encode_u64(tmp, _check_unsigned(n))
    return PyBytes_FromStringAndSize(<char *>tmp, size)


def encode_varint(n):
    """Encode a signed 64-bit n as a zig-zag varint (Kafka's varint / varlong).

    Raises:
        ValueError: n out of the signed 64-bit range.
    """
    cdef unsigned char tmp[10]
    cdef int size = varint_encode_u64(tmp, zigzag_encode64(_check_signed(n)))
    return PyBytes_FromStringAndSize(<char *>tmp, size)


cdef uint64_t _decode(const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t *next_pos) except? 0xFFFFFFFFFFFFFFFF:
    cdef Py_ssize_t n = buf.shape[0]
    cdef const unsigned char *p
    cdef const unsigned char *start
    cdef uint64_t value = 0
    cdef int st
    if pos < 0:
        raise ValueError(f"negative position {pos}")
    if pos >= n:
        raise CorruptRecordError(
            f"truncated varint at byte {pos} (buffer of {n} bytes)", position=pos)
    start = &buf[0]
    p = start + pos
    st = varint_decode_u64(&p, start + n, &value)
    if st == ST_OK:
        next_pos[0] = p - start
        return value
    if st == ST_TRUNCATED:
        raise CorruptRecordError(
            f"truncated varint at byte {pos} (buffer of {n} bytes)", position=pos)
    if st == ST_VARINT_TOO_LONG:
        raise CorruptRecordError(f"varint at byte {pos} is longer than 10 bytes", position=pos)
    raise CorruptRecordError(f"varint at byte {pos} overflows 64 bits", position=pos)


def decode_unsigned_varint(const unsigned char[::1] buf, Py_ssize_t pos=0):
    """Decode an unsigned varint at buf[pos]: return (value, next_pos).

    Raises:
        CorruptRecordError: truncated, longer than 10 bytes, or over 64 bits.
    """
    cdef Py_ssize_t next_pos = 0
    cdef uint64_t v = _decode(buf, pos, &next_pos)
    return v, next_pos


def decode_varint(const unsigned char[::1] buf, Py_ssize_t pos=0):
    """Decode a zig-zag varint (signed, 64-bit range) at buf[pos]: return (value, next_pos).

    Raises:
        CorruptRecordError: truncated, longer than 10 bytes, or over 64 bits.
    """
    cdef Py_ssize_t next_pos = 0
    cdef uint64_t v = _decode(buf, pos, &next_pos)
    return zigzag_decode64(v), next_pos
