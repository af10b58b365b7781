"""Batch compression exactly as Kafka writes it, shared by the compiled codec and _ref.

Codec ids are the low three bits of a batch's attributes (DefaultRecordBatch.java):

    0 none | 1 gzip | 2 snappy | 3 lz4 | 4 zstd

Formats (Kafka's `compression/` package, KIP-57, KIP-110, KIP-390):
- gzip: an RFC 1952 gzip member; Kafka's default level is Deflater's 6.
- snappy: the xerial ("snappy-java") stream framing Java clients write:
      magic  b"\\x82SNAPPY\\x00" (8 bytes) | version int32 (1) | compatible int32 (1)
      then blocks: length int32 (big-endian) | raw snappy block
  Readers accept both that framing and a bare raw snappy block (older librdkafka).
- lz4: the LZ4 frame format (independent 64 KiB blocks, as KafkaLZ4BlockOutputStream).
- zstd: a zstd frame; Kafka's default level is 3.

Thread safety: every function here may run on many threads at once (the broker's I/O
threads, follower fetchers, the log cleaner, client and Spark reader threads). zlib, lz4
and snappy get a fresh context per call; zstd contexts are per thread (see ``_zstd``).

Every decompressor is bounded: output beyond ``MAX_DECOMPRESSED_BYTES`` is refused with
CorruptRecordError instead of allocating without limit (a decompression bomb).
"""

from __future__ import annotations

import struct
import threading
import zlib

import cramjam
import lz4.frame
import zstandard

from .errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {name: i for i, name in enumerate(NAMES)}

# Largest record section a single batch may decompress to.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024

# A produced batch is decompressed once, to be validated, by a broker that has not stored
# it yet: a few kilobytes of zstd or gzip that inflate to MAX_DECOMPRESSED_BYTES (a
# decompression bomb) would cost every such request a third of a second of CPU and that
# much memory. The produce path allows APPEND_RATIO times the batch's compressed size, and
# never less than APPEND_FLOOR_BYTES: far above what clients write (a librdkafka batch is
# at most batch.size = 1 MB before compression; a Java producer's batch.size counts
# compressed bytes, and real data compresses 2-20x), far below what a bomb asks for.
APPEND_RATIO = 64
APPEND_FLOOR_BYTES = 64 * 1024 * 1024


def append_limit(compressed_size: int) -> int:
    """The decompressed size a produced batch of ``compressed_size`` bytes may reach."""
    return min(MAX_DECOMPRESSED_BYTES, max(APPEND_FLOOR_BYTES, APPEND_RATIO * compressed_size))

DEFAULT_LEVELS = {GZIP: 6, SNAPPY: None, LZ4: 9, ZSTD: 3}
# Valid levels (KIP-390): gzip 1-9, lz4 1-17, zstd -131072..22; snappy has none.
LEVEL_RANGES = {GZIP: (1, 9), LZ4: (1, 17), ZSTD: (-131072, 22)}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size

_LZ4_MAX_RATIO = 256  # LZ4 expands at most ~255x (a match length byte of 255 per byte)
_LZ4_STEP = 1 << 20  # output slice asked of python-lz4 per call
_ZSTD_MAX_RATIO = 1 << 16  # bound on zstd output bytes per input byte (RLE blocks)

# python-zstandard's ZstdCompressor and ZstdDecompressor (and the decompressobj() of a
# decompressor, which uses its parent's context) are not thread-safe: one object shared
# by threads returns wrong bytes, raises, or crashes the process. Each thread keeps its
# own. Not one per call: making a context costs more than the work on a small batch
# (benchmarks/RESULTS.md, "zstd contexts": at 1 KiB, compress 3.8 us with the thread's
# context against 12.0 us with a new one, decompress 1.5 us against 16.4 us; the
# thread-local lookup itself adds ~0.1 us over a shared object). A thread never runs two zstd calls at once (nothing here yields
# or re-enters), so one context per thread is enough. Pool threads live as long as the
# process; their contexts go with them when they exit.
_zstd = threading.local()
_ZSTD_LEVELS_KEPT = 4  # compressors one thread keeps; more levels in use start over


