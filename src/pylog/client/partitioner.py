"""Kafka's built-in partitioner: murmur2 for keyed records, sticky for keyless ones.

Keyed: ``toPositive(murmur2(key)) % num_partitions`` over all partitions, exactly as the
Java client's ``BuiltInPartitioner.partitionForKey`` (``Utils.murmur2`` with seed
0x9747b28c, ``toPositive`` masking the sign bit rather than taking ``abs``), so the same
key lands on the same partition whichever client wrote it.

Keyless (KIP-480, KIP-794): stick to one partition until about ``batch.size`` bytes went
to it, then move to another one picked at random among partitions that have a leader, so
batches fill up instead of spreading one record per partition.

Not thread-safe by itself: the producer calls it under its accumulator's lock.
"""

from __future__ import annotations

import random

__all__ = ["murmur2", "partition_for_key", "partitions_for_keys", "StickyPartitioner"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data`` as a signed 32-bit int."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = (data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24))
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """``toPositive(murmur2(key)) % num_partitions`` (``BuiltInPartitioner.partitionForKey``)."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def partitions_for_keys(keys: list[bytes | None], num_partitions: int) -> list[int]:
    """The partition of every key, -1 for a None key (``Producer.send_many``).

    Raises:
        TypeError: a key that is neither bytes nor None (naming its index).
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    out = [-1] * len(keys)
    for i, k in enumerate(keys):
        if type(k) is bytes:
            out[i] = (murmur2(k) & 0x7FFFFFFF) % num_partitions
        elif k is not None:
            raise TypeError(f"key {i} must be bytes or None, got {type(k).__name__}")
    return out


class StickyPartitioner:
    """Per-topic sticky choice for keyless records (switch after ``batch_size`` bytes)."""

    __slots__ = ("batch_size", "_current", "_rng")

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self.batch_size = max(1, batch_size)
        self._current: dict[str, list[int]] = {}  # topic -> [partition, bytes since switch]
        self._rng = rng or random.Random()

    def partition(self, topic: str, num_partitions: int, available: list[int],
                  record_size: int) -> int:
        """The partition for a keyless record of ``record_size`` bytes.

        Args:
            available: partitions with a leader now (all partitions if empty).
        """
        state = self._current.get(topic)
        if state is None or state[0] >= num_partitions or state[1] >= self.batch_size:
            state = self._current[topic] = [self._pick(num_partitions, available,
                                                       None if state is None else state[0]), 0]
        state[1] += record_size
        return state[0]

    def _pick(self, num_partitions: int, available: list[int], previous: int | None) -> int:
        choices = available or list(range(num_partitions))
        if len(choices) > 1 and previous is not None:
            choices = [p for p in choices if p != previous]
        return choices[self._rng.randrange(len(choices))]
