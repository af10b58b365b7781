"""OffsetIndex / TimeIndex against a sorted-list model (Hypothesis state machine).

After Kafka's storage/src/test/.../log/OffsetIndexTest.java (a sorted map as the oracle).
"""

from __future__ import annotations

import bisect
import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from logcore import OffsetIndex, TimeIndex

BASE = 1000
MAX_ENTRIES = 40


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="idx-")
        self.path = os.path.join(self.dir, "00000000000000001000.index")
        self.tpath = os.path.join(self.dir, "00000000000000001000.timeindex")
        self.idx = OffsetIndex(self.path, BASE, MAX_ENTRIES * 8)
        self.tidx = TimeIndex(self.tpath, BASE, MAX_ENTRIES * 12)
        self.model: list[tuple[int, int]] = []  # (offset, position)
        self.tmodel: list[tuple[int, int]] = []  # (timestamp, offset)

    def teardown(self) -> None:
        self.idx.close()
        self.tidx.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @precondition(lambda self: len(self.model) < MAX_ENTRIES)
    @rule(gap=st.integers(1, 1000), pos_gap=st.integers(1, 5000), ts_gap=st.integers(0, 50))
    def append(self, gap: int, pos_gap: int, ts_gap: int) -> None:
        off = (self.model[-1][0] if self.model else BASE - 1) + gap
        pos = (self.model[-1][1] if self.model else -1) + pos_gap
        self.idx.append(off, pos)
        self.model.append((off, pos))
        ts = (self.tmodel[-1][0] if self.tmodel else 0) + ts_gap
        if ts_gap == 0 and self.tmodel:
            assert self.tidx.append(ts, off) is False
        elif len(self.tmodel) < MAX_ENTRIES:
            assert self.tidx.append(ts, off) is True
            self.tmodel.append((ts, off))

    @rule(off=st.integers(BASE - 10, BASE + 50_000))
    def lookup(self, off: int) -> None:
        i = bisect.bisect_right([o for o, _p in self.model], off) - 1
        assert self.idx.lookup(off) == (self.model[i] if i >= 0 else (BASE, 0))

    @rule(pos=st.integers(-5, 200_000))
    def lookup_position(self, pos: int) -> None:
        i = bisect.bisect_right([p for _o, p in self.model], pos) - 1
        assert self.idx.lookup_position(pos) == (self.model[i] if i >= 0 else (BASE, 0))

    @rule(ts=st.integers(-5, 3000))
    def time_lookup(self, ts: int) -> None:
        i = bisect.bisect_right([t for t, _o in self.tmodel], ts) - 1
        assert self.tidx.lookup(ts) == (self.tmodel[i] if i >= 0 else (-1, BASE))

    @rule(off=st.integers(BASE - 10, BASE + 50_000))
    def truncate_to(self, off: int) -> None:
        self.idx.truncate_to(off)
        self.model = [e for e in self.model if e[0] < off]
        self.tidx.truncate_to(off)
        self.tmodel = [e for e in self.tmodel if e[1] < off]

    @rule()
    def trim_and_reopen(self) -> None:
        self.idx.close()
        self.tidx.close()
        assert os.path.getsize(self.path) == 8 * len(self.model)
        assert os.path.getsize(self.tpath) == 12 * len(self.tmodel)
        self.idx = OffsetIndex(self.path, BASE, MAX_ENTRIES * 8)
        self.tidx = TimeIndex(self.tpath, BASE, MAX_ENTRIES * 12)
        self.idx.sanity_check()
        self.tidx.sanity_check()
        self.idx.resize(MAX_ENTRIES * 8)
        self.tidx.resize(MAX_ENTRIES * 12)

    @rule(max_pos=st.integers(0, 200_000), max_off=st.integers(BASE, BASE + 50_000))
    def walk_start(self, max_pos: int, max_off: int) -> None:
        ok = [i for i, (o, p) in enumerate(self.model) if p <= max_pos and o <= max_off]
        k = ok[-1] if ok else -1
        assert self.idx.walk_start(max_pos, max_off) == (self.model[k - 1][1] if k >= 1 else 0)

    @invariant()
    def sizes(self) -> None:
        assert self.idx.entries == len(self.model)
        assert self.tidx.entries == len(self.tmodel)
        assert self.idx.is_full() == (len(self.model) == self.idx.max_entries)
        if self.model:
            assert self.idx.last_offset == self.model[-1][0]
            assert self.idx.entry(len(self.model) - 1) == self.model[-1]
        assert self.tidx.last_entry() == (self.tmodel[-1] if self.tmodel else (-1, BASE))


IndexMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestIndexState = IndexMachine.TestCase
