"""Regenerate the known-answer vectors in tests/vectors/ (run from the repository root):

    .venv/bin/python tests/vectors/make_vectors.py

Nothing here uses logcore: every vector comes from a source independent of it, so the
tests that read the files check logcore against the outside world.

crc32c.json
    RFC 3720 (iSCSI) appendix B.4 known answers, the classic "123456789" check value
    and a few short strings. Each answer is written here by hand and cross-checked
    against the ``crc32c`` package (a C implementation) before the file is written.

varint.json
    Zig-zag ("signed") and unsigned base-128 varint edge cases: 0, +-1, the 1/2-byte
    boundaries, int32 and int64 min/max (5- and 10-byte encodings), 2**64 - 1.
    Encodings are hand-written hex, cross-checked with kafka-python's
    ``kafka.record.util.encode_varint`` for the signed ones. Plus invalid inputs
    (truncated, 11 bytes, overflow past 64 bits) that decoders must reject.

batches.json
    Golden RecordBatch v2 bytes captured from real clients' encoders, with the records
    they were given (the expected decode, taken from the inputs, not from a decoder):
      - aiokafka 0.14 pure-Python builder (aiokafka.record.default_records
        ._DefaultRecordBatchBuilderPy) and C builder (aiokafka.record._crecords);
      - kafka-python 3.0 (kafka.record.memory_records.MemoryRecordsBuilder, which
        drives kafka.record.default_records.DefaultRecordBatchBuilder);
    for every codec (none, gzip, snappy, lz4, zstd) and record shapes: plain keyed
    records, null/empty keys and values, headers (null values, non-ASCII keys),
    idempotent and transactional producer state.
    Client quirks the vectors preserve: kafka-python writes partition_leader_epoch 0,
    aiokafka -1; both fall back to an uncompressed batch when compression does not
    shrink it (every case here carries a compressible value so that the codec sticks;
    the script asserts it did).
    No Python client writes control batches or LogAppendTime (brokers do): the
    "control" and "log_append_time" vectors take a kafka-python batch and apply what a
    broker writes (attribute bit 5 with control-record key/value per Kafka's
    ControlRecordType / EndTransactionMarker; or attribute bit 3 with max_timestamp),
    then recompute the CRC with the ``crc32c`` package. They are marked
    "patched": true.
"""

from __future__ import annotations

import json
import pathlib
import struct
import sys

import crc32c as crc32c_pkg

HERE = pathlib.Path(__file__).resolve().parent

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# --------------------------------------------------------------------------- CRC-32C

ISCSI_READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000"
    "14000000000004000000001400000018"
    "28000000000000000200000000000000"
)

CRC_VECTORS = [
    # (name, data, expected CRC) - RFC 3720 B.4 and the usual check values
    ("empty", b"", 0x00000000),
    ("check 123456789", b"123456789", 0xE3069283),
    ("a", b"a", 0xC1D04330),
    ("rfc3720 32 bytes of zeros", bytes(32), 0x8A9136AA),
    ("rfc3720 32 bytes of 0xff", b"\xff" * 32, 0x62A8AB43),
    ("rfc3720 32 incrementing bytes", bytes(range(32)), 0x46DD794E),
    ("rfc3720 32 decrementing bytes", bytes(range(31, -1, -1)), 0x113FDB5C),
    ("rfc3720 iscsi read command pdu", ISCSI_READ_PDU, 0xD9963A56),
]


def crc_vectors() -> list[dict]:
    out = []
    for name, data, expected in CRC_VECTORS:
        got = crc32c_pkg.crc32c(data)
        assert got == expected, f"{name}: crc32c package says {got:#010x}, table {expected:#010x}"
        out.append({"name": name, "data_hex": data.hex(), "crc": expected})
    return out


# --------------------------------------------------------------------------- varints

SIGNED = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    (2**31 - 1, "feffffff0f"),  # int32 max: 5 bytes
    (-(2**31), "ffffffff0f"),  # int32 min: 5 bytes
    (2**31, "8080808010"),
    (2**63 - 1, "feffffffffffffffff01"),  # int64 max: 10 bytes
    (-(2**63), "ffffffffffffffffff01"),  # int64 min: 10 bytes
]

