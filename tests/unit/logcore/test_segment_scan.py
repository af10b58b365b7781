"""logcore's segment scans (search_for_offset, scan_region, locate, recover_scan).

The compiled module (logcore._segment) and its pure-Python twin (logcore._ref.segment) are
compared on the same files, intact and damaged (a differential test: the one place these
tests import _ref directly). Expected answers come from the independent reader in
tests/_harness/kafka_format.py.
"""

from __future__ import annotations

import mmap
import os
import random

import pytest
from _harness.kafka_format import read_batches

import logcore
from logcore import BatchBuilder, CorruptRecordError, crc32c, validate_for_append
from logcore._ref import index as ref_index
from logcore._ref import segment as ref_segment

IMPLS = [("python", ref_index, ref_segment)]
if logcore.IMPLEMENTATION == "c":
    from logcore import _index, _segment

    IMPLS.append(("c", _index, _segment))

BASE = 100


def write_segment(path: str, counts: list[int], gap_every: int = 0) -> list[tuple[int, int, int, int]]:
    """Batches with `counts` records each at offsets from BASE (gaps if gap_every)."""
    out = []
    pos, nxt = 0, BASE
    with open(path, "wb") as f:
        for i, n in enumerate(counts):
            b = BatchBuilder()
            for j in range(n):
                b.append(b"v" * (5 + (i * 7 + j) % 40), timestamp_ms=1000 + i * 10 + j)
            buf = bytearray(b.build())
            info = validate_for_append(buf, next_offset=nxt, max_message_bytes=1 << 20)
            f.write(buf)
            out.append((pos, len(buf), info.first_offset, info.last_offset))
            pos += len(buf)
            nxt = info.last_offset + 1 + (3 if gap_every and i % gap_every == 0 else 0)
    return out


@pytest.fixture
def segment(tmp_path):
    rnd = random.Random(5)
    path = str(tmp_path / "00000000000000000100.log")
    batches = write_segment(path, [rnd.randrange(1, 8) for _ in range(120)], gap_every=7)
    return path, batches


def build_index(mod, tmp_path, batches, interval: int):
    oi = mod.OffsetIndex(str(tmp_path / f"{mod.__name__}.index"), BASE, 1 << 16)
    since = 0
    for pos, size, _base, last in batches:
        if since > interval:
            oi.append(last, pos)
            since = 0
        since += size
    return oi


@pytest.mark.parametrize("impl", IMPLS, ids=[i[0] for i in IMPLS])
def test_search_for_offset(segment, impl) -> None:
    path, batches = segment
    _name, _idx, seg = impl
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.path.getsize(path)
        for pos, size, base, last in batches:
            for target in (base, last):
                assert seg.search_for_offset(fd, 0, end, target) == (pos, size, base, last)
        assert seg.search_for_offset(fd, 0, end, batches[-1][3] + 1) is None
        p, s, b, la = batches[10]
        assert seg.search_for_offset(fd, p, end, 0) == (p, s, b, la)  # from a boundary
        assert seg.search_for_offset(fd, 0, p + s - 1, la) is None  # batch cut by end
        with pytest.raises(CorruptRecordError) as ei:
            seg.search_for_offset(fd, p + 1, end, la)  # not a batch boundary
        assert ei.value.position == p + 1
    finally:
        os.close(fd)


