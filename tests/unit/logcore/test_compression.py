"""logcore._compression: formats exactly as Kafka writes them, read by other
implementations, and bounded decompression.

Format facts checked here (Kafka's compression package; KIP-57 for lz4; snappy-java's
SnappyOutputStream for the xerial framing; RFC 1952 for gzip; RFC 8878 for zstd).
"""

from __future__ import annotations

import gzip
import random
import struct
import tracemalloc
import warnings

import cramjam
import lz4.frame
import pytest
import zstandard

import logcore
from logcore import _compression as C

# kafka-python 3.0.12 warns (DeprecationWarning, importlib.resources.read_text) while its
# package imports; warnings are errors in this suite, so import it once, quietly.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec  # noqa: F401

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def sample(n: int, seed: int = 0) -> bytes:
    """Compressible but not trivial data."""
    rnd = random.Random(seed)
    words = [rnd.randbytes(rnd.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < n:
        out += rnd.choice(words)
    return bytes(out[:n])


SIZES = [0, 1, 100, 32 * 1024, 32 * 1024 + 1, 65536, 65537, 200_000]


# --------------------------------------------------------------------------- names/levels


def test_codec_ids_are_kafkas() -> None:
    assert C.NAMES == ("none", "gzip", "snappy", "lz4", "zstd")
    assert [C.codec_id(n) for n in C.NAMES] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        C.codec_id("brotli")


def test_check_level() -> None:
    assert C.check_level(C.GZIP, None) == 6
    assert C.check_level(C.ZSTD, None) == 3
    assert C.check_level(C.LZ4, None) == 9
    assert C.check_level(C.ZSTD, 22) == 22
    for codec, bad in [(C.GZIP, 0), (C.GZIP, 10), (C.LZ4, 18), (C.ZSTD, 23), (C.SNAPPY, 1)]:
        with pytest.raises(ValueError):
            C.check_level(codec, bad)


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_round_trip(codec: str, size: int) -> None:
    data = sample(size, size)
    cid = CODEC_IDS[codec]
    blob = C.compress(cid, data)
    assert C.decompress(cid, blob) == data
    assert C.decompress(cid, memoryview(blob)) == data
    assert C.decompress(cid, bytearray(blob)) == data


def test_none_is_identity() -> None:
    assert C.compress(C.NONE, b"abc") == b"abc"


# --------------------------------------------------------------------------- gzip


def test_gzip_is_an_rfc1952_member() -> None:
    data = sample(10_000)
    blob = C.compress(C.GZIP, data)
    assert blob[:3] == b"\x1f\x8b\x08"  # magic, CM = deflate
    assert gzip.decompress(blob) == data
    # ISIZE trailer: input length mod 2**32, little-endian
    assert struct.unpack("<I", blob[-4:])[0] == len(data)


def test_gzip_reads_stdlib_output() -> None:
    data = sample(5000)
    assert C.decompress(C.GZIP, gzip.compress(data, compresslevel=1)) == data


def test_gzip_levels_change_output() -> None:
    data = sample(50_000)
    assert gzip.decompress(C.compress(C.GZIP, data, 1)) == data
    assert gzip.decompress(C.compress(C.GZIP, data, 9)) == data


# --------------------------------------------------------------------------- snappy


def test_snappy_xerial_framing_bytes() -> None:
    data = sample(100_000)  # more than three 32 KiB blocks
    blob = C.compress(C.SNAPPY, data)
    assert blob[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", blob[8:16]) == (1, 1)  # version, minimum compatible
    pos, blocks = 16, []
    while pos < len(blob):
        (n,) = struct.unpack_from(">i", blob, pos)
        pos += 4
        blocks.append(bytes(cramjam.snappy.decompress_raw(blob[pos : pos + n])))
        pos += n
    assert pos == len(blob)
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_block_and_client_framing() -> None:
    from kafka.codec import snappy_encode

    data = sample(70_000)
    assert C.decompress(C.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert C.decompress(C.SNAPPY, snappy_encode(data)) == data  # kafka-python's xerial


def test_snappy_output_read_by_clients() -> None:
    from aiokafka.codec import snappy_decode as aio_decode
    from kafka.codec import snappy_decode as kp_decode

    data = sample(70_000)
    blob = C.compress(C.SNAPPY, data)
    assert kp_decode(blob) == data
    assert aio_decode(blob) == data


@pytest.mark.parametrize(
    "blob",
    [
        b"\x82SNAPPY\x00\x00\x00\x00\x01",  # truncated header
        b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"\x00\x00",  # truncated length
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 100) + b"abc",  # block overruns
        b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, -1),  # negative length
        b"\xff\xff\xff\xff\xff\xff",  # raw: over-long length varint
    ],
)
def test_snappy_garbage_raises_corrupt(blob) -> None:
    with pytest.raises(logcore.CorruptRecordError):
        C.decompress(C.SNAPPY, blob)


# --------------------------------------------------------------------------- lz4


def test_lz4_frame_header_as_kafka_writes_it() -> None:
    data = sample(200_000)
    blob = C.compress(C.LZ4, data)
    assert blob[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic, little-endian 0x184D2204
    flg, bd = blob[4], blob[5]
    assert flg >> 6 == 0b01  # frame version 1
    assert flg & 0x20  # independent blocks (KIP-57: Kafka does not link blocks)
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 0x7 == 4  # 64 KiB maximum block size
    assert lz4.frame.decompress(blob) == data


def test_lz4_read_by_clients_and_reads_theirs() -> None:
    from aiokafka.codec import lz4_decode as aio_decode
    from aiokafka.codec import lz4_encode as aio_encode
    from kafka.codec import lz4_decode as kp_decode
    from kafka.codec import lz4_encode as kp_encode

    data = sample(150_000)
    blob = C.compress(C.LZ4, data)
    assert kp_decode(blob) == data
    assert aio_decode(blob) == data
    assert C.decompress(C.LZ4, kp_encode(data)) == data
    assert C.decompress(C.LZ4, aio_encode(data)) == data


# --------------------------------------------------------------------------- zstd


def test_zstd_frame_and_default_level() -> None:
    data = sample(100_000)
    blob = C.compress(C.ZSTD, data)
    assert blob[:4] == b"\x28\xb5\x2f\xfd"  # zstd frame magic 0xFD2FB528
    assert zstandard.ZstdDecompressor().decompress(blob) == data
    # Kafka's default level is 3
    assert blob == zstandard.ZstdCompressor(level=3).compress(data)


def test_zstd_reads_streamed_frames_without_content_size() -> None:
    # zstd-jni (the Java client) streams: the frame header carries no content size.
    data = sample(300_000)
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    blob = cobj.compress(data) + cobj.flush()
    assert C.decompress(C.ZSTD, blob) == data


def test_zstd_read_by_clients() -> None:
    from aiokafka.codec import zstd_decode as aio_decode
    from kafka.codec import zstd_decode as kp_decode

    data = sample(50_000)
    blob = C.compress(C.ZSTD, data)
    assert kp_decode(blob) == data
    assert aio_decode(blob) == data


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_limit_is_enforced(codec: str) -> None:
    cid = CODEC_IDS[codec]
    data = sample(100_000)
    blob = C.compress(cid, data)
    assert C.decompress(cid, blob, limit=len(data)) == data
    with pytest.raises(logcore.CorruptRecordError):
        C.decompress(cid, blob, limit=len(data) - 1)


def _bomb(codec: str, size: int) -> bytes:
    """A small blob that expands to `size` zero bytes, built without holding them all."""
    chunk = bytes(1 << 20)
    if codec == "zstd":
        c = zstandard.ZstdCompressor(level=1).compressobj()
        return b"".join([c.compress(chunk) for _ in range(size >> 20)] + [c.flush()])
    if codec == "gzip":
        import zlib

        c = zlib.compressobj(1, zlib.DEFLATED, 31)
        return b"".join([c.compress(chunk) for _ in range(size >> 20)] + [c.flush()])
    if codec == "lz4":
        c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
        parts = [c.begin()] + [c.compress(chunk) for _ in range(size >> 20)] + [c.flush()]
        return b"".join(parts)
    raise ValueError(codec)


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_bomb_is_refused_without_inflating(codec: str) -> None:
    blob = _bomb(codec, 128 << 20)
    assert len(blob) < (1 << 20)

    def run() -> None:
        with pytest.raises(logcore.CorruptRecordError):
            C.decompress(CODEC_IDS[codec], blob, limit=1 << 20)

    assert _peak_bytes(run) < 16 << 20


def test_snappy_bomb_is_refused_without_inflating() -> None:
    # One raw block whose length prefix claims 100 MB is refused before allocating.
    claim = 100_000_000
    prefix = bytearray()
    n = claim
    while n >= 0x80:
        prefix.append((n & 0x7F) | 0x80)
        n >>= 7
    prefix.append(n)
    blob = bytes(prefix) + b"\x00" * 10

    def run() -> None:
        with pytest.raises(logcore.CorruptRecordError):
            C.decompress(C.SNAPPY, blob, limit=1 << 20)

    assert _peak_bytes(run) < 16 << 20


def test_zstd_bomb_is_refused_without_inflating() -> None:
    blob = _bomb("zstd", 128 << 20)
    assert len(blob) < (1 << 20)

    def run() -> None:
        with pytest.raises(logcore.CorruptRecordError):
            C.decompress(C.ZSTD, blob, limit=1 << 20)

    assert _peak_bytes(run) < 16 << 20


# --------------------------------------------------------------------------- garbage


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_garbage_and_truncation_raise_corrupt(codec: str) -> None:
    cid = CODEC_IDS[codec]
    blob = C.compress(cid, sample(20_000))
    rnd = random.Random(cid)
    candidates = [b"", b"\x00", rnd.randbytes(100), blob[: len(blob) // 2], blob[:-1]]
    for bad in candidates:
        try:
            out = C.decompress(cid, bad)
        except logcore.CorruptRecordError:
            continue
        # A raw snappy block may legitimately decode garbage; it must still be bounded.
        assert len(out) <= C.MAX_DECOMPRESSED_BYTES


def test_unknown_codec_raises_corrupt() -> None:
    for cid in (5, 6, 7):
        with pytest.raises(logcore.CorruptRecordError):
            C.decompress(cid, b"abc")


def test_lz4_small_frame_allocates_little() -> None:
    blob = C.compress(C.LZ4, sample(1000))
    assert _peak_bytes(lambda: C.decompress(C.LZ4, blob)) < 16 << 20


# --------------------------------------------------------------------------- produce path


def _batch_with_section(codec: str, section: bytes) -> bytearray:
    """A record batch of one record whose (compressed) record section is ``section``, with
    its length and CRC-32C made right, so that it reaches the decompressor."""
    b = logcore.BatchBuilder(compression=codec)
    b.append(b"v", key=b"k", timestamp_ms=1)
    batch = bytearray(b.build()[:61]) + section
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, logcore.crc32c(bytes(batch[21:])))
    return batch


def test_append_limit_is_a_ratio_with_a_floor() -> None:
    assert C.append_limit(1000) == C.APPEND_FLOOR_BYTES
    assert C.append_limit(2 << 20) == C.APPEND_RATIO * (2 << 20)
    assert C.append_limit(64 << 20) == C.MAX_DECOMPRESSED_BYTES


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_a_produced_bomb_is_refused_at_the_append_limit(codec: str) -> None:
    """A produced batch may decompress to APPEND_RATIO x its size (at least the floor), not
    to the 256 MiB a read allows: a few KiB that inflate to 128 MiB are refused having
    produced no more than the floor."""
    batch = _batch_with_section(codec, _bomb(codec, 128 << 20))
    assert len(batch) < (1 << 20)

    def run() -> None:
        with pytest.raises(logcore.CorruptRecordError, match=f"more than {C.APPEND_FLOOR_BYTES}"):
            logcore.validate_for_append(batch, next_offset=0, max_message_bytes=1 << 20)

    assert _peak_bytes(run) < 2 * C.APPEND_FLOOR_BYTES + (16 << 20)
    # The same bytes read back (a consumer's bound) decompress past the produce limit.
    reread = bytes(_batch_with_section(codec, _bomb(codec, 96 << 20)))
    with pytest.raises(logcore.CorruptRecordError) as read_error:
        logcore.RecordBatch(reread).validate()
    assert f"more than {C.APPEND_FLOOR_BYTES}" not in str(read_error.value)
