"""Idempotent producers: Log.append against a model of Kafka's rules (Hypothesis, stateful).

The model is written from docs/formats.md and Kafka's ProducerAppendInfo rules: per producer
its epoch and last five batches; a repeat of one of them is a duplicate (original offsets,
nothing written), an older epoch is refused, a new epoch starts at 0, the same epoch goes on
at last sequence + 1, an unknown producer may start anywhere. A clean reopen keeps only each
producer's last batch (the snapshot format holds one), except the batches appended after the
newest snapshot, which are replayed.
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from logcore import (
    BatchBuilder,
    InvalidProducerEpochError,
    Log,
    LogConfig,
    ManualClock,
    OutOfOrderSequenceError,
)

T0 = 1_700_000_000_000
I32_MAX = 2**31 - 1


def last_seq(first: int, n: int) -> int:
    return (first + n - 1) % (I32_MAX + 1)


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="pstate-")
        self.cfg = LogConfig(segment_bytes=600, index_interval_bytes=100, segment_index_bytes=4096)
        self.log = Log(self.dir, self.cfg, clock=ManualClock(T0))
        self.leo = 0
        # pid -> (epoch, [(first_seq, last_seq, first_offset, last_offset)], replayable count)
        self.model: dict[int, tuple[int, list[tuple[int, int, int, int]]]] = {}

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def expect(self, pid: int, epoch: int, first: int, n: int):
        entry = self.model.get(pid)
        last = last_seq(first, n)
        if entry is None:
            return "ok"
        cur_epoch, batches = entry
        if epoch == cur_epoch:
            for b in batches:
                if b[0] == first and b[1] == last:
                    return b
        if epoch < cur_epoch:
            return InvalidProducerEpochError
        if epoch > cur_epoch:
            return "ok" if first == 0 else OutOfOrderSequenceError
        end = batches[-1][1] if batches else None
        if end is None or first == (end + 1) % (I32_MAX + 1):
            return "ok"
        return OutOfOrderSequenceError

    def do_append(self, pid: int, epoch: int, first: int, n: int) -> None:
        want = self.expect(pid, epoch, first, n)
        b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=first)
        for i in range(n):
            b.append(b"x" * 20, timestamp_ms=T0 + i)
        if isinstance(want, type):
            try:
                self.log.append(b.build())
            except want:
                pass
            else:
                raise AssertionError(f"expected {want.__name__}")
            assert self.log.log_end_offset == self.leo
            return
        info = self.log.append(b.build())
        if isinstance(want, tuple):
            assert info.duplicate and (info.first_offset, info.last_offset) == want[2:]
            assert self.log.log_end_offset == self.leo
            return
        assert not info.duplicate and info.first_offset == self.leo
        meta = (first, last_seq(first, n), self.leo, self.leo + n - 1)
        self.leo += n
        entry = self.model.get(pid)
        batches = [] if entry is None or entry[0] != epoch else entry[1]
        self.model[pid] = (epoch, (batches + [meta])[-5:])

    @rule(pid=st.integers(1, 3), n=st.integers(1, 4))
    def next_in_sequence(self, pid, n) -> None:
        entry = self.model.get(pid)
        if entry is None or not entry[1]:
            self.do_append(pid, 0 if entry is None else entry[0], 0, n)
        else:
            self.do_append(pid, entry[0], (entry[1][-1][1] + 1) % (I32_MAX + 1), n)

    @rule(pid=st.integers(1, 2), back=st.integers(0, 6))
    def retry(self, pid, back) -> None:
        entry = self.model.get(pid)
        if entry and entry[1]:
            b = entry[1][max(0, len(entry[1]) - 1 - back)]
            n = b[3] - b[2] + 1
            self.do_append(pid, entry[0], b[0], n if back < 6 else n + 1)

    @rule(pid=st.integers(2, 3), epoch=st.integers(0, 3),
          first=st.sampled_from([0, 1, 5, I32_MAX - 1, I32_MAX]), n=st.integers(1, 3))
    def anything(self, pid, epoch, first, n) -> None:
        self.do_append(pid, epoch, first, n)

    @precondition(lambda self: self.leo > 0)
    @rule()
    def reopen_clean(self) -> None:
        active = self.log.segment_base_offsets[-1]
        self.log.close()
        self.log = Log(self.dir, self.cfg, clock=ManualClock(T0))
        # The close snapshot holds each producer's last batch only.
        self.model = {pid: (e, b[-1:]) for pid, (e, b) in self.model.items()}
        del active

    @invariant()
    def log_end_matches(self) -> None:
        assert self.log.log_end_offset == self.leo
        for pid, (epoch, batches) in self.model.items():
            entry = self.log.producer_state.producers[pid]
            assert entry.epoch == epoch
            assert entry.last_seq == (batches[-1][1] if batches else -1)


ProducerStateMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=50,
                                                 deadline=None)
TestProducerState = ProducerStateMachine.TestCase