@pytest.mark.parametrize("interval", [0, 300, 4096])
def test_locate_and_scan_region_agree_with_the_twin(tmp_path, segment, interval) -> None:
    path, batches = segment
    fd = os.open(path, os.O_RDONLY)
    end = os.path.getsize(path)
    idxs = [(name, build_index(idx, tmp_path, batches, interval), seg) for name, idx, seg in IMPLS]
    rnd = random.Random(interval)
    try:
        for _ in range(300):
            target = rnd.randrange(BASE - 2, batches[-1][3] + 3)
            max_bytes = rnd.choice([0, 1, 60, 500, 3000, 100_000])
            max_offset = rnd.choice([target, target + 1, target + 30, 2**62])
            one = rnd.random() < 0.7
            answers = []
            for _name, oi, seg in idxs:
                got = seg.locate(fd, end, oi, target, max_bytes, max_offset, one)
                assert got == seg.locate(fd, end, oi, target, max_bytes, max_offset, one, False)
                answers.append(got)
                if got is not None and got[1]:
                    start, size, first, last = got
                    region = seg.scan_region(fd, start, end, max_bytes, max_offset, one)
                    assert region == (size, last)
            assert len(set(answers)) == 1
            expect = next((b for b in batches if b[3] >= target), None)
            got = answers[0]
            if expect is None:
                assert got is None
                continue
            start, size, first, last = got
            assert (start, first) == (expect[0], expect[2])
            taken = [b for b in batches if start <= b[0] < start + size]
            if size:
                assert sum(b[1] for b in taken) == size and taken[-1][3] == last
                assert last < max_offset
                assert size <= max_bytes or (len(taken) == 1 and one)
    finally:
        os.close(fd)
        for _n, oi, _s in idxs:
            oi.close()


@pytest.mark.parametrize("damage", ["none", "crc", "length", "magic", "offsets", "truncate"])
def test_recover_scan_agrees_with_the_twin_and_the_reader(tmp_path, segment, damage) -> None:
    path, batches = segment
    victim = batches[50]
    with open(path, "r+b") as f:
        if damage == "crc":
            f.seek(victim[0] + 70)
            f.write(b"\xee")
        elif damage == "length":
            f.seek(victim[0] + 8)
            f.write((10).to_bytes(4, "big"))
        elif damage == "magic":
            f.seek(victim[0] + 16)
            f.write(b"\x01")
        elif damage == "offsets":
            f.seek(victim[0])
            f.write((BASE).to_bytes(8, "big"))  # goes backwards (CRC does not cover it)
        elif damage == "truncate":
            f.truncate(victim[0] + 30)
    size = os.path.getsize(path)
    expect_end = size if damage == "none" else victim[0]
    if damage == "none":
        assert read_batches(path)[1] == size
    results = []
    fd = os.open(path, os.O_RDONLY)
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    try:
        for name, idx, seg in IMPLS:
            oi = idx.OffsetIndex(str(tmp_path / f"{name}.index"), BASE, 1 << 16)
            ti = idx.TimeIndex(str(tmp_path / f"{name}.timeindex"), BASE, 1 << 16)
            valid, count, nxt, max_ts, off_max, error = seg.recover_scan(
                mm, size, BASE, 300, oi, ti, crc32c)
            assert valid == expect_end
            assert (error is None) == (damage == "none")
            kept = [b for b in batches if b[0] < valid]
            assert count == len(kept) and nxt == kept[-1][3] + 1
            entries = [oi.entry(i) for i in range(oi.entries)]
            tentries = [ti.entry(i) for i in range(ti.entries)]
            results.append((valid, count, nxt, max_ts, off_max, error, entries, tentries))
            oi.close()
            ti.close()
    finally:
        mm.close()
        os.close(fd)
    assert all(r == results[0] for r in results)
    entries = results[0][6]
    starts = {b[0]: b for b in batches}
    assert entries and all(pos in starts and starts[pos][3] == off for off, pos in entries)


def test_recover_scan_rejects_offsets_outside_the_segment(tmp_path) -> None:
    path = str(tmp_path / "s.log")
    write_segment(path, [3, 3])
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    try:
        for name, idx, seg in IMPLS:
            oi = idx.OffsetIndex(str(tmp_path / f"{name}.index"), 1000, 800)
            ti = idx.TimeIndex(str(tmp_path / f"{name}.timeindex"), 1000, 1200)
            valid, count, nxt, *_r, error = seg.recover_scan(mm, size, 1000, 0, oi, ti, crc32c)
            assert (valid, count, nxt) == (0, 0, 1000) and "offsets" in error
            oi.close()
            ti.close()
    finally:
        mm.close()
        os.close(fd)
