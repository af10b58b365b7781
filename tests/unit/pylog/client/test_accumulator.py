"""The producer's accumulator: batching per partition, the buffer.memory bound, retry order,
and batches encoded by append_many equal to record-by-record ones; every test runs on both
implementations (the Python reference and the compiled twin in ``pylog.client._csend``)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import logcore
from pylog.client import _native
from pylog.client.aio import _accumulator
from pylog.client.aio._accumulator import BATCH_OVERHEAD, RecordAccumulator, estimate_size

IMPLEMENTATIONS = {"python": _accumulator.RecordAccumulator}
if _native.IMPLEMENTATION == "c":
    IMPLEMENTATIONS["c"] = _native.RecordAccumulator


@pytest.fixture(autouse=True, params=sorted(IMPLEMENTATIONS))
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(sys.modules[__name__], "RecordAccumulator", IMPLEMENTATIONS[request.param])
    return str(request.param)


def test_the_compiled_twin_is_loaded_unless_pure_python_is_asked_for() -> None:
    assert _native.IMPLEMENTATION == ("python" if logcore.IMPLEMENTATION == "python" else "c")


class _Fut:
    def __init__(self) -> None:
        self.result = None

    def done(self) -> bool:
        return False


def _acc(batch_size: int = 1000, memory: int = 10_000) -> tuple[RecordAccumulator, list[int]]:
    wakes: list[int] = []
    return RecordAccumulator(batch_size, memory, lambda: wakes.append(1)), wakes


def _add(acc: RecordAccumulator, p: int, value: bytes, key: bytes | None = None,
         headers=None) -> int:
    size = estimate_size(key, value, headers)
    assert acc.reserve(size, 0, blocking=False)
    assert acc.append("t", p, value, key, 1_700_000_000_000, headers, size, _Fut(),
                      reserved=True) is not None
    return size


def test_batches_fill_per_partition_and_wake_the_sender() -> None:
    acc, wakes = _acc(batch_size=320)
    _add(acc, 0, b"x" * 100)
    assert len(wakes) == 1  # a first batch for the partition
    _add(acc, 0, b"x" * 100)
    _add(acc, 1, b"y")
    _add(acc, 0, b"x" * 100)  # does not fit: a second batch for partition 0
    q0 = acc.queues[("t", 0)]
    assert [len(b) for b in q0] == [2, 1]
    assert [len(b) for b in acc.queues[("t", 1)]] == [1]
    assert len(wakes) >= 3
    assert len(acc.incomplete) == 3


def test_append_takes_memory_or_refuses() -> None:
    acc, _ = _acc(memory=500)
    placed = acc.append("t", 0, b"a" * 300, None, 0, None, 321, None)
    assert placed is not None and placed[1] == 0 and acc.used == 321
    assert acc.append("t", 0, b"b" * 300, None, 0, None, 321, None) is None
    assert acc.used == 321 and len(acc.queues[("t", 0)][0]) == 1  # nothing added


def test_memory_is_reserved_and_given_back() -> None:
    acc, _ = _acc(memory=1000)
    used = _add(acc, 0, b"a" * 400) + _add(acc, 0, b"b" * 400)
    assert acc.used == used
    assert not acc.reserve(400, 0, blocking=False)
    assert not acc.reserve(400, 0.05, blocking=True)  # blocks, then gives up
    batch = acc.queues[("t", 0)].popleft()
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(acc.reserve(400, 5.0, blocking=True)))
    t.start()
    time.sleep(0.05)
    assert acc.waiting_for_memory == 1
    acc.release(batch)
    t.join(5)
    assert got == [True]
    assert acc.used == 400
    acc.release(batch)  # twice is harmless
    assert acc.used == 400


def test_requeue_keeps_sequence_order_before_new_batches() -> None:
    acc, _ = _acc(batch_size=50)
    for _ in range(3):
        _add(acc, 0, b"z" * 40)
    q = acc.queues[("t", 0)]
    b0, b1, b2 = q.popleft(), q.popleft(), q[0]
    for seq, b in ((0, b0), (1, b1)):
        b.encode("none", 7, 0, seq)
    acc.requeue(b1)
    acc.requeue(b0)
    assert list(q) == [b0, b1, b2]


def test_append_many_encoding_equals_record_by_record() -> None:
    acc, _ = _acc(batch_size=10**6, memory=10**7)
    rows = [(b"v%d" % i, (b"k%d" % i) if i % 3 else None) for i in range(50)]
    for v, k in rows:
        _add(acc, 0, v, k)
    batch = acc.queues[("t", 0)][0]
    data = batch.encode("zstd", 5, 1, 100)
    ref = logcore.BatchBuilder(compression="zstd", producer_id=5, producer_epoch=1,
                               base_sequence=100)
    for v, k in rows:
        ref.append(v, key=k, timestamp_ms=1_700_000_000_000)
    got = list(logcore.RecordBatch(data))
    want = list(logcore.RecordBatch(ref.build()))
    assert [(r.key, r.value, r.timestamp) for r in got] == [(r.key, r.value, r.timestamp) for r in want]
    rb = logcore.RecordBatch(data)
    assert (rb.producer_id, rb.producer_epoch, rb.base_sequence) == (5, 1, 100)
    assert batch.encode("none", 9, 9, 9) is data  # kept for retries: same bytes


def test_headers_switch_to_per_record_appends() -> None:
    acc, _ = _acc(batch_size=10**6, memory=10**7)
    _add(acc, 0, b"a")
    _add(acc, 0, b"b", headers=[("h", b"1"), ("n", None)])
    _add(acc, 0, b"c")
    data = acc.queues[("t", 0)][0].encode("none", -1, -1, -1)
    recs = list(logcore.RecordBatch(data))
    assert [list(r.headers) for r in recs] == [[], [("h", b"1"), ("n", None)], []]
    assert acc.queues[("t", 0)][0].size > BATCH_OVERHEAD


def test_append_batch_queues_a_whole_batch_behind_the_open_one() -> None:
    acc, wakes = _acc(batch_size=1000, memory=10_000)
    first = _add(acc, 0, b"a" * 10)
    values, keys = [b"v1", None, b"v3"], [b"k1", b"k2", None]
    size = sum(estimate_size(k, v, None) for k, v in zip(keys, values, strict=True))
    assert acc.reserve(size, 0, blocking=False)
    wakes.clear()
    batch = acc.append_batch("t", 0, values, keys, [7, 7, 7], size)
    assert wakes == [1]
    q = acc.queues[("t", 0)]
    assert [len(b) for b in q] == [1, 3] and q[-1] is batch
    assert (batch.values, batch.keys, batch.timestamps) == (values, keys, [7, 7, 7])
    assert batch.size == BATCH_OVERHEAD + size and acc.used == first + size
    # A record sent after it joins it (it is the partition's open batch now), in order.
    _add(acc, 0, b"late")
    assert batch.values == [b"v1", None, b"v3", b"late"] and batch.keys[-1] is None
    built = batch.encode("none", -1, -1, -1)
    assert [(r.key, r.value) for r in logcore.RecordBatch(built)] == [
        (b"k1", b"v1"), (b"k2", None), (None, b"v3"), (None, b"late")]
    acc.release(batch)
    assert acc.used == first and batch.batch_id not in acc.incomplete
