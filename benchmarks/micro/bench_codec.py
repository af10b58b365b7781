"""Micro benchmarks of logcore's RecordBatch v2 codec against other Python Kafka codecs.

Side by side, in one run (issue 2; C and _ref in one group):
- logcore compiled (logcore._record, _reader, _columns, _append, _builder), logcore's
  pure-Python twin (the same units in logcore._ref),
- aiokafka's C codec (aiokafka.record._crecords: DefaultRecordBatchBuilder /
  DefaultRecordBatch), the fastest Python Kafka codec we know,
- kafka-python's pure-Python codec (kafka.record.default_records).

Workloads (the issue's): 1000 records of 16-byte key + 100-byte value, and 100 records of
16-byte key + 1 KiB value; compression none, lz4, zstd. Values are text-like (words
drawn from a fixed vocabulary, seeded) so that compression does real work.

Groups (one per operation x workload x codec):
- encode:   build a batch from the records (logcore: append loop and append_many).
- decode:   iterate the records of a batch and touch key, value, offset, timestamp.
- columns:  logcore.decode_columns, with value copies and without (``copy_values=False``;
            aiokafka's per-record decode is its baseline).
- validate: logcore.validate_for_append (the broker's produce path), next to the
            physical limits measured in the same run: memcpy of the batch, CRC-32C of the
            batch, and for compressed batches the compression library decompressing the
            same bytes.

Inputs are built outside the timed call; every output is consumed (returned or folded
into a checksum). Run (see benchmarks/README.md):

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m pytest benchmarks/micro/bench_codec.py \
        --benchmark-columns=min,median,ops --benchmark-json=/tmp/codec.json
    .venv/bin/python benchmarks/micro/bench_codec.py /tmp/codec.json   # ratios table
"""

from __future__ import annotations

import json
import random
import sys

import pytest

from logcore import _compression
from logcore._protocols import codec_module

try:
    lc = codec_module("c")
except ImportError:  # pragma: no cover - no compiled build
    lc = None
lc_ref = codec_module("python")

aiokafka_records = pytest.importorskip("aiokafka.record._crecords.default_records")
kafka_records = pytest.importorskip("kafka.record.default_records")

WORKLOADS = {"1000x100B": (1000, 100), "100x1KiB": (100, 1024)}
CODECS = ["none", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000

_WORDS = [
    "".join(random.Random(i).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1 + i % 9))
    for i in range(512)
]


def make_records(count: int, value_size: int, seed: int = 7):
    rnd = random.Random(seed)
    keys, values = [], []
    for i in range(count):
        keys.append(f"key-{i:012d}".encode())  # 16 bytes
        text = []
        size = 0
        while size < value_size:
            w = rnd.choice(_WORDS)
            text.append(w)
            size += len(w) + 1
        values.append(" ".join(text).encode()[:value_size])
    stamps = [BASE_TS + i for i in range(count)]
    return keys, values, stamps


_CACHE: dict = {}


def fixture_data(workload: str, codec: str):
    """(keys, values, stamps, batch bytes) for a workload, built once per session."""
    key = (workload, codec)
    if key not in _CACHE:
        n, size = WORKLOADS[workload]
        keys, values, stamps = make_records(n, size)
        b = lc_ref.BatchBuilder(compression=codec)
        b.append_many(values, keys=keys, timestamps_ms=stamps)
        _CACHE[key] = (keys, values, stamps, b.build())
    return _CACHE[key]


def _need_c():
    if lc is None:
        pytest.skip("logcore's compiled extensions are not built")


params = pytest.mark.parametrize(
    "workload, codec", [(w, c) for w in WORKLOADS for c in CODECS], ids=lambda v: str(v)
)


def _group(request, op):
    return f"{op} {request.node.callspec.params['workload']} {request.node.callspec.params['codec']}"


# ---------------------------------------------------------------------------------------
# encode
# ---------------------------------------------------------------------------------------


def _encode_logcore(mod, keys, values, stamps, codec):
    b = mod.BatchBuilder(compression=codec)
    append = b.append
    for i in range(len(values)):
        append(values[i], keys[i], stamps[i])
    return b.build()


def _encode_logcore_many(mod, keys, values, stamps, codec):
    b = mod.BatchBuilder(compression=codec)
    b.append_many(values, keys, stamps)
    return b.build()


def _encode_kafka(builder_cls, keys, values, stamps, codec):
    b = builder_cls(2, CODEC_IDS[codec], 0, -1, -1, -1, 1 << 30)
    append = b.append
    for i in range(len(values)):
        append(i, stamps[i], keys[i], values[i], [])
    return b.build()


