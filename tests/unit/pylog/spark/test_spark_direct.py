"""pylog.spark.direct.read_range without Spark: ranges cut inside batches, headers, data
loss, read_committed over transactional batches, an unreadable path."""

from __future__ import annotations

import logging

import pytest

import logcore

pytest.importorskip("pyarrow")
from pylog.spark import direct  # noqa: E402
from pylog.spark.offsets import DataLoss, OffsetRange  # noqa: E402
from pylog.spark.options import SparkOptionError, parse_source_options  # noqa: E402

T0 = 1_700_000_000_000


def _opts(path, **extra):
    return parse_source_options({"path": str(path), "subscribe": "t", **extra}, streaming=False)


@pytest.fixture
def data(tmp_path):
    """t-0: 10 zstd batches of 10 records (every third with a header), 400-byte segments."""
    with logcore.Log(tmp_path / "t-0", logcore.LogConfig(segment_bytes=400)) as log:
        for b in range(10):
            builder = logcore.BatchBuilder(compression="zstd")
            for i in range(10):
                n = b * 10 + i
                builder.append(b"value-%d" % n, key=b"k%d" % n, timestamp_ms=T0 + n,
                               headers=[("n", b"%d" % n)] if n % 3 == 0 else None)
            log.append(builder.build())
        assert log.num_segments > 1
    return tmp_path


def _read(path, rng, **extra):
    batches = list(direct.read_range(_opts(path, **extra), rng, read_bytes=700))
    return [row for b in batches for row in b.to_pylist()]


def test_a_range_cut_inside_batches(data) -> None:
    rows = _read(data, OffsetRange("t", 0, 13, 87))
    assert [r["offset"] for r in rows] == list(range(13, 87))
    assert all(r["value"] == b"value-%d" % r["offset"] for r in rows)
    assert all(r["topic"] == "t" and r["partition"] == 0 for r in rows)


def test_headers(data) -> None:
    rows = _read(data, OffsetRange("t", 0, 0, 100), includeHeaders="true")
    assert [r["headers"] for r in rows[:4]] == [
        [{"key": "n", "value": b"0"}], None, None, [{"key": "n", "value": b"3"}]]


def test_records_gone_below_the_log_start(data, caplog) -> None:
    with logcore.Log(data / "t-0", logcore.LogConfig(segment_bytes=400)) as log:
        log.delete_records_before(25)
    with pytest.raises(DataLoss, match=r"Cannot fetch offsets \[5, 25\) of t-0 from .*the log "
                       r"now starts at 25.*failOnDataLoss"):
        _read(data, OffsetRange("t", 0, 5, 40))
    with caplog.at_level(logging.WARNING, "pylog.spark"):
        rows = _read(data, OffsetRange("t", 0, 5, 40), failOnDataLoss="false")
    assert [r["offset"] for r in rows] == list(range(25, 40))
    assert "Cannot fetch offsets [5, 25)" in caplog.text


def test_read_committed_refuses_transactional_batches(tmp_path) -> None:
    with logcore.Log(tmp_path / "t-0") as log:
        b = logcore.BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=0,
                                 transactional=True)
        b.append(b"x")
        log.append(b.build())
    assert len(_read(tmp_path, OffsetRange("t", 0, 0, 1))) == 1
    with pytest.raises(SparkOptionError, match="t-0 holds transactional batches.*read through a "
                       "broker"):
        _read(tmp_path, OffsetRange("t", 0, 0, 1), **{"kafka.isolation.level": "read_committed"})


def test_lookup_and_unreadable_paths(data, tmp_path) -> None:
    lookup = direct.DirectLookup(_opts(data))
    assert lookup.topics() == {"t": [0]}
    assert lookup.earliest([("t", 0)]) == {("t", 0): 0}
    assert lookup.latest([("t", 0)]) == {("t", 0): 100}
    assert lookup.for_times({("t", 0): T0 + 42}) == {("t", 0): 42}
    with pytest.raises(direct.DataDirectoryError, match="does not exist"):
        direct.DirectLookup(_opts(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(direct.DataDirectoryError, match="is not a directory"):
        direct.DirectLookup(_opts(tmp_path / "file"))
    with pytest.raises(direct.DataDirectoryError, match="partition t-5 has no directory"):
        lookup.latest([("t", 5)])


def test_kafka_high_watermark_checkpoint_caps_reads(data) -> None:
    (data / "replication-offset-checkpoint").write_text("0\n1\nt 0 60\n")
    lookup = direct.DirectLookup(_opts(data))
    assert lookup.latest([("t", 0)]) == {("t", 0): 60}
