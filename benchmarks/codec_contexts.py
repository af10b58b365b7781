"""zstd on small batches: a context shared, kept per thread, or made per call.

logcore._compression keeps one zstd compressor (per level) and one decompressor per
thread (python-zstandard's objects are not thread-safe). This measures what that choice
saves over making a context per call, on the batch sizes producers send most.

    .venv/bin/python benchmarks/codec_contexts.py [--sizes 1024,16384]
"""

from __future__ import annotations

import argparse
import random
import threading
import timeit

import zstandard


def sample(n: int) -> bytes:
    rnd = random.Random(n)
    words = [rnd.randbytes(rnd.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < n:
        out += rnd.choice(words)
    return bytes(out[:n])


def measure(size: int, number: int) -> dict[str, float]:
    data = sample(size)
    frame = zstandard.ZstdCompressor(level=3).compress(data)
    local = threading.local()
    shared_c = zstandard.ZstdCompressor(level=3)
    shared_d = zstandard.ZstdDecompressor()

    def compress_local() -> bytes:
        try:
            comp = local.c
        except AttributeError:
            comp = local.c = zstandard.ZstdCompressor(level=3)
        return comp.compress(data)

    def decompress_local() -> bytes:
        try:
            d = local.d
        except AttributeError:
            d = local.d = zstandard.ZstdDecompressor()
        return d.decompressobj().decompress(frame)

    cases = {
        "compress shared (unsafe)": lambda: shared_c.compress(data),
        "compress thread-local": compress_local,
        "compress per call": lambda: zstandard.ZstdCompressor(level=3).compress(data),
        "decompress shared (unsafe)": lambda: shared_d.decompressobj().decompress(frame),
        "decompress thread-local": decompress_local,
        "decompress per call": lambda: (
            zstandard.ZstdDecompressor().decompressobj().decompress(frame)
        ),
    }
    return {
        name: min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6
        for name, fn in cases.items()
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1024,16384", help="batch sizes in bytes, comma-separated")
    p.add_argument("--number", type=int, default=5000, help="calls per timing")
    args = p.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        for name, us in measure(size, args.number).items():
            print(f"{size:>7} B  {name:<28} {us:8.2f} us/call")


if __name__ == "__main__":
    main()