ENCODERS = {
    "logcore-c append": lambda k, v, t, c: _encode_logcore(lc, k, v, t, c),
    "logcore-c append_many": lambda k, v, t, c: _encode_logcore_many(lc, k, v, t, c),
    "logcore-ref append": lambda k, v, t, c: _encode_logcore(lc_ref, k, v, t, c),
    "aiokafka-c": lambda k, v, t, c: _encode_kafka(
        aiokafka_records.DefaultRecordBatchBuilder, k, v, t, c
    ),
    "kafka-python": lambda k, v, t, c: _encode_kafka(
        kafka_records.DefaultRecordBatchBuilder, k, v, t, c
    ),
}


@params
@pytest.mark.parametrize("impl", [*ENCODERS, "limit compress (library)"])
def test_encode(benchmark, request, workload, codec, impl):
    if impl.startswith("logcore-c"):
        _need_c()
    benchmark.group = _group(request, "encode")
    keys, values, stamps, _ = fixture_data(workload, codec)
    benchmark.extra_info.update(records=len(values), bytes=sum(map(len, values)) + 16 * len(values))
    if impl == "limit compress (library)":
        # the compression library alone on the same record bytes, at Kafka's default
        # level (what every compressed encoder here must also do)
        cid = CODEC_IDS[codec]
        if cid == 0:
            pytest.skip("nothing to compress")
        section = fixture_data(workload, "none")[3][61:]
        out = benchmark(_compression.compress, cid, section)
        assert len(out) > 0
        return
    out = benchmark(ENCODERS[impl], keys, values, stamps, codec)
    assert len(out) > 61


def test_encode_uncompressed_identical_to_aiokafka():
    """The fairness check behind the encode group: same inputs, same bytes."""
    _need_c()
    keys, values, stamps, _ = fixture_data("1000x100B", "none")
    ours = _encode_logcore(lc, keys, values, stamps, "none")
    assert ours == bytes(_encode_kafka(aiokafka_records.DefaultRecordBatchBuilder, keys, values, stamps, "none"))


# ---------------------------------------------------------------------------------------
# decode (per record)
# ---------------------------------------------------------------------------------------


def _decode_logcore(mod, data):
    total = 0
    for r in mod.RecordBatch(data):
        total += len(r.key) + len(r.value) + r.offset + r.timestamp
    return total


def _decode_kafka(batch_cls, data):
    total = 0
    for r in batch_cls(data):
        total += len(r.key) + len(r.value) + r.offset + r.timestamp
    return total


DECODERS = {
    "logcore-c": lambda d: _decode_logcore(lc, d),
    "logcore-ref": lambda d: _decode_logcore(lc_ref, d),
    "aiokafka-c": lambda d: _decode_kafka(aiokafka_records.DefaultRecordBatch, d),
    "kafka-python": lambda d: _decode_kafka(kafka_records.DefaultRecordBatch, d),
}


@params
@pytest.mark.parametrize("impl", list(DECODERS))
def test_decode(benchmark, request, workload, codec, impl):
    if impl.startswith("logcore-c"):
        _need_c()
    benchmark.group = _group(request, "decode")
    keys, values, _, data = fixture_data(workload, codec)
    benchmark.extra_info.update(records=len(values), bytes=len(data))
    expected = _decode_logcore(lc_ref, data)
    assert benchmark(DECODERS[impl], data) == expected


# ---------------------------------------------------------------------------------------
# columns
# ---------------------------------------------------------------------------------------


def _columns(mod, data):
    cols = mod.decode_columns(data)
    return cols.num_records + int(cols.value_offsets[-1])


def _columns_views(mod, data):
    cols = mod.decode_columns(data, copy_values=False)
    return cols.num_records + int(cols.value_lengths[-1])


COLUMNS = {
    "logcore-c decode_columns": lambda d: _columns(lc, d),
    "logcore-c decode_columns copy_values=False": lambda d: _columns_views(lc, d),
    "logcore-ref decode_columns": lambda d: _columns(lc_ref, d),
    "aiokafka-c per-record decode": DECODERS["aiokafka-c"],
}


@params
@pytest.mark.parametrize("impl", list(COLUMNS))
def test_columns(benchmark, request, workload, codec, impl):
    if impl.startswith("logcore-c"):
        _need_c()
    benchmark.group = _group(request, "columns")
    _, values, _, data = fixture_data(workload, codec)
    benchmark.extra_info.update(records=len(values), bytes=len(data))
    assert benchmark(COLUMNS[impl], data) > 0


# ---------------------------------------------------------------------------------------
# validate_for_append and the physical limits
# ---------------------------------------------------------------------------------------


def _memcpy(buf):
    return len(bytes(buf))  # one full copy of the batch


