"""logcore._offset_map (compiled) and logcore._ref.offset_map (twin): same answers."""

from __future__ import annotations

import importlib
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logcore import IMPLEMENTATION, CorruptRecordError
from logcore._ref import offset_map as ref
from logcore._ref.builder import BatchBuilder

IMPLS = [ref]
if IMPLEMENTATION == "c":
    IMPLS.append(importlib.import_module("logcore._offset_map"))
ids = [m.__name__ for m in IMPLS]


def section(records, ts0=1000) -> tuple[bytes, int]:
    b = BatchBuilder()
    for i, (k, v) in enumerate(records):
        b.append(v, key=k, timestamp_ms=ts0 + 3 * i)
    return b.build()[61:], len(records)


@pytest.mark.parametrize("m", IMPLS, ids=ids)
def test_put_get_and_capacity(m) -> None:
    om = m.OffsetMap(24 * 10, 0.5)
    assert (om.slots, om.capacity, om.size) == (10, 5, 0)
    for i in range(5):
        om.put(b"k%d" % i, i)
    om.put(b"k1", 99)  # an update takes no new slot
    assert om.size == 5 and om.full and om.latest_offset == 99
    assert om.get(b"k1") == 99 and om.get(b"k4") == 4 and om.get(b"nope") == -1
    for i in range(5, 9):  # past the load factor up to slots - 1
        om.put(b"k%d" % i, i)
    with pytest.raises(OverflowError):
        om.put(b"k9", 9)
    assert om.get(b"absent") == -1  # a probe for a missing key ends
    om.clear()
    assert om.size == 0 and om.get(b"k1") == -1 and om.latest_offset == -1


@pytest.mark.parametrize("m", IMPLS, ids=ids)
def test_bad_arguments(m) -> None:
    with pytest.raises(ValueError):
        m.OffsetMap(47)
    with pytest.raises(ValueError):
        m.OffsetMap(1000, 0.0)
    with pytest.raises(ValueError):
        m.OffsetMap(1000, 1.5)
    om = m.OffsetMap(1000)
    sec, n = section([(b"a", b"1"), (b"b", b"2")])
    with pytest.raises(CorruptRecordError):
        om.put_records(sec[:-1], n, 0, 100)
    with pytest.raises(CorruptRecordError):
        om.put_records(sec, n + 1, 0, 100)
    with pytest.raises(CorruptRecordError):
        om.retain_records(sec + b"\x00", n, 0, 0, 0, True, 100)


def test_hash_is_the_same_in_both() -> None:
    if len(IMPLS) < 2:
        pytest.skip("compiled unit not loaded")
    c = IMPLS[1]
    for n in range(0, 70):
        key = bytes((i * 37 + n) & 0xFF for i in range(n))
        assert c.key_hash(key) == ref.key_hash(key)
    assert len(ref.key_hash(b"x")) == 16


records_st = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=6)), st.one_of(st.none(), st.binary(max_size=9))),
    min_size=1, max_size=30)


@settings(max_examples=int(os.environ.get("OFFSET_MAP_EXAMPLES", "60")), deadline=None)
@given(recs=records_st, base=st.integers(0, 2**40), stop=st.integers(0, 40),
       shift=st.integers(-5000, 5000), deletes=st.booleans(), past=st.integers(0, 40))
def test_records_walks_agree_with_a_model(recs, base, stop, shift, deletes, past) -> None:
    sec, n = section(recs)
    results = []
    for m in IMPLS:
        om = m.OffsetMap(24 * 200)
        put = om.put_records(sec, n, base, base + stop)
        # the model: the latest offset of each key below stop
        want = {}
        for i, (k, _v) in enumerate(recs):
            if k is not None and i < stop:
                want[k] = base + i
        assert put == sum(1 for i, (k, _v) in enumerate(recs) if k is not None and i < stop)
        for k, off in want.items():
            assert om.get(k) == off
        kept = om.retain_records(sec, n, base, 1000, 1000 + shift, deletes, base + past)
        model_kept = [
            i for i, (k, v) in enumerate(recs)
            if i >= past or (k is not None and (k not in want or base + i >= want[k])
                             and (v is not None or deletes))
        ]
        assert kept[1] == len(model_kept)
        assert kept[2] == sum(1 for i in model_kept if recs[i][1] is None)
        assert kept[3] == (max(1000 + 3 * i for i in model_kept) if model_kept else -1)
        assert kept[4] == sum(1 for i, (k, _v) in enumerate(recs) if k is None and i < past)
        # the kept section decodes to the kept records, timestamps unchanged by a rebase
        if model_kept:
            rebuilt = _decode(kept[0], len(model_kept), base, 1000 + shift)
            assert rebuilt == [(base + i, recs[i][0], recs[i][1], 1000 + 3 * i)
                               for i in model_kept]
        else:
            assert kept[0] == b""
        results.append(kept)
    assert all(r == results[0] for r in results)


def _decode(sec: bytes, count: int, base: int, base_ts: int):
    """Wrap a section in a batch header and read it back with the codec."""
    import struct

    from logcore import iter_batches
    from logcore._ref.crc32c import crc32c

    hdr = struct.Struct(">qiibIhiqqqhii")
    out = bytearray(61) + sec
    hdr.pack_into(out, 0, base, len(out) - 12, -1, 2, 0, 0, 2**31 - 1, base_ts, base_ts,
                  -1, -1, -1, count)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return [(r.offset, r.key, r.value, r.timestamp) for b in iter_batches(bytes(out)) for r in b]
