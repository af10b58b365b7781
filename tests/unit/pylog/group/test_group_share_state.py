"""Share sessions (pylog.group.share.sessions) and the records of __share_group_state
(pylog.group.share.state_store): encoding, decoding, replay of snapshots and updates."""

from __future__ import annotations

import struct
import uuid

import pytest

from pylog.errors import InvalidShareSessionEpochError, ShareSessionNotFoundError
from pylog.group.share.sessions import ShareSessionCache
from pylog.group.share.share_partition import AcknowledgeType as A
from pylog.group.share.share_partition import SharePartition, StateBatch
from pylog.group.share.state_store import _apply_update, decode_state, encode_snapshot
from pylog.protocol._records import ShareUpdateKey, ShareUpdateValue

T = uuid.UUID(int=5)


def test_session_epochs() -> None:
    cache = ShareSessionCache(max_sessions=2)
    s, old = cache.open("g", "m")
    assert old is None and s.epoch == 1
    assert cache.use("g", "m", 1) is s and s.epoch == 2
    with pytest.raises(InvalidShareSessionEpochError):
        cache.use("g", "m", 1)
    with pytest.raises(ShareSessionNotFoundError):
        cache.use("g", "x", 1)
    # Reopening replaces; a full cache evicts the least recently used.
    s2, old = cache.open("g", "m")
    assert old is s and s2.epoch == 1
    cache.open("g", "n")
    _, evicted = cache.open("g", "o")
    assert evicted is s2 and cache.get("g", "m") is None and len(cache) == 2
    assert cache.check_final("g", "n") is not None
    cache.remove_group("g")
    assert len(cache) == 0


def test_snapshot_round_trip() -> None:
    sp = SharePartition(5, delivery_count_limit=5, max_in_flight=100)
    sp.acquire("m", 5, 12, 100, 0, 1000)
    sp.acknowledge("m", [(6, 7, [A.ACCEPT]), (8, 8, [A.REJECT])])
    key, value = encode_snapshot(("g", T, 3), sp)
    assert struct.unpack_from(">h", key)[0] == 0 and struct.unpack_from(">h", value)[0] == 0
    version, skey, v = decode_state(key, value)
    assert version == 0 and skey == ("g", T, 3)
    assert v.start_offset == 5 and [(b.first_offset, b.last_offset, b.delivery_state,
                                     b.delivery_count) for b in v.state_batches] == [
        (5, 5, 0, 1), (6, 7, 2, 1), (8, 8, 4, 1), (9, 12, 0, 1)]
    assert decode_state(*encode_snapshot(("g", T, 3), None))[2] is None
    assert decode_state(struct.pack(">h", 7) + b"x", None) is None
    with pytest.raises(ValueError):
        decode_state(b"\x00", None)


def test_a_kafka_update_applies_over_the_snapshot() -> None:
    saved = (5, [StateBatch(5, 12, 0, 1)], 0)
    sb = ShareUpdateValue.StateBatch
    raw_key = struct.pack(">h", 1) + ShareUpdateKey(group_id="g", topic_id=T, partition=0).encode(1)
    raw_value = struct.pack(">h", 0) + ShareUpdateValue(
        snapshot_epoch=0, leader_epoch=0, start_offset=7,
        state_batches=[sb(first_offset=9, last_offset=10, delivery_state=2, delivery_count=2)],
    ).encode(0)
    version, key, v = decode_state(raw_key, raw_value)
    assert version == 1 and key == ("g", T, 0)
    start, batches, _ = _apply_update(saved, v)
    assert start == 7
    assert batches == [StateBatch(7, 8, 0, 1), StateBatch(9, 10, 2, 2), StateBatch(11, 12, 0, 1)]


def test_merge_batches_fast_path_matches_the_per_offset_merge() -> None:
    """A whole window (what pylog's leaders write) takes the fast path; the result is what
    the per-offset merge gives, for random windows over random stored states."""
    import random

    from pylog.group.share import state_store

    rng = random.Random(7)

    def runs(start: int, end: int) -> list[StateBatch]:
        out: list[StateBatch] = []
        off = start
        while off < end:
            last = min(end - 1, off + rng.randrange(0, 4))
            state, count = rng.choice((0, 2, 4)), rng.randrange(0, 3)
            if out and (out[-1].delivery_state, out[-1].delivery_count) == (state, count):
                out[-1] = StateBatch(out[-1].first_offset, last, state, count)
            else:
                out.append(StateBatch(off, last, state, count))
            off = last + 1
        return out

    fast = 0
    for _ in range(500):
        old_start = rng.randrange(0, 10)
        old = runs(old_start, old_start + rng.randrange(0, 15))
        new_start = rng.choice((-1, old_start, old_start + rng.randrange(0, 8)))
        base = old_start if new_start < 0 else new_start
        new = runs(base, base + rng.randrange(0, 20))
        got = state_store.merge_batches(old_start, old, new_start, new)
        covered = state_store._covers(base, new, old)
        fast += covered
        # The per-offset merge, written out here.
        per = {}
        for b in old + new:
            for off in range(max(b.first_offset, base), b.last_offset + 1):
                per[off] = (b.delivery_state, b.delivery_count)
        want: list[StateBatch] = []
        for off in sorted(per):
            st, c = per[off]
            if want and want[-1].last_offset == off - 1 and (want[-1].delivery_state, want[-1].delivery_count) == (st, c):
                want[-1] = StateBatch(want[-1].first_offset, off, st, c)
            else:
                want.append(StateBatch(off, off, st, c))
        assert got == (base, want), (old_start, old, new_start, new)
    assert fast > 50  # the fast path was taken often enough to be tested
