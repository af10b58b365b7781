"""Kafka's built-in partitioner: murmur2 equal to kafka-python's (the Java client's
``Utils.murmur2``), toPositive % n, and the sticky choice for keyless records."""

from __future__ import annotations

import random
import warnings
from collections import Counter

from pylog.client.partitioner import StickyPartitioner, murmur2, partition_for_key


def _reference():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from kafka.partitioner.default import murmur2 as ref

    return ref


def test_murmur2_equals_kafka_python() -> None:
    ref = _reference()
    rng = random.Random(11)
    for n in range(600):
        data = bytes(rng.getrandbits(8) for _ in range(n % 67))
        assert murmur2(data) & 0xFFFFFFFF == ref(bytearray(data)), data
    # Known vectors of the Java client's murmur2 (Kafka's UtilsTest.testMurmur2).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_partition_for_key_equals_kafka_python_placement() -> None:
    ref = _reference()
    rng = random.Random(3)
    for _ in range(2000):
        key = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
        n = rng.randrange(1, 64)
        assert partition_for_key(key, n) == (ref(bytearray(key)) & 0x7FFFFFFF) % n


def test_sticky_partitioner_sticks_for_a_batch_then_moves() -> None:
    sp = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    first = [sp.partition("t", 6, list(range(6)), 100) for _ in range(10)]
    assert len(set(first)) == 1  # 1000 bytes on one partition
    nxt = sp.partition("t", 6, list(range(6)), 100)
    assert nxt != first[0]  # then another one
    # Over many records every available partition gets some, unavailable ones none.
    counts = Counter(sp.partition("u", 6, [0, 2, 4], 500) for _ in range(600))
    assert set(counts) == {0, 2, 4}


def test_sticky_partitioner_follows_partition_count_changes() -> None:
    sp = StickyPartitioner(batch_size=10**9, rng=random.Random(2))
    while sp.partition("t", 8, list(range(8)), 1) < 4:
        sp = StickyPartitioner(batch_size=10**9, rng=random.Random(random.random()))
    assert sp.partition("t", 2, [0, 1], 1) in (0, 1)  # shrunk view: picks again
