"""Seeded mutators of Kafka request frames, for the wire fuzzer (``tests/fuzz/driver.py``).

Every mutator takes a ``random.Random``, one corpus frame (int32 size prefix, request
header, body: ``corpus.load()``) and the whole corpus, and returns the bytes to send. The
same seed gives the same mutants on every machine: nothing here reads the clock or
``os.urandom``.

Kinds (``KINDS``, what ``make fuzz`` counts):

- ``bitflip``, ``bytes``: flip 1-8 bits / overwrite 1-4 bytes with edge values, anywhere
  after the size prefix;
- ``truncate``: cut the body at a random point and fix the size prefix (a complete frame);
  ``short``: cut it and keep the old prefix (an incomplete frame: the broker must wait);
- ``size``: a lying size prefix: bigger, smaller, zero, negative, just over the 100 MiB
  limit, 2**31-1;
- ``header``: another API key (every one the broker serves, unknown ones) and/or version
  (in and out of range) on an unchanged body; ``inter-broker``: the same with
  LeaderAndIsr 4, StopReplica 5, UpdateMetadata 6, ControlledShutdown 7,
  WriteTxnMarkers 27, plus well-formed requests of those APIs built from their schema;
- ``count``: a huge, negative or off-by-one value where the body holds an array count or a
  length (int32, int16 string length, compact uvarint), found by their shape;
- ``splice``: the head of one frame and the tail of another;
- ``batch``: a Produce request whose record batch lies: record count, batch length,
  magic, or a compressed payload in every codec that is garbage or a decompression bomb,
  each with a valid CRC-32C so that it reaches the decompressor and the record parser.
"""

from __future__ import annotations

import functools
import random
import struct
import zlib
from collections.abc import Callable
from typing import Any

import cramjam
import lz4.frame
import zstandard

import logcore
from pylog.protocol.apis import SUPPORTED
from pylog.protocol.connection import request_class

Frame = bytes
Mutator = Callable[[random.Random, Frame, list[Frame]], bytes]

INTER_BROKER_APIS = (4, 5, 6, 7, 27)
# Every API key the broker serves, a few it does not, and values no API has.
API_KEYS = sorted(
    set(SUPPORTED) | set(INTER_BROKER_APIS) | {17, 29, 36, 52, 58, 68, 74, 999, -1, 32767}
)
INT32_EDGES = (0x7FFFFFFF, 0x40000000, 0x10000000, 1 << 20, -1, -2, -0x80000000, 0xFFFF)
BYTE_EDGES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)
# Uvarints: 2**32-1 (5 bytes), 2**28, 2**21, a 6-byte run (too long), 0 (compact null).
UVARINT_EDGES = (
    b"\xff\xff\xff\xff\x0f",
    b"\x80\x80\x80\x80\x01",
    b"\x80\x80\x80\x01",
    b"\xff\xff\xff\xff\xff\x01",
    b"\x00",
)
MAX_FRAME = 100 * 1024 * 1024

_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")


def with_size(body: bytes) -> bytes:
    return _i32.pack(len(body)) + body


def api_key(frame: bytes) -> int:
    return _i16.unpack_from(frame, 4)[0] if len(frame) >= 6 else -1


# --------------------------------------------------------------------------- generic bytes


