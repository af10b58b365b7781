"""logcore.checkpoint: Kafka's checkpoint text files, leader-epoch cache, clean marker."""

from __future__ import annotations

import os

import pytest
from _harness.kafka_format import read_checkpoint

from logcore import CorruptRecordError, LogDirError
from logcore.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LeaderEpochCache,
    consume_clean_shutdown_marker,
    read_checkpoint_file,
    read_offset_checkpoint,
    write_clean_shutdown_marker,
    write_offset_checkpoint,
)


def test_offset_checkpoint_round_trip_and_format(tmp_path) -> None:
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    assert read_offset_checkpoint(path) is None
    write_offset_checkpoint(path, {("b", 1): 88, ("a", 0): 1234})
    with open(path) as f:
        assert f.read() == "0\n2\na 0 1234\nb 1 88\n"
    assert read_checkpoint(path) == (0, [["a", "0", "1234"], ["b", "1", "88"]])
    assert read_offset_checkpoint(path) == {("a", 0): 1234, ("b", 1): 88}
    assert not os.path.exists(path + ".tmp")
    write_offset_checkpoint(path, {})
    assert read_offset_checkpoint(path) == {}


@pytest.mark.parametrize(
    "text, line",
    [
        ("", 1),
        ("1\n0\n", 1),
        ("x\n0\n", 1),
        ("0\n2\na 0 1\n", 2),
        ("0\n1\na 0\n", 3),
        ("0\n1\na zero 1\n", 3),
        ("0\n-1\n", 2),
    ],
)
def test_malformed_checkpoint_names_file_and_line(tmp_path, text: str, line: int) -> None:
    path = str(tmp_path / "cp")
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(CorruptRecordError) as ei:
        read_offset_checkpoint(path)
    assert ei.value.path == path and ei.value.position == line
    assert path in str(ei.value)


def test_checkpoint_that_is_not_text_names_file_and_byte(tmp_path) -> None:
    path = str(tmp_path / "cp")
    with open(path, "wb") as f:
        f.write(b"0\n1\na 0 \xff\xfe12\n")
    with pytest.raises(CorruptRecordError) as ei:
        read_offset_checkpoint(path)
    assert ei.value.path == path and ei.value.position == 8
    assert path in str(ei.value) and "UTF-8" in str(ei.value)


def test_topic_with_space_refused(tmp_path) -> None:
    with pytest.raises(ValueError):
        write_offset_checkpoint(str(tmp_path / "cp"), {("a b", 0): 1})


def test_write_failure_is_log_dir_error(tmp_path) -> None:
    with pytest.raises(LogDirError):
        write_offset_checkpoint(str(tmp_path / "missing" / "cp"), {("a", 0): 1})


def test_leader_epoch_cache(tmp_path) -> None:
    path = str(tmp_path / "leader-epoch-checkpoint")
    c = LeaderEpochCache(path)
    assert c.entries == [] and c.latest_epoch is None
    c.assign(0, 0)
    c.assign(0, 5)  # same epoch: no-op
    c.assign(2, 10)
    c.assign(5, 30)
    assert c.entries == [(0, 0), (2, 10), (5, 30)]
    assert read_checkpoint(path) == (0, [["0", "0"], ["2", "10"], ["5", "30"]])
    assert c.end_offset_for(1, 99) == (0, 10)
    assert c.end_offset_for(2, 99) == (2, 30)
    assert c.end_offset_for(7, 99) == (5, 99)
    c2 = LeaderEpochCache(path)
    assert c2.entries == c.entries
    c.truncate_from_end(30)
    assert c.entries == [(0, 0), (2, 10)]
    c.truncate_from_start(12)
    assert c.entries == [(2, 12)]
    assert LeaderEpochCache(path).entries == [(2, 12)]
    c.assign(1, 20)  # an older epoch replaces conflicting newer entries
    assert c.entries == [(1, 20)]
    assert c.end_offset_for(0, 50) == (-1, -1)
    c.clear()
    assert LeaderEpochCache(path).entries == []
    with pytest.raises(ValueError):
        c.assign(-1, 0)


def test_leader_epoch_cache_rejects_disorder(tmp_path) -> None:
    path = str(tmp_path / "leader-epoch-checkpoint")
    with open(path, "w") as f:
        f.write("0\n2\n3 10\n2 20\n")
    with pytest.raises(CorruptRecordError, match="out of order"):
        LeaderEpochCache(path)


def test_clean_shutdown_marker(tmp_path) -> None:
    d = str(tmp_path)
    assert consume_clean_shutdown_marker(d) is False
    write_clean_shutdown_marker(d)
    with open(os.path.join(d, CLEAN_SHUTDOWN_FILE)) as f:
        assert '"version": 0' in f.read()
    assert consume_clean_shutdown_marker(d) is True
    assert consume_clean_shutdown_marker(d) is False
    assert read_checkpoint_file(os.path.join(d, "nope"), lambda f: f) is None
