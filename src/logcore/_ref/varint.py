"""Pure-Python varints and zig-zag: the test oracle for ``logcore._varint``.

Byte layout (protobuf base-128 varints, as Kafka's ByteUtils.java writes them):

    each byte: bit 7 = "another byte follows", bits 0-6 = the next 7 bits of the value,
    least significant group first.  A 64-bit value takes 1 to 10 bytes; the 10th byte
    may only carry the value's top bit (0x00 or 0x01).

    zig-zag (signed -> unsigned):   z = (n << 1) ^ (n >> 63)      0,-1,1,-2,2 -> 0,1,2,3,4
    un-zig-zag:                     n = (z >> 1) ^ -(z & 1)

Kafka records use zig-zag varints for every signed field (ByteUtils.writeVarint /
writeVarlong); unsigned varints appear in flexible protocol versions (KIP-482).
Reference: https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/utils/ByteUtils.java

Decoders take any buffer (bytes, bytearray, memoryview, mmap) and a start position and
return ``(value, next_position)``. They raise CorruptRecordError when the buffer ends
inside a varint, when a varint is longer than 10 bytes, or when its value would need more
than 64 bits. Encoders raise ValueError for values outside the 64-bit range.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from .crc32c import byte_view

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

# A 64-bit value needs at most ceil(64 / 7) = 10 groups of 7 bits.
MAX_VARINT_BYTES = 10


def zigzag_encode(n: int) -> int:
    """Map a signed 64-bit integer to an unsigned one (small magnitudes stay small).

    Raises:
        ValueError: n is outside [-2**63, 2**63 - 1].
    """
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"{n} is outside the signed 64-bit range")
    # Python's >> on a negative int is arithmetic, as Java's >> on a long.
    return ((n << 1) ^ (n >> 63)) & UINT64_MAX


def zigzag_decode(n: int) -> int:
    """Inverse of zigzag_encode.

    Raises:
        ValueError: n is outside [0, 2**64 - 1].
    """
    if not 0 <= n <= UINT64_MAX:
        raise ValueError(f"{n} is outside the unsigned 64-bit range")
    return (n >> 1) ^ -(n & 1)


def encode_unsigned_varint(n: int) -> bytes:
    """Encode an unsigned integer (0 .. 2**64 - 1) as a base-128 varint.

    Raises:
        ValueError: n is negative or needs more than 64 bits.
    """
    if not 0 <= n <= UINT64_MAX:
        raise ValueError(f"{n} is outside the unsigned 64-bit range")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    """Encode a signed 64-bit integer as a zig-zag varint (Kafka's varint / varlong).

    Raises:
        ValueError: n is outside [-2**63, 2**63 - 1].
    """
    return encode_unsigned_varint(zigzag_encode(n))


def decode_unsigned_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode an unsigned varint starting at ``buf[pos]``.

    Args:
        buf: any object supporting the buffer protocol.
        pos: byte position where the varint starts.

    Returns:
        (value, position just after the varint)

    Raises:
        CorruptRecordError: the buffer ends inside the varint, the varint is longer than
            10 bytes, or its value does not fit in 64 bits.
        ValueError: pos is negative.
    """
    view = buf if isinstance(buf, (bytes, bytearray)) else byte_view(buf)
    if pos < 0:
        raise ValueError(f"negative position {pos}")
    end = len(view)
    value = 0
    shift = 0
    i = pos
    while True:
        if i >= end:
            raise CorruptRecordError(f"truncated varint at byte {pos}", position=pos)
        if i - pos >= MAX_VARINT_BYTES:
            raise CorruptRecordError(f"varint longer than 10 bytes at byte {pos}", position=pos)
        b = view[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if value > UINT64_MAX:
        # Only possible with a 10th byte above 0x01.
        raise CorruptRecordError(f"varint at byte {pos} overflows 64 bits", position=pos)
    return value, i


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    """Decode a zig-zag (signed) varint starting at ``buf[pos]``.

    Returns:
        (value, position just after the varint); value is in the signed 64-bit range.

    Raises:
        CorruptRecordError: as decode_unsigned_varint.
        ValueError: pos is negative.
    """
    raw, nxt = decode_unsigned_varint(buf, pos)
    return zigzag_decode(raw), nxt


def size_of_varint(n: int) -> int:
    """Number of bytes encode_varint(n) produces."""
    z = zigzag_encode(n)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size