def codec_id(name: str) -> int:
    """Map a compression name ("none", "gzip", "snappy", "lz4", "zstd") to its id."""
    try:
        return CODEC_IDS[name]
    except KeyError:
        raise ValueError(
            f"unknown compression {name!r}; expected one of {', '.join(NAMES)}"
        ) from None


def check_level(codec: int, level: int | None) -> int | None:
    """Validate a compression level for a codec; None means the codec's default."""
    if level is None or codec == NONE:
        return DEFAULT_LEVELS.get(codec)
    if codec == SNAPPY:
        raise ValueError("snappy has no compression levels")
    lo, hi = LEVEL_RANGES[codec]
    if not lo <= level <= hi:
        raise ValueError(f"{NAMES[codec]} level {level} out of range [{lo}, {hi}]")
    return level


def compress(codec: int, data, level: int | None = None) -> bytes:
    """Compress a batch's record section as Kafka does for `codec`."""
    if codec == GZIP:
        c = zlib.compressobj(level if level is not None else 6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            parts.append(struct.pack(">i", len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            compression_level=level if level is not None else 9,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        return _zstd_compressor(level if level is not None else 3).compress(data)
    if codec == NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec id {codec}")


def decompress(codec: int, data, *, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress a batch's record section; raise CorruptRecordError on bad input.

    Args:
        codec: codec id 1-4.
        data: the compressed bytes (any buffer).
        limit: refuse output larger than this many bytes.

    Raises:
        CorruptRecordError: malformed compressed data, unknown codec, or output over limit.
    """
    try:
        if codec == GZIP:
            return _gunzip(data, limit)
        if codec == SNAPPY:
            return _unsnappy(data, limit)
        if codec == LZ4:
            return _unlz4(data, limit)
        if codec == ZSTD:
            return _unzstd(data, limit)
    except CorruptRecordError:
        raise
    except Exception as exc:  # every library raises its own error type on garbage
        raise CorruptRecordError(f"invalid {NAMES[codec]} data: {exc}") from None
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _too_big(name: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"{name} data decompresses to more than {limit} bytes")


def _gunzip(data, limit: int) -> bytes:
    d = zlib.decompressobj(31)
    out = d.decompress(data, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise _too_big("gzip", limit)
    if not d.eof:
        raise CorruptRecordError("truncated gzip data")
    return out


def _unsnappy(data, limit: int) -> bytes:
    view = memoryview(data).cast("B")
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_raw_block(view, limit)
    if len(view) < 16:
        raise CorruptRecordError("truncated xerial snappy header")
    pos, parts, total = 16, [], 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError(f"truncated xerial snappy block length at {pos}")
        (n,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if n < 0 or pos + n > len(view):
            raise CorruptRecordError(f"xerial snappy block of {n} bytes overruns the data at {pos}")
        block = _snappy_raw_block(view[pos : pos + n], limit - total)
        total += len(block)
        parts.append(block)
        pos += n
    return b"".join(parts)


def _snappy_raw_block(view, limit: int) -> bytes:
    # A raw snappy block starts with its uncompressed length as an unsigned varint:
    # check it against the limit before letting the library allocate.
    n, shift, i = 0, 0, 0
    while True:
        if i >= len(view) or i >= 5:
            raise CorruptRecordError("invalid snappy block length")
        b = view[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        shift += 7
    if n > limit:
        raise _too_big("snappy", limit)
    return bytes(cramjam.snappy.decompress_raw(view))


def _unlz4(data, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    if len(data) * _LZ4_MAX_RATIO + _LZ4_STEP <= limit:
        # LZ4 cannot expand more than ~255x, so this frame cannot pass the limit:
        # decompress it in one call at the library's own speed.
        out = d.decompress(data)
        if not d.eof:
            raise CorruptRecordError("truncated lz4 frame")
        return out
    # python-lz4 allocates max_length up front, so ask for bounded slices and keep
    # draining the decompressor's internal buffer until the frame ends.
    step = min(limit + 1, _LZ4_STEP)
    out = bytearray(d.decompress(data, max_length=step))
    while not d.eof and not d.needs_input:
        out += d.decompress(b"", max_length=step)
        if len(out) > limit:
            raise _too_big("lz4", limit)
    if len(out) > limit:
        raise _too_big("lz4", limit)
    if not d.eof:
        raise CorruptRecordError("truncated lz4 frame")
    return bytes(out)


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    """This thread's zstd compressor for `level`."""
    try:
        kept: dict[int, zstandard.ZstdCompressor] = _zstd.compressors
    except AttributeError:
        kept = _zstd.compressors = {}
    comp = kept.get(level)
    if comp is None:
        if len(kept) >= _ZSTD_LEVELS_KEPT:
            kept.clear()
        comp = kept[level] = zstandard.ZstdCompressor(level=level)
    return comp


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    """This thread's zstd decompressor."""
    try:
        return _zstd.decompressor
    except AttributeError:
        d = _zstd.decompressor = zstandard.ZstdDecompressor()
        return d


def _unzstd(data, limit: int) -> bytes:
    # A zstd decompression object emits everything a slice of input yields, so the
    # input slice is sized from the remaining budget: one input byte can yield at most
    # _ZSTD_MAX_RATIO output bytes (an RLE block: 4 bytes for up to 128 KiB), which
    # keeps a bomb from inflating far past the limit before the check sees it.
    view = memoryview(data).cast("B")
    bound = _zstd_output_bound(view)
    if bound is not None and bound <= limit:
        # The block headers promise no more than the limit: one call, library speed.
        d = _zstd_decompressor().decompressobj()
        whole = d.decompress(view)
        if not d.eof:
            raise CorruptRecordError("truncated zstd frame")
        if len(whole) > limit:  # only if the headers lied; the library checks blocks too
            raise _too_big("zstd", limit)
        return whole
    d = _zstd_decompressor().decompressobj()
    out = bytearray()
    pos, n = 0, len(view)
    while pos < n and not d.eof:
        step = max(1, (limit + 1 - len(out)) // _ZSTD_MAX_RATIO)
        out += d.decompress(view[pos : pos + step])
        pos += step
        if len(out) > limit:
            raise _too_big("zstd", limit)
    if not d.eof:
        raise CorruptRecordError("truncated zstd frame")
    return bytes(out)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024


def _zstd_output_bound(view) -> int | None:
    """Upper bound on what zstd frames in `view` decompress to, from headers alone.

    Walks frame and block headers (RFC 8878 sections 3.1.1-3.1.1.2): raw and RLE blocks
    state their regenerated size; a compressed block regenerates at most 128 KiB.
    Returns None when the headers cannot be walked (the library then reports the error
    on the bounded slow path).
    """
    n, pos, total = len(view), 0, 0
    try:
        while pos < n:
            magic = int.from_bytes(view[pos : pos + 4], "little")
            if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame
                pos += 8 + int.from_bytes(view[pos + 4 : pos + 8], "little")
                continue
            if magic != _ZSTD_MAGIC:
                return None
            fhd = view[pos + 4]
            pos += 5
            single_segment = (fhd >> 5) & 1
            pos += 0 if single_segment else 1  # window descriptor
            pos += (0, 1, 2, 4)[fhd & 3]  # dictionary id
            pos += ((1 if single_segment else 0), 2, 4, 8)[fhd >> 6]  # content size
            while True:
                if pos + 3 > n:
                    return None
                hdr = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
                pos += 3
                btype, bsize = (hdr >> 1) & 3, hdr >> 3
                if btype == 0:  # raw
                    total += bsize
                    pos += bsize
                elif btype == 1:  # RLE: one byte repeated bsize times
                    total += bsize
                    pos += 1
                elif btype == 2:  # compressed
                    total += _ZSTD_BLOCK_MAX
                    pos += bsize
                else:
                    return None
                if hdr & 1:  # last block
                    break
            if fhd & 4:  # content checksum
                pos += 4
    except IndexError:
        return None
    return total if pos == n else None
