"""Pure-Python twin of logcore._offset_map: the log cleaner's offset map.

Kafka's SkimpyOffsetMap: a fixed-size open-addressing table of 24-byte entries (a 16-byte
hash of the record key + the int64 offset of the key's latest record), probed linearly
from the first hash word. The hash is MurmurHash3 x64-128 (seed 0) where Kafka uses MD5:
the map never leaves memory, so only the spread and the collision odds matter. One slot
always stays empty so a probe for a missing key ends. See the compiled unit for the
record-section layout that ``put_records`` and ``retain_records`` walk.
"""

from __future__ import annotations

from ..errors import CorruptRecordError
from .varint import encode_varint

ENTRY_SIZE = 24
_M = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M
    k ^= k >> 33
    return k


def murmur3_128(data: bytes) -> tuple[int, int]:
    """MurmurHash3 x64-128 with seed 0: (h1, h2)."""
    n = len(data)
    h1 = h2 = 0
    nblocks = n // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[16 * i:16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8:16 * i + 16], "little")
        k1 = (k1 * _C1) & _M
        k1 = _rotl(k1, 31)
        k1 = (k1 * _C2) & _M
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 = (h1 + h2) & _M
        h1 = (h1 * 5 + 0x52DCE729) & _M
        k2 = (k2 * _C2) & _M
        k2 = _rotl(k2, 33)
        k2 = (k2 * _C1) & _M
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 = (h2 + h1) & _M
        h2 = (h2 * 5 + 0x38495AB5) & _M
    tail = data[nblocks * 16:]
    rest = n & 15
    if rest > 8:
        k2 = int.from_bytes(tail[8:rest], "little")
        k2 = (k2 * _C2) & _M
        k2 = _rotl(k2, 33)
        k2 = (k2 * _C1) & _M
        h2 ^= k2
    if rest > 0:
        k1 = int.from_bytes(tail[:min(rest, 8)], "little")
        k1 = (k1 * _C1) & _M
        k1 = _rotl(k1, 31)
        k1 = (k1 * _C2) & _M
        h1 ^= k1
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M
    h2 = (h2 + h1) & _M
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _M
    h2 = (h2 + h1) & _M
    return h1, h2


