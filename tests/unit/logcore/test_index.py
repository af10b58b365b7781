"""logcore.OffsetIndex / TimeIndex: Kafka's mmapped indexes (docs/formats.md).

File contents are checked with the independent reader in tests/_harness/kafka_format.py.
"""

from __future__ import annotations

import os

import pytest
from _harness.kafka_format import read_offset_index, read_time_index

from logcore import CorruptRecordError, OffsetIndex, TimeIndex


def test_offset_index_preallocates_appends_and_trims(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 1003)
    assert os.path.getsize(path) == 1000  # rounded down to whole 8-byte entries
    assert idx.max_entries == 125 and idx.entries == 0 and not idx.is_full()
    assert idx.lookup(150) == (100, 0)  # empty: (base, 0)
    for i in range(10):
        idx.append(100 + i * 10 + 5, i * 4096)
    assert idx.entries == 10 and idx.last_offset == 195
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(104) == (100, 0)
    assert idx.lookup(105) == (105, 0)
    assert idx.lookup(134) == (125, 2 * 4096)
    assert idx.lookup(10**12) == (195, 9 * 4096)
    assert idx.lookup_position(4096 * 3 + 1) == (135, 3 * 4096)
    assert idx.lookup_position(-1) == (100, 0)
    assert idx.entry(0) == (105, 0)
    with pytest.raises(IndexError):
        idx.entry(10)
    idx.flush()
    idx.trim_to_valid_size()
    assert os.path.getsize(path) == 80
    assert read_offset_index(path) == [(i * 10 + 5, i * 4096) for i in range(10)]
    idx.close()
    idx.close()  # idempotent
    again = OffsetIndex(path, 100, 1000)  # an existing file is taken as trimmed
    assert again.entries == 10 and again.lookup(150) == (145, 4 * 4096)
    assert again.resize(1000) is True and again.max_entries == 125 and again.entries == 10
    again.sanity_check(10 * 4096)
    again.close()


def test_offset_index_rejects_bad_appends(tmp_path) -> None:
    idx = OffsetIndex(str(tmp_path / "a.index"), 1000, 16)
    idx.append(1000, 0)
    with pytest.raises(ValueError, match="not larger"):
        idx.append(1000, 10)
    with pytest.raises(ValueError, match="does not fit"):
        idx.append(999, 10)
    with pytest.raises(ValueError, match="does not fit"):
        idx.append(1000 + 2**31, 10)
    with pytest.raises(ValueError, match="position"):
        idx.append(1001, -1)
    idx.append(1001, 10)
    with pytest.raises(ValueError, match="full"):
        idx.append(1002, 20)
    assert idx.is_full()
    idx.close()


def test_offset_index_truncate_to(tmp_path) -> None:
    idx = OffsetIndex(str(tmp_path / "a.index"), 0, 800)
    for i in range(1, 11):
        idx.append(i * 10, i * 100)
    idx.truncate_to(55)
    assert idx.entries == 5 and idx.last_offset == 50
    idx.truncate_to(50)
    assert idx.entries == 4 and idx.last_offset == 40
    idx.truncate_to(1000)
    assert idx.entries == 4
    idx.truncate_to(0)
    assert idx.entries == 0
    idx.append(5, 7)
    idx.truncate()
    assert idx.entries == 0
    idx.close()


