"""``ConsumerRecord``: the Python reference and its compiled twin (``_crecords.pyx``) have
the same fields, lazy headers, equality (with each other too), repr and pickling; the
compiled decoding loop gives the records the Python loop gives, headers included."""

from __future__ import annotations

import pickle

import pytest

import logcore
from pylog.client import _native, records

TWINS = [records.PyConsumerRecord]
if records.ConsumerRecord is not records.PyConsumerRecord:
    TWINS.append(records.ConsumerRecord)

ARGS = ("t", 3, 42, 1_700_000_000_000, 0, b"k", b"v", None, 7)


def test_the_compiled_twin_serves_unless_pure_python_is_asked_for() -> None:
    compiled = records.ConsumerRecord is not records.PyConsumerRecord
    assert compiled == (logcore.IMPLEMENTATION == "c")
    assert (_native.decode_records is not None) == compiled


@pytest.mark.parametrize("cls", TWINS, ids=lambda c: c.__module__)
def test_fields_headers_repr_and_pickle(cls: type) -> None:
    r = cls(*ARGS)
    assert (r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, r.key, r.value,
            r.leader_epoch) == ("t", 3, 42, 1_700_000_000_000, 0, b"k", b"v", 7)
    assert r.headers == [] and r.headers is r.headers  # made once, on first access
    r.headers = [("h", b"1")]
    assert r.headers == [("h", b"1")]
    assert repr(r).startswith("ConsumerRecord(topic='t', partition=3, offset=42")
    back = pickle.loads(pickle.dumps(r))
    assert back == r and type(back) is cls
    assert cls(*ARGS[:8]).leader_epoch == -1
    with pytest.raises(TypeError):
        hash(r)


def test_the_twins_compare_equal_field_by_field() -> None:
    for a in TWINS:
        for b in TWINS:
            assert a(*ARGS) == b(*ARGS)
            assert a(*ARGS) != b(*ARGS[:2], 43, *ARGS[3:])
            assert (a(*ARGS) == object()) is False


@pytest.mark.skipif(_native.decode_records is None, reason="compiled units not loaded")
@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("log_append", [False, True])
def test_compiled_decoding_equals_the_python_loop(compression: str, log_append: bool) -> None:
    from pylog.client.aio._fetcher import Fetcher
    from pylog.client.config import CONSUMER, resolve
    from pylog.client.records import TopicPartition

    b = logcore.BatchBuilder(compression=compression, base_offset=100,  # type: ignore[arg-type]
                             timestamp_type="log_append" if log_append else "create",
                             partition_leader_epoch=5)
    for i in range(20):
        b.append(b"v%d" % i if i % 5 else None, key=b"k%d" % i if i % 3 else None,
                 timestamp_ms=1000 + i, headers=[("n", b"%d" % i), ("z", None)] if i % 4 == 0
                 else None)
    batch = logcore.RecordBatch(b.build())
    spans = [(batch, 0, 0)]
    fetcher = Fetcher(None, {}, resolve(CONSUMER, {"bootstrap.servers": "h:1"}, {}))  # type: ignore[arg-type]
    tp = TopicPartition("t", 2)
    compiled: list = []
    _native.decode_records(spans, "t", 2, 107, compiled)
    import pylog.client.aio._fetcher as fm

    saved, fm.decode_records = fm.decode_records, None
    try:
        python = fetcher._decode(tp, spans, 107)
    finally:
        fm.decode_records = saved
    assert [r.offset for r in compiled] == list(range(107, 120))
    assert len(python) == len(compiled)
    for p, c in zip(python, compiled, strict=True):
        assert p == c
        assert p.timestamp_type == c.timestamp_type == (1 if log_append else 0)
        assert c.leader_epoch == 5


def _compiled_records(n: int = 3) -> list:
    b = logcore.BatchBuilder(base_offset=0)
    for i in range(n):
        b.append(b"v%d" % i, key=b"k", timestamp_ms=1000 + i)
    out: list = []
    _native.decode_records([(logcore.RecordBatch(b.build()), 0, 0)], "t", 0, 0, out)
    return out


@pytest.mark.skipif(_native.decode_records is None, reason="compiled units not loaded")
def test_decoded_records_leave_the_collector_until_a_cycle_could_form() -> None:
    """Decoded records (atomic fields only) are untracked by the cyclic collector; a setter
    or the headers list (mutable) tracks them again, so a cycle through them is found."""
    import gc

    recs = _compiled_records()
    assert not any(gc.is_tracked(r) for r in recs)
    recs[0].value = b"x"
    assert gc.is_tracked(recs[0]) and recs[0].value == b"x"
    recs[0].value = b"y"  # tracked already: no second track
    assert gc.is_tracked(recs[0])
    recs[1].headers  # noqa: B018  (the mutable list is handed out)
    assert gc.is_tracked(recs[1])
    assert not gc.is_tracked(recs[2])

    freed = []

    class Canary:
        def __del__(self) -> None:
            freed.append(True)

    r = _compiled_records(1)[0]
    r.headers.append(("self", r))  # a cycle through the headers list
    r.headers.append(("canary", Canary()))  # type: ignore[arg-type]
    del r
    gc.collect()
    assert freed == [True]

    r = _compiled_records(1)[0]
    r.value = [r, Canary()]  # a cycle through a field set by the application
    del r
    gc.collect()
    assert freed == [True, True]
