"""Micro benchmarks of CRC-32C (logcore._crc32c) against the physical limit.

Group per buffer size (64 B, 1 KiB, 16 KiB, 64 KiB, 1 MiB):
- logcore-c: the CPU's CRC32 instruction, 3-way interleaved (include/crc32c.h);
- logcore-c portable: the slice-by-8 fallback of the same module;
- crc32c package (ICRAR/crc32c, hardware too): the reference the tests check against;
- logcore-ref: the pure-Python twin (small sizes only: it is ~1000x slower);
- memcpy: one copy of the same bytes, memory bandwidth in this run.

A separate group measures the GIL hand-off: the same 64 KiB buffer below and above
logcore._crc32c.NOGIL_THRESHOLD cannot be compared directly, so the group compares a
buffer just under the threshold (GIL held) with one just over (GIL released).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m pytest benchmarks/micro/bench_crc32c.py \
        --benchmark-columns=min,median,ops --benchmark-json=/tmp/crc.json
    .venv/bin/python benchmarks/micro/bench_crc32c.py /tmp/crc.json
"""

from __future__ import annotations

import json
import os
import sys

import pytest

lc_crc = pytest.importorskip("logcore._crc32c")
import logcore._ref.crc32c as ref_crc  # noqa: E402

SIZES = {"64B": 64, "1KiB": 1024, "16KiB": 16 * 1024, "64KiB": 64 * 1024, "1MiB": 1 << 20}
_DATA = {name: os.urandom(n) for name, n in SIZES.items()}


def _memcpy(data):
    return len(bytearray(data))


IMPLS = {
    "logcore-c": lc_crc.crc32c,
    "logcore-c portable": lc_crc.crc32c_portable,
    "memcpy": _memcpy,
}
try:
    import crc32c as crc32c_pkg

    IMPLS["crc32c package"] = crc32c_pkg.crc32c
except ImportError:  # pragma: no cover
    pass
IMPLS["logcore-ref"] = ref_crc.crc32c


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", list(IMPLS))
def test_crc32c(benchmark, size, impl):
    if impl == "logcore-ref" and SIZES[size] > 16 * 1024:
        pytest.skip("the pure-Python twin is too slow for large buffers")
    data = _DATA[size]
    benchmark.group = f"crc32c {size}"
    benchmark.extra_info["bytes"] = len(data)
    out = benchmark(IMPLS[impl], data)
    if impl != "memcpy":
        assert out == ref_crc.crc32c(data) if SIZES[size] <= 16 * 1024 else out > 0


@pytest.mark.parametrize("side", ["below", "above"])
def test_nogil_threshold(benchmark, side):
    n = lc_crc.NOGIL_THRESHOLD - 1 if side == "below" else lc_crc.NOGIL_THRESHOLD
    data = os.urandom(n)
    benchmark.group = "crc32c GIL threshold"
    benchmark.extra_info["bytes"] = n
    assert benchmark(lc_crc.crc32c, data) >= 0


def report(path: str) -> str:
    with open(path) as f:
        doc = json.load(f)
    groups: dict[str, dict[str, dict]] = {}
    for b in doc["benchmarks"]:
        if not b["group"].startswith("crc32c"):
            continue  # e.g. the codec groups of bench_codec.py in the same JSON file
        name = b["params"].get("impl") or b["params"].get("side")
        groups.setdefault(b["group"], {})[name] = b
    lines = ["| group | implementation | min time (us) | GB/s | vs memcpy |",
             "| --- | --- | ---: | ---: | ---: |"]
    for group in sorted(groups, key=lambda g: (len(g), g)):
        rows = groups[group]
        memcpy = rows.get("memcpy")
        for impl, b in sorted(rows.items(), key=lambda kv: kv[1]["stats"]["min"]):
            t = b["stats"]["min"]
            gbs = b["extra_info"]["bytes"] / t / 1e9
            vs = f"{memcpy['stats']['min'] / t:.2f}x" if memcpy else ""
            lines.append(f"| {group} | {impl} | {t * 1e6:.2f} | {gbs:.2f} | {vs} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(sys.argv[1]))