def test_warm_tail_and_cold_lookups_agree(tmp_path) -> None:
    idx = OffsetIndex(str(tmp_path / "a.index"), 0, 8 * 5000)
    for i in range(5000):
        idx.append(3 * i + 1, 7 * i)
    for target in (0, 1, 2, 3, 4, 1500, 7000, 13000, 14000, 14997, 14998, 15000, 10**9):
        rel_entries = [3 * i + 1 for i in range(5000) if 3 * i + 1 <= target]
        expect = (rel_entries[-1], 7 * ((rel_entries[-1] - 1) // 3)) if rel_entries else (0, 0)
        assert idx.lookup(target) == expect, target
    assert idx.walk_start(7 * 10, 10**9) == 7 * 9
    assert idx.walk_start(10**9, 3 * 100 + 1) == 7 * 99
    assert idx.walk_start(0, 10**9) == 0
    idx.close()


def test_time_index(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000050.timeindex")
    ti = TimeIndex(path, 50, 12 * 10 + 5)
    assert os.path.getsize(path) == 120 and ti.max_entries == 10
    assert ti.last_entry() == (-1, 50)
    assert ti.lookup(10**13) == (-1, 50)
    assert ti.append(1000, 52) is True
    assert ti.append(1000, 53) is False  # not larger: skipped (maybeAppend)
    assert ti.append(2000, 60) is True
    with pytest.raises(ValueError, match="offset"):
        ti.append(3000, 59)
    with pytest.raises(ValueError, match="timestamp"):
        ti.append(1500, 61)
    assert ti.append(3000, 70) is True
    assert ti.lookup(999) == (-1, 50)
    assert ti.lookup(1000) == (1000, 52)
    assert ti.lookup(2999) == (2000, 60)
    assert ti.lookup(10**13) == (3000, 70)
    assert ti.last_entry() == (3000, 70)
    ti.truncate_to(60)
    assert ti.last_entry() == (1000, 52)
    ti.append(1500, 61)
    ti.trim_to_valid_size()
    assert read_time_index(path) == [(1000, 2), (1500, 11)]
    ti.sanity_check()
    ti.close()


def test_time_index_full_and_skip_full_check(tmp_path) -> None:
    ti = TimeIndex(str(tmp_path / "t.timeindex"), 0, 24)
    ti.append(1, 1)
    ti.append(2, 2)
    with pytest.raises(ValueError, match="full"):
        ti.append(3, 3)
    assert ti.append(3, 3, True) is False
    ti.close()


def test_sanity_check_detects_untrimmed_and_torn_files(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000000.index")
    idx = OffsetIndex(path, 0, 800)
    idx.append(10, 100)
    idx.append(20, 200)
    idx.flush()
    idx.close()
    with open(path, "ab") as f:
        f.write(b"\0" * 16)  # as if the preallocated tail survived a crash
    bad = OffsetIndex(path, 0, 800)
    with pytest.raises(CorruptRecordError, match="untrimmed") as ei:
        bad.sanity_check()
    assert ei.value.path == path
    bad.close()
    with open(path, "ab") as f:
        f.write(b"\1\2\3")
    torn = OffsetIndex(path, 0, -1, False)
    with pytest.raises(CorruptRecordError, match="multiple of 8"):
        torn.sanity_check()
    torn.close()
    good = str(tmp_path / "00000000000000000001.index")
    g = OffsetIndex(good, 0, 80)
    g.append(5, 500)
    g.close()
    g = OffsetIndex(good, 0, 80)
    with pytest.raises(CorruptRecordError, match="past the log end"):
        g.sanity_check(100)
    g.close()
    tpath = str(tmp_path / "t.timeindex")
    with open(tpath, "wb") as f:
        f.write(b"\0" * 13)
    t = TimeIndex(tpath, 0, -1, False)
    with pytest.raises(CorruptRecordError, match="multiple of 12"):
        t.sanity_check()
    t.close()


def test_closed_index_reads_as_empty(tmp_path) -> None:
    idx = OffsetIndex(str(tmp_path / "a.index"), 7, 80)
    idx.append(9, 100)
    idx.close()
    assert idx.entries == 0 and idx.lookup(9) == (7, 0) and idx.walk_start(10**6, 10**6) == 0
    ti = TimeIndex(str(tmp_path / "a.timeindex"), 7, 120)
    ti.append(5, 9)
    ti.close()
    assert ti.lookup(10) == (-1, 7)


def test_read_only_empty_file(tmp_path) -> None:
    path = str(tmp_path / "e.index")
    open(path, "wb").close()
    idx = OffsetIndex(path, 0, -1, False)
    assert idx.entries == 0 and idx.max_entries == 0 and idx.is_full()
    assert idx.lookup(5) == (0, 0)
    with pytest.raises(ValueError, match="read-only"):
        idx.resize(80)
    idx.close()


def test_compiled_and_ref_indexes_have_the_same_surface(tmp_path) -> None:
    import logcore
    from logcore._ref import index as ref

    if logcore.IMPLEMENTATION != "c":
        pytest.skip("compiled extension not loaded")
    from logcore import _index

    for name in ("OffsetIndex", "TimeIndex"):
        objs = [getattr(mod, name)(str(tmp_path / f"{name}{i}"), 0, 240)
                for i, mod in enumerate((_index, ref))]
        c_names, r_names = ({n for n in dir(o) if not n.startswith("_")} for o in objs)
        assert c_names == r_names, name
        for o in objs:
            o.close()