UNSIGNED = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**32 - 1, "ffffffff0f"),
    (2**63, "80808080808080808001"),
    (2**64 - 1, "ffffffffffffffffff01"),
]

INVALID = [
    ("empty", ""),
    ("truncated after continuation", "80"),
    ("truncated 9 bytes", "ffffffffffffffffff"),
    ("11 bytes", "8080808080808080808000"),
    ("10th byte overflows 64 bits", "ffffffffffffffffff02"),
    ("10th byte with continuation bit", "ffffffffffffffffff81"),
]


def varint_vectors() -> dict:
    from kafka.record.util import encode_varint as kp_encode_varint

    for value, hx in SIGNED:
        out = bytearray()
        kp_encode_varint(value, out.append)
        assert out.hex() == hx, f"kafka-python encodes {value} as {out.hex()}, table says {hx}"
    return {
        "signed": [{"value": v, "hex": h} for v, h in SIGNED],
        "unsigned": [{"value": v, "hex": h} for v, h in UNSIGNED],
        "invalid": [{"name": n, "hex": h} for n, h in INVALID],
    }


# --------------------------------------------------------------------------- batches

BASE_TS = 1_700_000_000_000
FILLER = b"compressible-" * 8  # makes every batch shrink under every codec


def _case_records(case: str) -> list[tuple[bytes | None, bytes | None, int, list]]:
    """(key, value, timestamp_ms, headers) per record for each named case."""
    if case == "plain":
        return [(b"key-%d" % i, b"value-%d " % i + FILLER, BASE_TS + i * 7, []) for i in range(5)]
    if case == "nulls":
        return [
            (None, FILLER, BASE_TS, []),
            (b"k", None, BASE_TS + 1, []),
            (None, None, BASE_TS - 5, []),  # earlier than the first: negative delta
            (b"", b"", BASE_TS + 2, []),
            (b"k2", FILLER, BASE_TS + 3, []),
        ]
    if case == "headers":
        return [
            (b"k0", FILLER, BASE_TS, [("h1", b"v1"), ("null", None), ("empty", b"")]),
            (None, b"x" + FILLER, BASE_TS + 10, [("clé-ü", b"\x00\xff"), ("h1", b"dup")]),
            (b"k2", None, BASE_TS + 20, []),
        ]
    raise ValueError(case)


CASES = {
    # name: (records case, transactional, producer_id, producer_epoch, base_sequence)
    "plain": ("plain", False, -1, -1, -1),
    "nulls": ("nulls", False, -1, -1, -1),
    "headers": ("headers", False, -1, -1, -1),
    "idempotent": ("plain", False, 4321, 3, 2**31 - 3),  # sequences wrap past int32 max
    "transactional": ("headers", True, 1234, 5, 100),
}


def _aiokafka_py(codec, txn, pid, epoch, seq, records):
    from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy

    b = _DefaultRecordBatchBuilderPy(2, codec, txn, pid, epoch, seq, 1 << 20)
    for i, (k, v, ts, hs) in enumerate(records):
        assert b.append(i, ts, k, v, hs) is not None
    return bytes(b.build())


def _aiokafka_c(codec, txn, pid, epoch, seq, records):
    from aiokafka.record._crecords.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(2, codec, txn, pid, epoch, seq, 1 << 20)
    for i, (k, v, ts, hs) in enumerate(records):
        assert b.append(i, ts, k, v, hs) is not None
    return bytes(b.build())


