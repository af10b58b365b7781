"""Fetched bytes to records and columns: positions inside compressed batches, control
batches, aborted transactions under read_committed, CRC checks; records decoded by the
Python loop and by the compiled one (``pylog.client._crecords``) alike."""

from __future__ import annotations

import struct

import pytest

import logcore
from pylog import errors
from pylog.client import _native
from pylog.client.aio import _fetcher as fetcher_module
from pylog.client.aio._fetcher import CompletedFetch, Fetcher, PartitionState
from pylog.client.config import CONSUMER, resolve
from pylog.client.records import TopicPartition

TP = TopicPartition("t", 0)


@pytest.fixture(autouse=True, params=["python", "c"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on the Python decoding loop and on the compiled one."""
    if request.param == "python":
        monkeypatch.setattr(fetcher_module, "decode_records", None)
    elif _native.decode_records is None:
        pytest.skip("the compiled client units are not loaded (LOGCORE_PUREPYTHON=1)")
    return str(request.param)


def _batch(base: int, n: int, *, compression: str = "none", pid: int = -1,
           transactional: bool = False) -> bytes:
    b = logcore.BatchBuilder(compression=compression, base_offset=base,  # type: ignore[arg-type]
                             producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                             base_sequence=0 if pid >= 0 else -1, transactional=transactional)
    for i in range(n):
        b.append(b"v%d" % (base + i), key=b"k%d" % (base + i), timestamp_ms=1000 + base + i)
    return b.build()


def _marker(offset: int, pid: int, commit: bool) -> bytes:
    b = logcore.BatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=0,
                             transactional=True, is_control=True)
    b.append(struct.pack(">hi", 0, 0), key=struct.pack(">hh", 0, 1 if commit else 0),
             timestamp_ms=5000)
    return b.build()


def _fetcher(**overrides: object) -> tuple[Fetcher, PartitionState]:
    settings = resolve(CONSUMER, {"bootstrap.servers": "h:1", **overrides}, {})
    st = PartitionState()
    f = Fetcher(None, {TP: st}, settings)  # type: ignore[arg-type]
    return f, st


def test_records_start_at_the_position_inside_a_compressed_batch() -> None:
    f, st = _fetcher()
    data = _batch(0, 10, compression="lz4") + _batch(10, 5)
    st.position = 4
    f.completed[TP] = CompletedFetch(TP, memoryview(data), 4, [])
    recs = f.take_records(3)
    assert [r.offset for r in recs] == [4, 5, 6] and st.position == 7
    recs = f.take_records(100)
    assert [r.offset for r in recs] == list(range(7, 15)) and st.position == 15
    assert recs[0].key == b"k7" and recs[0].value == b"v7" and recs[0].timestamp == 1007


def test_columns_are_sliced_to_the_position() -> None:
    f, st = _fetcher()
    data = _batch(0, 10, compression="zstd") + _batch(10, 5)
    st.position = 6
    f.completed[TP] = CompletedFetch(TP, memoryview(data), 6, [])
    cols = f.take_columns()[TP]
    assert list(cols.offsets) == list(range(6, 15)) and st.position == 15
    first = bytes(cols.value_data[cols.value_offsets[0]:cols.value_offsets[1]])
    assert first == b"v6"
    assert list(cols.timestamps[:2]) == [1006, 1007]


def test_read_committed_drops_aborted_and_control_batches() -> None:
    f, st = _fetcher(**{"isolation.level": "read_committed"})
    data = (_batch(0, 2) + _batch(2, 2, pid=7, transactional=True) + _marker(4, 7, False)
            + _batch(5, 2, pid=8, transactional=True) + _marker(7, 8, True) + _batch(8, 1))
    st.position = 0
    f.completed[TP] = CompletedFetch(TP, data, 0, [(7, 2)])
    recs = f.take_records(100)
    assert [r.offset for r in recs] == [0, 1, 5, 6, 8]
    assert st.position == 9
    # read_uncommitted keeps the aborted records but still never shows markers.
    f2, st2 = _fetcher()
    st2.position = 0
    f2.completed[TP] = CompletedFetch(TP, data, 0, [(7, 2)])
    assert [r.offset for r in f2.take_records(100)] == [0, 1, 2, 3, 5, 6, 8]
    f3, st3 = _fetcher(**{"isolation.level": "read_committed"})
    st3.position = 0
    f3.completed[TP] = CompletedFetch(TP, data, 0, [(7, 2)])
    assert list(f3.take_columns()[TP].offsets) == [0, 1, 5, 6, 8]


def test_truncated_tail_is_left_for_the_next_fetch() -> None:
    f, st = _fetcher()
    data = _batch(0, 3) + _batch(3, 3)[:-5]
    st.position = 0
    f.completed[TP] = CompletedFetch(TP, data, 0, [])
    assert [r.offset for r in f.take_records(100)] == [0, 1, 2]
    assert st.position == 3


def test_corrupt_batch_raises_corrupt_message() -> None:
    f, st = _fetcher()
    data = bytearray(_batch(0, 3))
    data[-1] ^= 0xFF
    st.position = 0
    f.completed[TP] = CompletedFetch(TP, bytes(data), 0, [])
    with pytest.raises(errors.CorruptMessageError, match="t-0: corrupt record batch"):
        f.take_records(10)


def test_stale_data_after_seek_is_not_returned() -> None:
    f, st = _fetcher()
    st.position = 0
    f.completed[TP] = CompletedFetch(TP, _batch(0, 3), 0, [])
    st.paused = True
    assert f.take_records(10) == [] and TP not in f.completed


# -- fetch sessions (KIP-227), the client side ----------------------------------------------

def test_a_fetch_session_names_only_what_moved() -> None:
    from pylog.client.aio._fetcher import FetchSession

    s = FetchSession()
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    # No session yet: everything, epoch 0 (asks for one).
    assert s.request_parts({a: 5, b: 7}) == ({a: 5, b: 7}, {})
    assert s.epoch == 0
    s.answered(42, {a: 5, b: 7})
    assert (s.session_id, s.epoch) == (42, 1)
    # b moved, c is new, a unchanged: b and c sent; a stays in the session unnamed.
    assert s.request_parts({a: 5, b: 9, c: 0}) == ({b: 9, c: 0}, {})
    s.answered(42, {a: 5, b: 9, c: 0})
    assert s.epoch == 2
    # a is no longer fetched (its data waits to be polled): forgotten.
    assert s.request_parts({b: 9, c: 0}) == ({}, {"t": [0]})
    # The broker made no session: full fetches go on asking for one.
    s.reset()
    s.answered(0, {a: 1})
    assert (s.session_id, s.epoch, s.request_parts({a: 1})) == (0, 0, ({a: 1}, {}))
    # Epochs wrap past int32 max to 1.
    s.answered(7, {a: 1})
    s.epoch = 2**31 - 1
    s.answered(7, {a: 1})
    assert s.epoch == 1


# -- prefetching: the next fetch of a partition goes out before its data is handed out --------

class _Answer:
    """A Fetch response's partition, as ``_on_partition`` reads it."""

    def __init__(self, records: bytes | None, error_code: int = 0) -> None:
        self.error_code = error_code
        self.records = records
        self.high_watermark = self.last_stable_offset = 100
        self.log_start_offset = 0
        self.aborted_transactions = None


def test_the_next_fetch_follows_the_data_waiting_and_is_handed_out_after_it() -> None:
    f, st = _fetcher()
    st.position = 0
    f._on_partition(TP, _Answer(_batch(0, 3)), {TP: 0})
    assert f.completed[TP].next_offset == 3  # read from the headers on arrival
    assert f._fetch_offset(TP, st) == 3  # the prefetch starts after the waiting data
    f._on_partition(TP, _Answer(_batch(3, 3)), {TP: 3})
    assert TP in f.prefetched and f._fetch_offset(TP, st) is None  # two fetches' data: enough
    assert [r.offset for r in f.take_records(2)] == [0, 1]
    assert [r.offset for r in f.take_records(10)] == [2, 3, 4, 5]  # followed on in one poll
    assert st.position == 6 and not f.completed and not f.prefetched
    assert f._fetch_offset(TP, st) == 6


def test_a_prefetch_that_no_longer_follows_on_is_dropped() -> None:
    f, st = _fetcher()
    st.position = 0
    f._on_partition(TP, _Answer(_batch(0, 3)), {TP: 0})
    f.drop(TP)  # seek(10) while the prefetch from 3 is in flight
    st.position = 10
    f._on_partition(TP, _Answer(_batch(3, 3)), {TP: 3})
    assert not f.completed and not f.prefetched
    # Promoted data must start at the position: a prefetch kept across a seek is dropped.
    f._on_partition(TP, _Answer(_batch(10, 2)), {TP: 10})
    f.prefetched[TP] = CompletedFetch(TP, _batch(20, 2), 20, [])
    assert [r.offset for r in f.take_records(10)] == [10, 11]
    assert not f.completed and not f.prefetched


def test_an_error_for_the_prefetched_offsets_waits_until_they_are_fetched() -> None:
    f, st = _fetcher()
    st.position = 0
    f._on_partition(TP, _Answer(_batch(0, 3)), {TP: 0})
    f._on_partition(TP, _Answer(None, error_code=1), {TP: 3})  # OFFSET_OUT_OF_RANGE
    assert f.out_of_range == [] and not f.errors and TP not in f.prefetched
    assert [r.offset for r in f.take_records(10)] == [0, 1, 2]


def test_columns_hand_out_one_fetch_per_partition_per_call() -> None:
    f, st = _fetcher()
    st.position = 0
    f._on_partition(TP, _Answer(_batch(0, 3)), {TP: 0})
    f._on_partition(TP, _Answer(_batch(3, 2)), {TP: 3})
    assert list(f.take_columns()[TP].offsets) == [0, 1, 2]
    assert list(f.take_columns()[TP].offsets) == [3, 4]
    assert st.position == 5 and not f.completed and not f.prefetched


def test_corrupt_headers_stop_the_prefetch_and_fail_when_handed_out() -> None:
    f, st = _fetcher()
    st.position = 0
    bad = bytearray(_batch(0, 3))
    bad[16] = 7  # magic
    f._on_partition(TP, _Answer(bytes(bad)), {TP: 0})
    assert f._fetch_offset(TP, st) is None  # nothing is fetched after data we cannot read
    with pytest.raises(errors.CorruptMessageError):
        f.take_records(10)


def test_out_of_range_names_the_offset_once() -> None:
    """The consumer resets only if the position is still the offset the broker refused: a
    report that arrives after a seek (or twice, from a prefetch) must not reset it again."""
    f, st = _fetcher()
    st.position = 100
    f._on_partition(TP, _Answer(None, error_code=1), {TP: 100})
    f._on_partition(TP, _Answer(None, error_code=1), {TP: 100})
    assert f.out_of_range == [(TP, 100)]
    st.position = 150  # seek: a late answer for 100 is stale
    f._on_partition(TP, _Answer(None, error_code=1), {TP: 100})
    assert f.out_of_range == [(TP, 100)]


def test_columns_without_value_copies_point_into_the_fetched_bytes() -> None:
    """take_columns(copy_values=False): values of uncompressed batches stay in the fetched
    frame (kept alive by the columns), sliced to the position like the copies; a fetch
    half handed out as records gives the same layout."""
    f, st = _fetcher()
    frame = bytearray(_batch(0, 10) + _batch(10, 5))
    st.position = 6
    f.completed[TP] = CompletedFetch(TP, memoryview(frame), 6, [])
    cols = f.take_columns(copy_values=False)[TP]
    assert cols.value_offsets is None and list(cols.offsets) == list(range(6, 15))
    data = cols.value_data
    assert data.nbytes == len(frame)  # the frame itself
    values = [data[s:s + n].tobytes() for s, n in zip(cols.value_starts, cols.value_lengths, strict=True)]
    assert values == [b"v%d" % i for i in range(6, 15)]
    with pytest.raises(BufferError):
        frame.extend(b"x")  # the columns hold the frame: it cannot be resized or reused

    f.completed[TP] = CompletedFetch(TP, memoryview(_batch(15, 4)), 15, [])
    assert [r.offset for r in f.take_records(1)] == [15]
    rest = f.take_columns(copy_values=False)[TP]
    assert rest.value_offsets is None and list(rest.offsets) == [16, 17, 18]
    assert [rest.value_data[s:s + n].tobytes()
            for s, n in zip(rest.value_starts, rest.value_lengths, strict=True)] == [b"v16", b"v17", b"v18"]