def bitflip(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(4, len(out))
        out[pos] ^= 1 << rng.randrange(8)
    return bytes(out)


def overwrite_bytes(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    out = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randrange(4, len(out))
        out[pos] = rng.choice(BYTE_EDGES) if rng.random() < 0.6 else rng.randrange(256)
    return bytes(out)


def truncate(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    return with_size(frame[4 : 4 + rng.randrange(0, len(frame) - 4)])


def short(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    return frame[: rng.randrange(1, len(frame))]


def lying_size(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    n = len(frame) - 4
    size = rng.choice(
        [
            n + rng.randint(1, 1000),
            max(0, n - rng.randint(1, n)),
            0,
            -1,
            -rng.randint(2, 1 << 31),
            MAX_FRAME + 1,
            0x7FFFFFFF,
        ]
    )
    return _i32.pack(size) + frame[4:]


def splice(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    other = rng.choice(corpus)
    head = frame[4 : 4 + rng.randrange(4, len(frame) - 3)]
    tail = other[rng.randrange(4, len(other)) :]
    return with_size(head + tail)


# --------------------------------------------------------------------------- header


def _retarget(rng: random.Random, frame: Frame, keys: tuple[int, ...] | list[int]) -> bytes:
    out = bytearray(frame)
    key = rng.choice(keys)
    choice = rng.random()
    if choice < 0.7:
        struct.pack_into(">h", out, 4, key)
    if choice > 0.3 or key == api_key(frame):
        cls = request_class(key) if key >= 0 else None
        hi = cls.VALID_VERSIONS[1] if cls is not None else 3
        version = rng.choice([rng.randint(0, hi), hi + 1, hi + rng.randint(2, 100), -1, 32767])
        struct.pack_into(">h", out, 6, version)
    return bytes(out)


def header(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    return _retarget(rng, frame, API_KEYS)


@functools.cache
def inter_broker_frames() -> list[bytes]:
    """Well-formed requests of the inter-broker APIs, every version, default fields (empty
    arrays, zero ids), with a header from "fuzz": what a controller would send."""
    frames = []
    for key in INTER_BROKER_APIS:
        cls = request_class(key)
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            try:
                body = cls().encode(version)
            except Exception:  # a field without a usable default at this version
                continue
            hdr = struct.pack(">hhih", key, version, 7, 4) + b"fuzz"
            if cls.is_flexible(version) and not (key == 7 and version == 0):
                hdr += b"\x00"
            frames.append(with_size(hdr + body))
    return frames


def inter_broker(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    roll = rng.random()
    if roll < 0.4:
        return _retarget(rng, frame, INTER_BROKER_APIS)
    base = rng.choice(inter_broker_frames())
    if roll < 0.55:
        return base
    return rng.choice([bitflip, overwrite_bytes, truncate, count_field])(rng, base, corpus)


# --------------------------------------------------------------------------- counts


def _count_sites(frame: bytes) -> list[tuple[str, int]]:
    """Offsets in the body that look like a count or a length: an int32 of 0-64, an int16
    followed by that many printable bytes, a byte of 1-64 (a compact count or length)."""
    sites = []
    for pos in range(12, len(frame) - 1):
        if pos + 4 <= len(frame) and 0 <= _i32.unpack_from(frame, pos)[0] <= 64:
            sites.append(("i32", pos))
        n = _i16.unpack_from(frame, pos)[0]
        if (
            0 < n <= 249
            and pos + 2 + n <= len(frame)
            and all(32 <= c < 127 for c in frame[pos + 2 : pos + 2 + n])
        ):
            sites.append(("i16", pos))
        if 1 <= frame[pos] <= 64:
            sites.append(("uvarint", pos))
    return sites


def count_field(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    sites = _count_sites(frame)
    if not sites:
        return lying_size(rng, frame, corpus)
    kind, pos = rng.choice(sites)
    out = bytearray(frame)
    if kind == "i32":
        struct.pack_into(
            ">i", out, pos, rng.choice(INT32_EDGES + (_i32.unpack_from(frame, pos)[0] + 1,))
        )
    elif kind == "i16":
        struct.pack_into(
            ">h",
            out,
            pos,
            rng.choice((0x7FFF, -1, -2, -0x8000, _i16.unpack_from(frame, pos)[0] + 1)),
        )
    else:
        out[pos : pos + 1] = rng.choice(UVARINT_EDGES)
    return with_size(bytes(out[4:]))


# --------------------------------------------------------------------------- record batches

# RecordBatch v2 header offsets (Kafka's DefaultRecordBatch).
B_LENGTH, B_MAGIC, B_CRC, B_ATTRIBUTES, B_RECORDS_COUNT, B_HEADER = 8, 16, 17, 21, 57, 61


@functools.cache
def bombs() -> dict[int, bytes]:
    """Per codec, a small payload that decompresses to a run of zeros just past logcore's
    256 MiB bound (zstd, gzip), or to as much as the format allows in a frame under
    1 MiB (lz4: ~255x; snappy: a raw block that announces 2**32-1 bytes)."""
    mib = bytes(1 << 20)
    n = 257
    z = zstandard.ZstdCompressor(level=1).compressobj()
    zst = b"".join([z.compress(mib) for _ in range(n)] + [z.flush()])
    # gzip: one MiB of zeros deflated after a full flush is the same block every time (no
    # reference crosses a full flush), so the member is that block n times, a final empty
    # block and the RFC 1952 trailer: 250 KiB, built in milliseconds.
    d = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = d.compress(mib) + d.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(n):
        crc = zlib.crc32(mib, crc)
    gz = (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
        + block * n
        + b"\x03\x00"
        + struct.pack("<II", crc, (n << 20) & 0xFFFFFFFF)
    )
    lz = lz4.frame.compress(bytes(32 << 20), block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    raw = b"\xff\xff\xff\xff\x0f" + bytes(cramjam.snappy.compress_raw(bytes(1 << 16)))[1:]
    return {1: gz, 2: raw, 3: lz, 4: zst}


def _garbage_payload(rng: random.Random, codec: int) -> bytes:
    junk = rng.randbytes(rng.randint(0, 300))
    heads = {
        1: b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff",
        2: b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01" + _i32.pack(rng.choice(INT32_EDGES)),
        3: b"\x04\x22\x4d\x18" + bytes([0x60, rng.choice((0x40, 0x50, 0x60, 0x70))]),
        4: b"\x28\xb5\x2f\xfd"
        + bytes([rng.choice((0x00, 0x04, 0xE4))])
        + bytes([rng.randrange(256)]),
    }
    choice = rng.random()
    if choice < 0.3:
        return junk
    if choice < 0.6:
        return heads[codec] + junk
    # Valid compression of garbage records: it passes the codec and reaches the record parser.
    return logcore._compression.compress(codec, junk or b"\x00")


def _reseal(batch: bytearray) -> bytes:
    struct.pack_into(">i", batch, B_LENGTH, len(batch) - 12)
    struct.pack_into(">I", batch, B_CRC, logcore.crc32c(bytes(batch[B_ATTRIBUTES:])))
    return bytes(batch)


def _lying_batch(rng: random.Random, batch: bytes) -> bytes:
    b = bytearray(batch)
    roll = rng.random()
    codec = rng.randint(1, 4)
    if roll < 0.3:  # a compressed section that is garbage, or a bomb
        attrs = (_i16.unpack_from(b, B_ATTRIBUTES)[0] & ~7) | codec
        struct.pack_into(">h", b, B_ATTRIBUTES, attrs)
        payload = bombs()[codec] if rng.random() < 0.25 else _garbage_payload(rng, codec)
        return _reseal(b[:B_HEADER] + bytearray(payload))
    if roll < 0.55:  # the record count lies (resealed: the CRC covers it)
        struct.pack_into(
            ">i",
            b,
            B_RECORDS_COUNT,
            rng.choice(INT32_EDGES + (_i32.unpack_from(b, B_RECORDS_COUNT)[0] + 1,)),
        )
        return _reseal(b)
    if roll < 0.7:  # a record's length or field varints inside the section lie
        if len(b) > B_HEADER:
            pos = rng.randrange(B_HEADER, len(b))
            b[pos : pos + 1] = rng.choice(UVARINT_EDGES + (b"\x01", b"\x7f"))
        return _reseal(b)
    if roll < 0.85:  # the batch length lies (CRC untouched: it does not cover the length)
        struct.pack_into(">i", b, B_LENGTH, rng.choice(INT32_EDGES + (len(b) - 11, len(b) - 13)))
        return bytes(b)
    b[B_MAGIC] = rng.choice((0, 1, 3, 0xFF))
    return bytes(b)


def _produce_parts(frame: bytes) -> tuple[Any, int, bytes] | None:
    """(decoded body, version, header bytes) of a Produce frame, or None."""
    from pylog.protocol.codec import skip_tags

    if api_key(frame) != 0 or len(frame) < 14:
        return None
    version = _i16.unpack_from(frame, 6)[0]
    cls = request_class(0)
    if not cls.VALID_VERSIONS[0] <= version <= cls.VALID_VERSIONS[1]:
        return None
    end = 14 + max(0, _i16.unpack_from(frame, 12)[0])
    if cls.is_flexible(version):
        end = skip_tags(frame, end)
    try:
        body = cls.decode(frame[end:], version)
    except Exception:  # a corpus frame that does not decode: not a batch carrier
        return None
    return body, version, frame[4:end]


def batch(rng: random.Random, frame: Frame, corpus: list[Frame]) -> bytes:
    produces = [f for f in corpus if api_key(f) == 0]
    if api_key(frame) != 0:
        frame = rng.choice(produces)
    parts = _produce_parts(frame)
    if parts is None:
        return bitflip(rng, frame, corpus)
    body, version, hdr = parts
    slots = [
        p
        for t in body.topic_data
        for p in t.partition_data
        if p.records is not None and len(p.records) >= B_HEADER
    ]
    if not slots:
        return bitflip(rng, frame, corpus)
    slot = rng.choice(slots)
    slot.records = _lying_batch(rng, bytes(slot.records))
    return with_size(hdr + body.encode(version))


KINDS: dict[str, tuple[Mutator, int]] = {
    # kind: (mutator, weight)
    "bitflip": (bitflip, 14),
    "bytes": (overwrite_bytes, 10),
    "truncate": (truncate, 8),
    "short": (short, 3),
    "size": (lying_size, 4),
    "header": (header, 10),
    "inter-broker": (inter_broker, 6),
    "count": (count_field, 16),
    "splice": (splice, 6),
    "batch": (batch, 14),
}


def mutate(
    rng: random.Random, corpus: list[Frame], kinds: list[str] | None = None
) -> tuple[str, bytes]:
    """One mutant: (kind, bytes to send)."""
    names = kinds or list(KINDS)
    kind = rng.choices(names, weights=[KINDS[k][1] for k in names])[0]
    frame = rng.choice(corpus)
    return kind, KINDS[kind][0](rng, frame, corpus)
