"""Interop with independent RecordBatch v2 implementations (issue 2, "Tests").

- Golden batches captured from aiokafka and kafka-python (tests/vectors/batches.json,
  see tests/vectors/make_vectors.py) decode with logcore to the records they were built
  from.
- Live: aiokafka (pure-Python and C) and kafka-python encode, logcore decodes; logcore
  encodes, they decode (DefaultRecordBatch of each, and their MemoryRecords walkers);
  every codec; keys, headers, null keys and values; transactional and control batches.
- An uncompressed batch built by logcore is byte-identical to aiokafka's (and to
  kafka-python's once the leader epoch is the 0 it writes).

Client quirks handled here: kafka-python writes partition_leader_epoch 0 (aiokafka -1);
both fall back to an uncompressed batch when compression does not shrink it (inputs here
are compressible, and the codec is asserted); kafka-python's ControlRecord parses a
4-byte control key; importing kafka-python 3.0.12 emits a DeprecationWarning.
"""

from __future__ import annotations

import json
import pathlib
import struct
import warnings

import pytest

import logcore

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KpBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
    from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
    from kafka.record.memory_records import MemoryRecordsBuilder as KpMemoryRecordsBuilder

from aiokafka.record._crecords import DefaultRecordBatch as AioCBatch
from aiokafka.record._crecords import DefaultRecordBatchBuilder as AioCBuilder
from aiokafka.record._crecords import MemoryRecords as AioCMemoryRecords
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy as AioPyBuilder
from aiokafka.record.default_records import _DefaultRecordBatchPy as AioPyBatch
from aiokafka.record.memory_records import _MemoryRecordsPy as AioPyMemoryRecords

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
VECTORS = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "vectors" / "batches.json").read_text()
)
FILL = b"0123456789abcdef" * 4  # keeps every batch compressible

COMMIT_KEY = struct.pack(">hh", 0, 1)
ABORT_KEY = struct.pack(">hh", 0, 0)


def unhex(x):
    return None if x is None else bytes.fromhex(x)


# --------------------------------------------------------------------------- shapes


def shape_records(shape: str):
    """(key, value, timestamp, headers) lists for the named record shape."""
    ts = 1_650_000_000_000
    if shape == "keys":
        return [(b"key-%d" % i, b"value-%d-" % i + FILL, ts + i, []) for i in range(10)]
    if shape == "no-keys":
        return [(None, b"value-%d-" % i + FILL, ts + 3 * i, []) for i in range(10)]
    if shape == "nulls":
        return [
            (None, None, ts, []),
            (b"k", None, ts + 1, []),
            (None, FILL, ts - 1, []),
            (b"", b"", ts + 2, []),
            (b"k" + FILL, FILL, ts + 3, []),
        ]
    if shape == "headers":
        return [
            (
                b"k%d" % i,
                FILL,
                ts + i,
                [("trace-id", b"%08d" % i), ("null", None), ("é", b"")] * (i % 3),
            )
            for i in range(6)
        ]
    raise ValueError(shape)


SHAPES = ["keys", "no-keys", "nulls", "headers"]
PRODUCER = {
    "plain": dict(transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1),
    "idempotent": dict(transactional=False, producer_id=77, producer_epoch=2, base_sequence=40),
    "transactional": dict(transactional=True, producer_id=1001, producer_epoch=9, base_sequence=0),
}


def expected(records, base_offset=0):
    return [(base_offset + i, t, k, v, h) for i, (k, v, t, h) in enumerate(records)]


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


# --------------------------------------------------------------------------- client encoders


def aiokafka_build(builder_cls, codec, records, p):
    b = builder_cls(
        2,
        codec,
        int(p["transactional"]),
        p["producer_id"],
        p["producer_epoch"],
        p["base_sequence"],
        1 << 22,
    )
    for i, (k, v, t, h) in enumerate(records):
        assert b.append(i, t, k, v, h) is not None
    return bytes(b.build())


def kafka_python_build(codec, records, p):
    b = KpBuilder(
        2,
        codec,
        p["transactional"],
        p["producer_id"],
        p["producer_epoch"],
        p["base_sequence"],
        1 << 22,
    )
    for i, (k, v, t, h) in enumerate(records):
        assert b.append(i, t, k, v, h) is not None
    return bytes(b.build())


def kafka_python_memory_records(codec, records, p):
    b = KpMemoryRecordsBuilder(2, codec, 1 << 22, offset=0, **p)
    for k, v, t, h in records:
        assert b.append(t, k, v, h) is not None
    b.close()
    return bytes(b.buffer())


ENCODERS = {
    "aiokafka-py": lambda c, r, p: aiokafka_build(AioPyBuilder, c, r, p),
    "aiokafka-c": lambda c, r, p: aiokafka_build(AioCBuilder, c, r, p),
    "kafka-python": kafka_python_build,
    "kafka-python-memory-records": kafka_python_memory_records,
}


