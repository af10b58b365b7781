"""Compression and the batch codec from many threads at once, bytes compared exactly.

The broker's I/O threads, follower fetchers, the log cleaner and client or Spark reader
threads all compress and decompress through logcore._compression at the same time. A
codec context shared by threads (python-zstandard's objects are not thread-safe) gave
wrong bytes, exceptions and crashes; these tests run every codec on many threads with
distinct payloads and compare every result with the one computed on a single thread.
They run with the compiled units and with the pure twin (`make test-pure`).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import logcore
from logcore import _compression as C

THREADS = 8

# (codec, level): Kafka's defaults and a few other levels, so that zstd keeps several
# compressors per thread.
CODEC_LEVELS = [
    (C.GZIP, None),
    (C.GZIP, 1),
    (C.SNAPPY, None),
    (C.LZ4, None),
    (C.LZ4, 1),
    (C.ZSTD, None),
    (C.ZSTD, 1),
    (C.ZSTD, 7),
]
# Small batches and large ones: the libraries release the GIL on large inputs, where
# threads overlap inside the compression code.
SIZES = [1, 900, 7_000, 48_000, 180_000]


def payload(thread: int, n: int, size: int) -> bytes:
    """Compressible bytes, different for every (thread, n)."""
    rnd = random.Random(thread * 1_000_003 + n)
    words = [rnd.randbytes(rnd.randint(1, 16)) for _ in range(48)]
    out = bytearray(b"t%d-n%d|" % (thread, n))
    while len(out) < size:
        out += rnd.choice(words)
    return bytes(out[:size])


def run_threads(work: Callable[[int], list[str]]) -> list[str]:
    """Run work(thread) on THREADS threads started together; return every failure."""
    barrier = threading.Barrier(THREADS)
    results: list[list[str]] = [[] for _ in range(THREADS)]

    def main(t: int) -> None:
        barrier.wait()
        try:
            results[t] = work(t)
        except BaseException as exc:  # a failure must reach the assertion, not stderr
            results[t] = [f"thread {t}: {type(exc).__name__}: {exc}"]

    threads = [threading.Thread(target=main, args=(t,), name=f"codec-{t}") for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a codec thread hangs"
    return [f for r in results for f in r]


def test_every_codec_compresses_and_decompresses_exactly_on_many_threads() -> None:
    # Reference results on this thread first, then every thread redoes its own share
    # concurrently with the others, many times over.
    cases: list[list[tuple[int, int | None, bytes, bytes]]] = []
    for t in range(THREADS):
        mine = []
        for n, (codec, level) in enumerate(CODEC_LEVELS * 2):
            data = payload(t, n, SIZES[(t + n) % len(SIZES)])
            mine.append((codec, level, data, C.compress(codec, data, level)))
        cases.append(mine)

    def work(t: int) -> list[str]:
        failures = []
        for rnd in range(12):
            for codec, level, data, packed in cases[t]:
                name = f"thread {t} round {rnd} {C.NAMES[codec]} level {level} {len(data)} B"
                try:
                    if C.compress(codec, data, level) != packed:
                        failures.append(f"{name}: compressed bytes differ")
                    if C.decompress(codec, packed) != data:
                        failures.append(f"{name}: decompressed bytes differ")
                except Exception as exc:
                    failures.append(f"{name}: {type(exc).__name__}: {exc}")
        return failures

    failures = run_threads(work)
    assert not failures, f"{len(failures)} failures, first: {failures[:5]}"


def test_zstd_keeps_working_after_many_levels_on_one_thread() -> None:
    # Per-thread compressors are kept for a few levels; cycling through more levels
    # starts the set over and must still give each level's exact output.
    data = payload(0, 0, 20_000)
    levels = list(range(-3, 9))
    refs = {lvl: C.compress(C.ZSTD, data, lvl) for lvl in levels}
    for _ in range(3):
        for lvl in levels:
            assert C.compress(C.ZSTD, data, lvl) == refs[lvl]
            assert C.decompress(C.ZSTD, refs[lvl]) == data


def build_batch(t: int, n: int, compression: str) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    records = [
        (b"k%d-%d-%d" % (t, n, i), payload(t, n * 100 + i, 40 + (i * 131) % 3000))
        for i in range(30 + (t + n) % 40)
    ]
    b = logcore.BatchBuilder(compression=compression, base_offset=0, producer_id=-1)
    for i, (key, value) in enumerate(records):
        b.append(value, key=key, timestamp_ms=1_700_000_000_000 + i)
    return b.build(), records


def test_batches_build_and_decode_exactly_on_many_threads() -> None:
    compressions = ["gzip", "snappy", "lz4", "zstd", "none"]
    refs = [
        [build_batch(t, n, compressions[n % len(compressions)]) for n in range(10)]
        for t in range(THREADS)
    ]

    def work(t: int) -> list[str]:
        failures = []
        for rnd in range(3):
            for n, (batch, records) in enumerate(refs[t]):
                name = f"thread {t} round {rnd} batch {n} ({compressions[n % len(compressions)]})"
                try:
                    built, _ = build_batch(t, n, compressions[n % len(compressions)])
                    if built != batch:
                        failures.append(f"{name}: BatchBuilder output differs")
                    (decoded,) = list(logcore.iter_batches(batch))
                    got = [(r.key, r.value) for r in decoded]
                    if got != records:
                        failures.append(f"{name}: iter_batches records differ")
                    cols = logcore.decode_columns(batch)
                    values = bytes(cols.value_data)
                    if values != b"".join(v for _, v in records) or len(cols) != len(records):
                        failures.append(f"{name}: decode_columns values differ")
                    buf = bytearray(batch)
                    info = logcore.validate_for_append(
                        buf, next_offset=1000 * n, max_message_bytes=1 << 24
                    )
                    if info.record_count != len(records) or info.first_offset != 1000 * n:
                        failures.append(f"{name}: validate_for_append answered {info}")
                    (moved,) = list(logcore.iter_batches(buf))
                    moved_records = [(r.offset, r.key, r.value) for r in moved]
                    want = [(1000 * n + i, k, v) for i, (k, v) in enumerate(records)]
                    if moved_records != want:
                        failures.append(f"{name}: records after validate_for_append differ")
                except Exception as exc:
                    failures.append(f"{name}: {type(exc).__name__}: {exc}")
        return failures

    failures = run_threads(work)
    assert not failures, f"{len(failures)} failures, first: {failures[:5]}"
