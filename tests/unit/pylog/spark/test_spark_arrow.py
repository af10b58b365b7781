"""pylog.spark.arrow: logcore Columns to Arrow record batches with Spark's Kafka schema."""

from __future__ import annotations

import datetime

import numpy as np
import pytest

import logcore
from pylog.client.aio._fetcher import _slice_columns as slice_columns

pa = pytest.importorskip("pyarrow")
from pylog.spark import arrow  # noqa: E402

T0 = 1_700_000_000_123


def build(records, compression="none", base_offset=0):
    b = logcore.BatchBuilder(compression=compression, base_offset=base_offset)
    for key, value, ts, headers in records:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    return b.build()


RECORDS = [
    (b"k0", b"v0", T0, []),
    (None, b"value-1", T0 + 1, [("h", b"x"), ("n", None)]),
    (b"", None, T0 + 2, []),
    (b"key-3", b"", -1, [("utf8-\u00e9", b"\x00\xff")]),
]


def test_schema_is_spark_kafka_schema() -> None:
    s = arrow.schema(False)
    assert s.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                       "timestampType"]
    assert [str(f.type) for f in s] == ["binary", "binary", "string", "int32", "int64",
                                        "timestamp[us, tz=UTC]", "int32"]
    assert all(f.nullable for f in s)
    h = arrow.schema(True)
    assert h.names[-1] == "headers"
    assert str(h.field("headers").type) == "list<item: struct<key: string, value: binary>>"


def test_columns_convert_byte_exact() -> None:
    cols = logcore.decode_columns(build(RECORDS) + build(RECORDS, "zstd", 4))
    batch = arrow.columns_to_batch(cols, "clicks", 3)
    assert batch.schema == arrow.schema(False)
    rows = batch.to_pylist()
    assert len(rows) == 8
    for i, row in enumerate(rows):
        key, value, ts, _ = RECORDS[i % 4]
        assert row["key"] == key and row["value"] == value
        assert row["topic"] == "clicks" and row["partition"] == 3 and row["offset"] == i
        assert row["timestamp"] == datetime.datetime.fromtimestamp(ts / 1000, datetime.UTC)
        assert row["timestampType"] == 0
    # No copies of the key and value bytes: the Arrow buffers are the numpy ones.
    assert batch.column("value").buffers()[2].address == cols.value_data.ctypes.data


def test_a_slice_of_records_and_sliced_columns() -> None:
    cols = logcore.decode_columns(build(RECORDS * 3))
    part = arrow.columns_to_batch(cols, "t", 0, 5, 9)
    assert part.column("offset").to_pylist() == [5, 6, 7, 8]
    assert part.column("value").to_pylist() == [b"value-1", None, b"", b"v0"]
    # Columns sliced by the client's fetcher start their offsets past 0.
    sliced = slice_columns(cols, 6)
    whole = arrow.columns_to_batch(sliced, "t", 0)
    assert whole.column("key").to_pylist() == [b"", b"key-3", b"k0", None, b"", b"key-3"]
    assert whole.column("offset").to_pylist() == list(range(6, 12))


def test_log_append_time_type() -> None:
    b = logcore.BatchBuilder(timestamp_type="log_append")
    b.append(b"x", timestamp_ms=T0)
    data = b.build()
    cols = logcore.decode_columns(data)
    row = arrow.columns_to_batch(cols, "t", 0).to_pylist()[0]
    assert row["timestampType"] == 1
    max_ts = logcore.RecordBatch(data).max_timestamp
    assert row["timestamp"] == datetime.datetime.fromtimestamp(max_ts / 1000, datetime.UTC)


def test_headers_column() -> None:
    cols = logcore.decode_columns(build(RECORDS))
    flat = [h for _, _, _, hs in RECORDS for h in hs]
    headers = arrow.headers_array(cols.header_counts, flat)
    batch = arrow.columns_to_batch(cols, "t", 0, include_headers=True, headers=headers)
    assert batch.schema == arrow.schema(True)
    assert batch.column("headers").to_pylist() == [
        None, [{"key": "h", "value": b"x"}, {"key": "n", "value": None}], None,
        [{"key": "utf8-\u00e9", "value": b"\x00\xff"}]]
    none = arrow.columns_to_batch(cols, "t", 0, include_headers=True)
    assert none.column("headers").null_count == 4
    with pytest.raises(ValueError, match="1 headers for header counts summing to 3"):
        arrow.headers_array(cols.header_counts, flat[:1])


def test_records_path_matches_columns_path() -> None:
    from pylog.client.records import ConsumerRecord

    data = build(RECORDS)
    cols = logcore.decode_columns(data)
    recs = [ConsumerRecord("t", 1, r.offset, r.timestamp, 0, r.key, r.value, list(r.headers), 0)
            for b in logcore.iter_batches(data) for r in b]
    by_records = arrow.records_to_batch(recs, "t", 1, True)
    flat = [h for r in recs for h in r.headers]
    by_columns = arrow.columns_to_batch(cols, "t", 1, include_headers=True,
                                        headers=arrow.headers_array(cols.header_counts, flat))
    assert by_records.equals(by_columns)


def test_empty() -> None:
    cols = logcore.decode_columns(b"")
    batch = arrow.columns_to_batch(cols, "t", 0, include_headers=True)
    assert batch.num_rows == 0 and batch.schema == arrow.schema(True)
    assert np.asarray(cols.key_offsets).size == 1