def logcore_build(codec_name, records, p, **kw):
    b = logcore.BatchBuilder(compression=codec_name, **p, **kw)
    for k, v, t, h in records:
        b.append(v, key=k, timestamp_ms=t, headers=h)
    return b.build()


# --------------------------------------------------------------------------- golden vectors


@pytest.mark.parametrize("vec", VECTORS, ids=[v["name"] for v in VECTORS])
def test_golden_batch_decodes(vec) -> None:
    data = bytes.fromhex(vec["hex"])
    batch = logcore.RecordBatch(data)
    batch.validate()
    assert batch.size_in_bytes == len(data)
    assert batch.compression == vec["compression"]
    assert batch.is_transactional is vec["transactional"]
    assert batch.is_control is vec["control"]
    assert batch.timestamp_type == vec["timestamp_type"]
    assert batch.producer_id == vec["producer_id"]
    assert batch.producer_epoch == vec["producer_epoch"]
    assert batch.base_sequence == vec["base_sequence"]
    assert batch.partition_leader_epoch == vec["partition_leader_epoch"]
    assert batch.base_timestamp == vec["base_timestamp"]
    assert batch.max_timestamp == vec["max_timestamp"]
    assert batch.records_count == len(vec["records"])
    assert batch.last_offset_delta == len(vec["records"]) - 1
    want = [
        (
            r["offset"],
            r["timestamp"],
            unhex(r["key"]),
            unhex(r["value"]),
            [(hk, unhex(hv)) for hk, hv in r["headers"]],
        )
        for r in vec["records"]
    ]
    assert as_tuples(batch) == want
    cols = logcore.decode_columns(data)
    if vec["control"]:
        assert cols.num_records == 0
    else:
        assert cols.offsets.tolist() == [w[0] for w in want]
        assert cols.timestamps.tolist() == [w[1] for w in want]
        assert cols.key_valid.tolist() == [w[2] is not None for w in want]
        assert cols.value_data.tobytes() == b"".join(w[3] or b"" for w in want)
        assert cols.header_counts.tolist() == [len(w[4]) for w in want]


def test_golden_batches_concatenated_and_appended() -> None:
    blobs = [bytes.fromhex(v["hex"]) for v in VECTORS]
    buffer = bytearray(b"".join(blobs))
    batches = list(logcore.iter_batches(buffer))
    assert [b.size_in_bytes for b in batches] == [len(b) for b in blobs]
    del batches
    data_records = sum(len(v["records"]) for v in VECTORS if not v["control"])
    assert logcore.decode_columns(buffer).num_records == data_records
    # the broker path accepts every client batch (they all start at offset delta 0)
    info = logcore.validate_for_append(buffer, next_offset=500, max_message_bytes=1 << 20)
    total = sum(len(v["records"]) for v in VECTORS)
    assert (info.first_offset, info.last_offset, info.batch_count) == (
        500,
        500 + total - 1,
        len(VECTORS),
    )
    assert all(b.is_valid() for b in logcore.iter_batches(buffer))


# --------------------------------------------------------------------------- clients -> logcore


@pytest.mark.parametrize("producer", list(PRODUCER))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("client", list(ENCODERS))
def test_clients_encode_logcore_decodes(client, codec, shape, producer) -> None:
    records = shape_records(shape)
    p = PRODUCER[producer]
    data = ENCODERS[client](CODECS[codec], records, p)
    batch = logcore.RecordBatch(data)
    batch.validate()
    if codec != "none" and shape != "nulls":
        assert batch.compression == codec  # the client did compress
    assert batch.is_transactional is p["transactional"]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        p["producer_id"],
        p["producer_epoch"],
        p["base_sequence"],
    )
    assert as_tuples(batch) == expected(records)
    cols = logcore.decode_columns(data)
    assert cols.offsets.tolist() == list(range(len(records)))
    buf = bytearray(data)
    info = logcore.validate_for_append(buf, next_offset=10, max_message_bytes=1 << 22)
    assert info.record_count == len(records)
    assert info.max_timestamp == max(r[2] for r in records)


# --------------------------------------------------------------------------- logcore -> clients


def decode_with_clients(data: bytes):
    """Every client decoder's view of a single batch, as tuples; also checks their CRC."""
    out = {}
    for name, cls in (
        ("aiokafka-py", AioPyBatch),
        ("aiokafka-c", AioCBatch),
        ("kafka-python", KpBatch),
    ):
        batch = cls(data)
        assert batch.validate_crc(), name
        out[name] = (batch, as_tuples(batch))
    for name, cls in (
        ("aiokafka-py-memory", AioPyMemoryRecords),
        ("aiokafka-c-memory", AioCMemoryRecords),
        ("kafka-python-memory", KpMemoryRecords),
    ):
        mr = cls(data)
        batches = []
        while mr.has_next():
            batches.append(mr.next_batch())
        assert len(batches) == 1, name
        out[name] = (batches[0], as_tuples(batches[0]))
    return out