def key_hash(key: bytes | bytearray | memoryview) -> bytes:
    """The 16-byte hash the map stores for ``key`` (h1 then h2, little-endian)."""
    h1, h2 = murmur3_128(bytes(key))
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def _varint(data: bytes | memoryview, pos: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """Zig-zag varint at pos: (value, next pos); CorruptRecordError when malformed."""
    result = shift = 0
    for i in range(max_bytes):
        if pos + i >= len(data):
            raise CorruptRecordError("truncated varint in a record section")
        b = data[pos + i]
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            if result >> bits:
                raise CorruptRecordError("varint out of range in a record section")
            return (result >> 1) ^ -(result & 1), pos + i + 1
    raise CorruptRecordError("varint too long in a record section")


class _Parsed:
    __slots__ = ("start", "end", "attrs", "tsdelta", "rest", "odelta", "key", "vlen")
    start: int
    end: int
    attrs: int
    tsdelta: int
    rest: int
    odelta: int
    key: bytes | None
    vlen: int


def _walk(section: bytes | bytearray | memoryview, count: int) -> list[_Parsed]:
    data = bytes(section)
    pos, n = 0, len(data)
    out = []
    try:
        for _ in range(count):
            p = _Parsed()
            p.start = pos
            length, pos = _varint(data, pos, 5, 32)
            if length < 6 or pos + length > n:
                raise CorruptRecordError("bad record length")
            end = pos + length
            body = data[:end]
            p.end = end
            p.attrs = body[pos]
            p.tsdelta, q = _varint(body, pos + 1, 10, 64)
            p.rest = q
            p.odelta, q = _varint(body, q, 5, 32)
            klen, q = _varint(body, q, 5, 32)
            if klen < -1 or end - q < klen:
                raise CorruptRecordError("bad key length")
            p.key = None if klen < 0 else body[q:q + klen]
            p.vlen, _q = _varint(body, q + max(klen, 0), 5, 32)
            if p.vlen < -1:
                raise CorruptRecordError("bad value length")
            out.append(p)
            pos = end
    except CorruptRecordError:
        raise CorruptRecordError(f"malformed record section ({count} records)") from None
    if pos != n:
        raise CorruptRecordError(f"malformed record section ({count} records)")
    return out


class OffsetMap:
    """key hash -> offset of the key's latest record (see logcore._offset_map)."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        if memory < 2 * ENTRY_SIZE:
            raise ValueError(
                f"an offset map needs at least {2 * ENTRY_SIZE} bytes, got {memory}")
        if not 0.0 < load_factor <= 1.0:
            raise ValueError(f"load_factor must be in (0, 1], got {load_factor}")
        self.slots = memory // ENTRY_SIZE
        self.load_factor = float(load_factor)
        self.capacity = min(max(1, int(self.slots * load_factor)), self.slots - 1)
        self.clear()

    def clear(self) -> None:
        self._hashes: list[tuple[int, int] | None] = [None] * self.slots
        self._offsets = [-1] * self.slots
        self.size = 0
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    @property
    def full(self) -> bool:
        return self.size >= self.capacity

    def _put(self, h: tuple[int, int], offset: int) -> None:
        i = h[0] % self.slots
        while True:
            if self._offsets[i] < 0:
                if self.size >= self.slots - 1:
                    raise OverflowError(f"offset map full ({self.slots} slots)")
                self._hashes[i] = h
                self._offsets[i] = offset
                self.size += 1
                break
            if self._hashes[i] == h:
                self._offsets[i] = offset
                break
            i = (i + 1) % self.slots
        self.latest_offset = offset

    def _get(self, h: tuple[int, int]) -> int:
        i = h[0] % self.slots
        for _ in range(self.slots):
            if self._offsets[i] < 0:
                return -1
            if self._hashes[i] == h:
                return self._offsets[i]
            i = (i + 1) % self.slots
        return -1

    def put(self, key: bytes | bytearray | memoryview, offset: int) -> None:
        self._put(murmur3_128(bytes(key)), offset)

    def get(self, key: bytes | bytearray | memoryview) -> int:
        return self._get(murmur3_128(bytes(key)))

    def put_records(self, section: bytes | bytearray | memoryview, count: int,
                    base_offset: int, stop_offset: int) -> int:
        put = 0
        for p in _walk(section, count):
            offset = base_offset + p.odelta
            if p.key is None or offset >= stop_offset:
                continue
            self._put(murmur3_128(p.key), offset)
            put += 1
        return put

    def retain_records(
        self, section: bytes | bytearray | memoryview, count: int, base_offset: int,
        base_timestamp: int, new_base_timestamp: int, retain_deletes: bool,
        retain_from: int,
    ) -> tuple[bytes, int, int, int, int]:
        data = bytes(section)
        out = bytearray()
        kept = tombstones = keyless = 0
        max_ts = -1
        for p in _walk(data, count):
            offset = base_offset + p.odelta
            if offset < retain_from:
                if p.key is None:
                    keyless += 1
                    continue
                found = self._get(murmur3_128(p.key))
                if found >= 0 and offset < found:
                    continue
                if p.vlen < 0 and not retain_deletes:
                    continue
            kept += 1
            if p.vlen < 0:
                tombstones += 1
            ts = base_timestamp + p.tsdelta
            max_ts = max(max_ts, ts)
            if new_base_timestamp == base_timestamp:
                out += data[p.start:p.end]
            else:
                body = bytes([p.attrs]) + encode_varint(ts - new_base_timestamp) + \
                    data[p.rest:p.end]
                out += encode_varint(len(body)) + body
        return bytes(out), kept, tombstones, max_ts, keyless
