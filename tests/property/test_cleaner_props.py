"""logcore.cleaner against a model of compaction (Hypothesis).

The model keeps every appended record and, at each clean, applies Kafka's rules to the
section the clean covered: below the round's end only the latest record of each key
stays (offset, key, value and timestamp unchanged, order kept), a tombstone stays until
its batch's delete horizon (set by the first clean that recopied it) has passed, records
past the round's end in a recopied segment all stay, and nothing
at or above the first uncleanable offset (the active segment, the min compaction lag)
changes. After every clean, and after a reopen, the log must hold exactly the model's
records, and the active segment's bytes must be as before the clean.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from logcore import BatchBuilder, Log, LogConfig, ManualClock, iter_batches
from logcore.cleaner import Cleaner

T0 = 1_700_000_000_000

append_op = st.tuples(
    st.just("append"),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3).map(lambda x: x == 0)),
             min_size=1, max_size=4),
    st.integers(0, 40),
)
clean_op = st.tuples(st.just("clean"), st.integers(0, 300))
roll_op = st.tuples(st.just("roll"))
# phases of appends, each ending in a clean (sometimes after a roll, which makes the
# whole log cleanable)
phase_st = st.tuples(st.lists(append_op, min_size=1, max_size=15),
                     st.lists(roll_op, max_size=1), clean_op)
ops_st = st.lists(phase_st, min_size=1, max_size=6).map(
    lambda phases: [op for appends, roll, clean in phases for op in (*appends, *roll, clean)])


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None, int]]:
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        region = log.read(off, 1 << 30)
        if not region:
            break
        for b in iter_batches(region.read()):
            b.validate()
            out.extend((r.offset, r.key, r.value, r.timestamp) for r in b if r.offset >= off)
        off = region.last_offset + 1
    return out


class Model:
    def __init__(self) -> None:
        self.live: dict[int, tuple[bytes, bytes | None, int]] = {}
        self.batch_of: dict[int, int] = {}  # offset -> batch base
        self.horizon: dict[int, int | None] = {}  # batch base -> delete horizon
        self.first_dirty = 0

    def append(self, base: int, recs: list[tuple[bytes, bytes | None]], ts: int) -> None:
        self.horizon[base] = None
        for i, (k, v) in enumerate(recs):
            self.live[base + i] = (k, v, ts + i)
            self.batch_of[base + i] = base

    def upper(self, bases: list[int], now: int, lag: int) -> int:
        upper = bases[-1]
        if lag <= 0:
            return upper
        for i, b in enumerate(bases[:-1]):
            if bases[i + 1] <= self.first_dirty:
                continue
            ts = [t for o, (_k, _v, t) in self.live.items() if b <= o < bases[i + 1]]
            if ts and max(ts) > now - lag:
                return b
        return upper

    def clean(self, end: int, cleaned_upto: int, now: int, retention: int) -> None:
        """A clean whose map covered offsets below ``end`` and that recopied the segments
        below ``cleaned_upto`` (records from ``end`` on are kept whatever they are)."""
        latest: dict[bytes, int] = {}
        for o in sorted(self.live):
            if o < end:
                latest[self.live[o][0]] = o
        for o in sorted(self.live):
            if o >= end:
                break
            k, v, _ts = self.live[o]
            h = self.horizon[self.batch_of[o]]
            if latest[k] != o or (v is None and h is not None and h <= now):
                del self.live[o]
        # every recopied batch that still holds a tombstone gets its horizon (KIP-534)
        for o, (_k, v, _ts) in self.live.items():
            base = self.batch_of[o]
            if o < cleaned_upto and v is None and self.horizon[base] is None:
                self.horizon[base] = now + retention
        self.first_dirty = end

    def records(self) -> list[tuple[int, bytes, bytes | None, int]]:
        return [(o, *self.live[o]) for o in sorted(self.live)]


@settings(max_examples=int(os.environ.get("CLEANER_PROP_EXAMPLES", "100")), deadline=None)
@given(
    ops=ops_st,
    segment_bytes=st.integers(250, 1500),
    lag=st.sampled_from([0, 0, 60]),
    retention=st.sampled_from([0, 100, 10**9]),
    map_slots=st.sampled_from([6, 12, 200]),
)
def test_cleaner_matches_the_model(ops, segment_bytes, lag, retention, map_slots) -> None:
    d = tempfile.mkdtemp(prefix="cleanprop-")
    try:
        cfg = LogConfig(cleanup_policy="compact", segment_bytes=segment_bytes,
                        segment_index_bytes=4096, index_interval_bytes=64,
                        min_compaction_lag_ms=lag, delete_retention_ms=retention,
                        file_delete_delay_ms=0)
        clock = ManualClock(T0)
        log = Log(d, cfg, clock=clock)
        cleaner = Cleaner(24 * map_slots)
        model = Model()
        for op in ops:
            if op[0] == "append":
                recs = [(b"k%d" % k, None if tomb else b"v%d-%d" % (k, clock.time_ms()))
                        for k, tomb in op[1]]
                b = BatchBuilder()
                for i, (k, v) in enumerate(recs):
                    b.append(v, key=k, timestamp_ms=clock.time_ms() + i)
                info = log.append(b.build())
                model.append(info.first_offset, recs, clock.time_ms())
                clock.advance(op[2])
            elif op[0] == "roll":
                log.roll()
            else:
                clock.advance(op[1])
                now = clock.time_ms()
                bases = log.segment_base_offsets
                want_upper = model.upper(bases, now, lag)
                active = log.active_segment
                with open(active.file.path, "rb") as f:
                    active_bytes = f.read()
                stats = cleaner.clean(log, now)
                assert log.active_segment is active
                with open(active.file.path, "rb") as f:
                    assert f.read() == active_bytes
                if stats is None:
                    assert want_upper <= model.first_dirty
                    continue
                assert stats.first_uncleanable_offset == want_upper
                assert model.first_dirty == stats.first_dirty_offset
                assert stats.end_offset <= want_upper
                cleaned_upto = min(b for b in bases if b >= stats.end_offset)
                model.clean(stats.end_offset, cleaned_upto, now, retention)
            assert read_all(log) == model.records()
        log.close()
        with Log(d, cfg, clock=clock) as again:
            assert read_all(again) == model.records()
    finally:
        shutil.rmtree(d, ignore_errors=True)