def _crc(buf):
    return lc_crc(memoryview(buf)[21:])


def _decompress_only(codec):
    cid = CODEC_IDS[codec]
    if cid == 3:
        import lz4.frame

        return lambda buf: len(lz4.frame.decompress(memoryview(buf)[61:]))
    if cid == 4:
        import zstandard

        d = zstandard.ZstdDecompressor()
        return lambda buf: len(d.decompress(memoryview(buf)[61:], max_output_size=1 << 28))
    return None


try:
    from logcore._crc32c import crc32c as lc_crc
except ImportError:  # pragma: no cover
    lc_crc = None


VALIDATORS = {
    "logcore-c validate_for_append": lambda buf: lc.validate_for_append(
        buf, next_offset=1000, max_message_bytes=1 << 30
    ).record_count,
    "logcore-c validate_for_append log_append_time": lambda buf: lc.validate_for_append(
        buf, next_offset=1000, max_message_bytes=1 << 30, log_append_time_ms=BASE_TS
    ).record_count,
    "logcore-ref validate_for_append": lambda buf: lc_ref.validate_for_append(
        buf, next_offset=1000, max_message_bytes=1 << 30
    ).record_count,
    "limit memcpy": _memcpy,
    "limit crc32c": _crc,
    "limit decompress (library)": "decompress",
    "compression library _compression.decompress": "decompress-bounded",
}


@params
@pytest.mark.parametrize("impl", list(VALIDATORS))
def test_validate(benchmark, request, workload, codec, impl):
    if impl.startswith("logcore-c") or impl == "limit crc32c":
        _need_c()
    fn = VALIDATORS[impl]
    if fn == "decompress":
        fn = _decompress_only(codec)
    elif fn == "decompress-bounded":
        cid = CODEC_IDS[codec]
        fn = (lambda buf: len(_compression.decompress(cid, memoryview(buf)[61:]))) if cid else None
    if fn is None:
        pytest.skip("no decompression for an uncompressed batch")
    benchmark.group = _group(request, "validate")
    _, values, _, data = fixture_data(workload, codec)
    buf = bytearray(data)
    benchmark.extra_info.update(records=len(values), bytes=len(data))
    assert benchmark(fn, buf) > 0


# ---------------------------------------------------------------------------------------
# Report: records/s, MB/s and ratios from a --benchmark-json file
# ---------------------------------------------------------------------------------------

BASELINE = {
    "encode": "aiokafka-c",
    "decode": "aiokafka-c",
    "columns": "aiokafka-c per-record decode",
}


def report(path: str) -> str:
    """Markdown tables: per group, each implementation's records/s (min time), MB/s of
    batch bytes, and its ratio to the group's baseline (aiokafka's C codec) or, for the
    validate group, to the physical limits measured in the same run."""
    with open(path) as f:
        doc = json.load(f)
    groups: dict[str, dict[str, dict]] = {}
    for b in doc["benchmarks"]:
        if b["group"].split()[0] not in ("encode", "decode", "columns", "validate"):
            continue  # e.g. the CRC groups of bench_crc32c.py in the same JSON file
        groups.setdefault(b["group"], {})[b["params"]["impl"]] = b
    lines = []
    for group in sorted(groups):
        op = group.split()[0]
        rows = groups[group]
        lines.append(f"\n**{group}**\n")
        lines.append("| implementation | min time (us) | records/s | MB/s | ratio |")
        lines.append("| --- | ---: | ---: | ---: | --- |")
        base = rows.get(BASELINE.get(op, ""))
        for impl, b in sorted(rows.items(), key=lambda kv: kv[1]["stats"]["min"]):
            t = b["stats"]["min"]
            recs = b["extra_info"].get("records", 0) / t
            mbs = b["extra_info"].get("bytes", 0) / t / 1e6
            if op == "validate":
                limits = [
                    f"{rows[lim]['stats']['min'] / t:.2f}x {lim.split(' ', 1)[1]}"
                    for lim in ("limit memcpy", "limit crc32c", "limit decompress (library)")
                    if lim in rows and lim != impl
                ]
                ratio = ", ".join(limits)
            elif base is not None:
                ratio = f"{base['stats']['min'] / t:.2f}x {BASELINE[op]}"
                lim = rows.get("limit compress (library)")
                if lim is not None and impl != "limit compress (library)":
                    ratio += f", {lim['stats']['min'] / t:.2f}x compress (library)"
            else:
                ratio = ""
            lines.append(f"| {impl} | {t * 1e6:.1f} | {recs / 1e6:.2f}M | {mbs:.0f} | {ratio} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(sys.argv[1]))