def _kafka_python(codec, txn, pid, epoch, seq, records):
    from kafka.record.memory_records import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(
        2,
        codec,
        1 << 20,
        offset=0,
        transactional=txn,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    for k, v, ts, hs in records:
        assert b.append(ts, k, v, hs) is not None
    b.close()
    return bytes(b.buffer())


def _kafka_python_raw(codec, txn, pid, epoch, seq, records):
    # The batch builder itself: MemoryRecordsBuilder refuses a producer id without a
    # sequence, which is what a transaction marker carries (base_sequence -1).
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(2, codec, txn, pid, epoch, seq, 1 << 20)
    for i, (k, v, ts, hs) in enumerate(records):
        assert b.append(i, ts, k, v, hs) is not None
    return bytes(b.build())


CLIENTS = {
    "aiokafka-py": _aiokafka_py,
    "aiokafka-c": _aiokafka_c,
    "kafka-python": _kafka_python,
}


def _expect(records, *, log_append_ts=None):
    return [
        {
            "offset": i,
            "timestamp": ts if log_append_ts is None else log_append_ts,
            "key": None if k is None else k.hex(),
            "value": None if v is None else v.hex(),
            "headers": [[hk, None if hv is None else hv.hex()] for hk, hv in hs],
        }
        for i, (k, v, ts, hs) in enumerate(records)
    ]


def _fix_crc(batch: bytearray) -> None:
    struct.pack_into(">I", batch, 17, crc32c_pkg.crc32c(bytes(batch[21:])))


def batch_vectors() -> list[dict]:
    out = []
    for client, build in CLIENTS.items():
        for codec_name, codec in CODECS.items():
            for case, (rec_case, txn, pid, epoch, seq) in CASES.items():
                records = _case_records(rec_case)
                data = build(codec, txn, pid, epoch, seq, records)
                (attributes,) = struct.unpack_from(">h", data, 21)
                assert attributes & 7 == codec, f"{client} {codec_name} {case}: codec fell back"
                out.append(
                    {
                        "name": f"{client}/{codec_name}/{case}",
                        "client": client,
                        "patched": False,
                        "hex": data.hex(),
                        "compression": codec_name,
                        "transactional": txn,
                        "control": False,
                        "timestamp_type": "create",
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "base_sequence": seq,
                        "partition_leader_epoch": 0 if client == "kafka-python" else -1,
                        "base_timestamp": records[0][2],
                        "max_timestamp": max(r[2] for r in records),
                        "records": _expect(records),
                    }
                )
    # Broker-written shapes, from kafka-python batches (see the module docstring).
    for codec_name, codec in CODECS.items():
        # Control batch: one COMMIT marker (key: version 0, type 1; value: version 0,
        # coordinator epoch 7), as a transaction coordinator writes it.
        key = struct.pack(">hh", 0, 1)
        value = struct.pack(">hi", 0, 7) + (FILLER if codec else b"")
        records = [(key, value, BASE_TS + 99, [])]
        data = bytearray(_kafka_python_raw(codec, True, 1234, 5, -1, records))
        struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x20)
        _fix_crc(data)
        assert data[22] & 7 == codec
        out.append(
            {
                "name": f"kafka-python+broker/{codec_name}/control",
                "client": "kafka-python",
                "patched": True,
                "hex": bytes(data).hex(),
                "compression": codec_name,
                "transactional": True,
                "control": True,
                "timestamp_type": "create",
                "producer_id": 1234,
                "producer_epoch": 5,
                "base_sequence": -1,
                "partition_leader_epoch": 0,
                "base_timestamp": BASE_TS + 99,
                "max_timestamp": BASE_TS + 99,
                "records": _expect(records),
            }
        )
        # LogAppendTime: bit 3 set and max_timestamp = the broker's clock.
        records = _case_records("plain")
        data = bytearray(_kafka_python(codec, False, -1, -1, -1, records))
        append_ts = BASE_TS + 123_456
        struct.pack_into(">h", data, 21, struct.unpack_from(">h", data, 21)[0] | 0x08)
        struct.pack_into(">q", data, 35, append_ts)
        _fix_crc(data)
        out.append(
            {
                "name": f"kafka-python+broker/{codec_name}/log_append_time",
                "client": "kafka-python",
                "patched": True,
                "hex": bytes(data).hex(),
                "compression": codec_name,
                "transactional": False,
                "control": False,
                "timestamp_type": "log_append",
                "producer_id": -1,
                "producer_epoch": -1,
                "base_sequence": -1,
                "partition_leader_epoch": 0,
                "base_timestamp": records[0][2],
                "max_timestamp": append_ts,
                "records": _expect(records, log_append_ts=append_ts),
            }
        )
    return out


def main() -> int:
    (HERE / "crc32c.json").write_text(json.dumps(crc_vectors(), indent=1) + "\n")
    (HERE / "varint.json").write_text(json.dumps(varint_vectors(), indent=1) + "\n")
    batches = batch_vectors()
    (HERE / "batches.json").write_text(json.dumps(batches, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote crc32c.json, varint.json, batches.json ({len(batches)} batches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
