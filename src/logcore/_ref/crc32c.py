"""Pure-Python CRC-32C (Castagnoli): the test oracle for ``logcore._crc32c``.

What it computes (RFC 3720 section B.4, iSCSI; the CRC of Kafka's RecordBatch v2):

    polynomial 0x1EDC6F41, bit-reflected 0x82F63B78; initial register 0xFFFFFFFF;
    input and output reflected; final XOR 0xFFFFFFFF.
    check value: crc32c(b"123456789") == 0xE3069283; 32 zero bytes -> 0x8A9136AA.

A RecordBatch stores it as a big-endian uint32 at byte 17, covering bytes 21 (attributes)
to the end of the batch. Reference:
https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/common/utils/Crc32C.java

``crc32c(data, crc)`` continues a running CRC: crc32c(b, crc32c(a)) == crc32c(a + b), the
same convention as the ``crc32c`` package's ``crc32c(data, value)``.

The algorithm is the textbook reflected table method, sped up with "slicing by 8":
eight 256-entry tables let one loop iteration consume eight bytes (Intel's slicing-by-8;
table k gives the CRC of a byte followed by k zero bytes). The byte-at-a-time loop
handles the tail. This module is slow (a few MB/s) and exists to be obviously correct.
"""

from __future__ import annotations

_POLY = 0x82F63B78  # 0x1EDC6F41 bit-reversed


def _make_tables() -> list[list[int]]:
    t0 = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        # Feeding one more zero byte through the table: t[k][n] = t0[t[k-1][n] & 0xFF] ^ (t[k-1][n] >> 8)
        tables.append([t0[c & 0xFF] ^ (c >> 8) for c in prev])
    return tables


_T = _make_tables()
_T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7 = _T


def byte_view(buffer) -> memoryview:
    """A flat memoryview of a 1-D, C-contiguous byte buffer (the compiled codec's
    ``const unsigned char[::1]``), raising what Cython raises for anything else.

    Raises:
        TypeError: not a buffer. ValueError: not one-dimensional, or items that are not
            unsigned bytes (e.g. array("I")). BufferError: not C-contiguous.
    """
    view = memoryview(buffer)
    if view.ndim != 1:
        raise ValueError(f"Buffer has wrong number of dimensions (expected 1, got {view.ndim})")
    if view.format not in ("B", "c"):
        raise ValueError(
            f"Buffer dtype mismatch, expected unsigned bytes but got format {view.format!r}"
        )
    if not view.c_contiguous:
        raise BufferError("memoryview: underlying buffer is not C-contiguous")
    return view if view.format == "B" else view.cast("B")


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C of ``data`` (any buffer), continuing from a previous result ``crc``.

    Args:
        data: bytes, bytearray, memoryview, mmap or any other buffer.
        crc: the CRC of the bytes before ``data`` (0 to start).

    Returns:
        The CRC as an unsigned 32-bit integer.

    Raises:
        OverflowError: crc is outside [0, 2**32 - 1] (as the compiled uint32 argument).
        TypeError: data does not support the buffer protocol.
        ValueError, BufferError: see byte_view.
    """
    if not 0 <= crc <= 0xFFFFFFFF:
        raise OverflowError(f"crc {crc} is outside the unsigned 32-bit range")
    view = byte_view(data)
    c = crc ^ 0xFFFFFFFF
    n = len(view)
    i = 0
    t0, t1, t2, t3, t4, t5, t6, t7 = _T0, _T1, _T2, _T3, _T4, _T5, _T6, _T7
    # Eight bytes per step: XOR the first four into the register, then each of the eight
    # bytes is looked up in the table that accounts for how many bytes follow it.
    end8 = n - (n % 8)
    while i < end8:
        c ^= view[i] | (view[i + 1] << 8) | (view[i + 2] << 16) | (view[i + 3] << 24)
        c = (
            t7[c & 0xFF]
            ^ t6[(c >> 8) & 0xFF]
            ^ t5[(c >> 16) & 0xFF]
            ^ t4[c >> 24]
            ^ t3[view[i + 4]]
            ^ t2[view[i + 5]]
            ^ t1[view[i + 6]]
            ^ t0[view[i + 7]]
        )
        i += 8
    while i < n:
        c = t0[(c ^ view[i]) & 0xFF] ^ (c >> 8)
        i += 1
    return c ^ 0xFFFFFFFF