@pytest.mark.parametrize("producer", list(PRODUCER))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("codec", list(CODECS))
def test_logcore_encodes_clients_decode(codec, shape, producer) -> None:
    records = shape_records(shape)
    p = PRODUCER[producer]
    data = logcore_build(codec, records, p, base_offset=1000)
    for name, (batch, got) in decode_with_clients(data).items():
        assert got == expected(records, 1000), name
        assert batch.compression_type == CODECS[codec], name
        assert batch.is_transactional == p["transactional"], name
        assert batch.producer_id == p["producer_id"], name
        assert batch.base_sequence == p["base_sequence"], name
        assert batch.max_timestamp == max(r[2] for r in records), name


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("marker", ["commit", "abort"])
def test_control_batches_both_ways(codec, marker) -> None:
    key = COMMIT_KEY if marker == "commit" else ABORT_KEY
    value = struct.pack(">hi", 0, 12) + (FILL if codec != "none" else b"")
    p = PRODUCER["transactional"] | {"base_sequence": -1}
    data = logcore_build(codec, [(key, value, 5000, [])], p, is_control=True)
    for name, (batch, got) in decode_with_clients(data).items():
        assert batch.is_control_batch, name
        assert got == [(0, 5000, key, value, [])], name
    # kafka-python reads the marker type from the control key
    (rec,) = KpBatch(data)
    assert rec.type == (1 if marker == "commit" else 0)
    # and the other way: a client batch with the broker's control bit set
    client = bytearray(kafka_python_build(CODECS[codec], [(key, value, 5000, [])], p))
    struct.pack_into(">h", client, 21, struct.unpack_from(">h", client, 21)[0] | 0x20)
    struct.pack_into(">I", client, 17, logcore.crc32c(client[21:]))
    batch = logcore.RecordBatch(client)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    assert as_tuples(batch) == [(0, 5000, key, value, [])]
    assert logcore.decode_columns(client).num_records == 0


@pytest.mark.parametrize("codec", list(CODECS))
def test_log_append_time_read_by_clients(codec) -> None:
    records = shape_records("keys")
    buf = bytearray(logcore_build(codec, records, PRODUCER["plain"]))
    logcore.validate_for_append(
        buf, next_offset=300, max_message_bytes=1 << 20, log_append_time_ms=424242
    )
    for name, (batch, got) in decode_with_clients(bytes(buf)).items():
        assert batch.timestamp_type == 1, name
        assert [g[:2] for g in got] == [(300 + i, 424242) for i in range(len(records))], name


# --------------------------------------------------------------------------- byte identity


IDENTITY_CASES = [(shape, producer) for shape in SHAPES for producer in PRODUCER]


@pytest.mark.parametrize("shape, producer", IDENTITY_CASES)
def test_uncompressed_is_byte_identical_to_aiokafka(shape, producer) -> None:
    records = shape_records(shape)
    p = PRODUCER[producer]
    ours = logcore_build("none", records, p)
    assert ours == aiokafka_build(AioPyBuilder, 0, records, p)
    assert ours == aiokafka_build(AioCBuilder, 0, records, p)


@pytest.mark.parametrize("shape, producer", IDENTITY_CASES)
def test_uncompressed_is_byte_identical_to_kafka_python_with_its_epoch(shape, producer) -> None:
    records = shape_records(shape)
    p = PRODUCER[producer]
    ours = logcore_build("none", records, p, partition_leader_epoch=0)
    assert ours == kafka_python_build(0, records, p)


def test_byte_identity_with_append_many() -> None:
    values = [b"v%d" % i + FILL for i in range(100)]
    keys = [None if i % 2 else b"k%d" % i for i in range(100)]
    stamps = [1_000_000 + (i * 13) % 29 for i in range(100)]
    b = logcore.BatchBuilder()
    b.append_many(values, keys=keys, timestamps_ms=stamps)
    records = [(k, v, t, []) for k, v, t in zip(keys, values, stamps, strict=True)]
    assert b.build() == aiokafka_build(AioCBuilder, 0, records, PRODUCER["plain"])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_record_sections_match_clients_after_decompression(codec) -> None:
    # Compressed bytes depend on library versions; what is inside must not.
    from logcore import _compression

    records = shape_records("headers")
    p = PRODUCER["idempotent"]
    ours = logcore_build(codec, records, p)
    theirs = aiokafka_build(AioPyBuilder, CODECS[codec], records, p)
    cid = CODECS[codec]
    assert _compression.decompress(cid, ours[61:]) == _compression.decompress(cid, theirs[61:])
    # headers agree except batch_length and CRC (bytes 8..12 and 17..21)
    assert ours[:8] + ours[12:17] + ours[21:61] == theirs[:8] + theirs[12:17] + theirs[21:61]
