"""Transactions: the last stable offset and the aborted transactions against a model
(Hypothesis, stateful).

Model (Kafka's ProducerStateManager rules, docs/formats.md): each producer has at most one
open transaction, opened at the base offset of its first transactional batch; a marker
closes it. The LSO is the smallest first offset of the open transactions, else the log
end offset. Every ABORT of a transaction with data is an aborted transaction (producer,
first offset, marker offset, last stable offset = oldest other open transaction's first
offset, else marker + 1). Checked after every step, across clean reopens, crash
recoveries and truncations.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from logcore import AbortedTxn, BatchBuilder, Log, LogConfig, ManualClock
from logcore.checkpoint import RECOVERY_POINT_CHECKPOINT, write_offset_checkpoint

T0 = 1_700_000_000_000
PIDS = st.integers(min_value=1, max_value=4)


class TxnMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = os.path.join(tempfile.mkdtemp(prefix="txnlso-"), "t-0")
        self.clock = ManualClock(T0)
        self.cfg = LogConfig(segment_bytes=400, index_interval_bytes=64,
                             segment_index_bytes=4096)
        self.log = Log(self.dir, self.cfg, clock=self.clock)
        self.open: dict[int, int] = {}  # pid -> first offset
        self.seq: dict[int, int] = {}
        self.aborted: list[AbortedTxn] = []  # in marker order

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(os.path.dirname(self.dir), ignore_errors=True)

    @rule(pid=PIDS, n=st.integers(min_value=1, max_value=4))
    def transactional_batch(self, pid: int, n: int) -> None:
        seq = self.seq.get(pid, 0)
        b = BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq,
                         transactional=True)
        for i in range(n):
            b.append(b"v", key=b"k%d" % i, timestamp_ms=T0)
        info = self.log.append(b.build())
        self.seq[pid] = seq + n
        self.open.setdefault(pid, info.first_offset)

    @rule(pid=PIDS, commit=st.booleans())
    def marker(self, pid: int, commit: bool) -> None:
        offset = self.log.append_control(pid, 0, commit=commit, coordinator_epoch=0).first_offset
        first = self.open.pop(pid, None)
        if first is not None and not commit:
            others = list(self.open.values())
            self.aborted.append(AbortedTxn(pid, first, offset,
                                           min(others) if others else offset + 1))

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.log = Log(self.dir, self.cfg, clock=self.clock)

    @rule(back=st.integers(min_value=0, max_value=3))
    def crash_recovery(self, back: int) -> None:
        """Reopen as after a crash, rescanning from a segment base ``back`` from the end."""
        bases = self.log.segment_base_offsets
        self.log.close()
        os.unlink(os.path.join(self.dir, ".kafka_cleanshutdown"))
        rp = bases[max(len(bases) - 1 - back, 0)]
        write_offset_checkpoint(os.path.join(self.dir, RECOVERY_POINT_CHECKPOINT),
                                {("t", 0): rp})
        self.log = Log(self.dir, self.cfg, clock=self.clock)

    @rule(data=st.data())
    def truncate(self, data) -> None:
        leo = self.log.log_end_offset
        if leo == 0:
            return
        offset = data.draw(st.integers(min_value=0, max_value=leo - 1))
        self.log.truncate_to(offset)
        end = self.log.log_end_offset
        # The model: replay what is left (a marker cut reopens its transaction).
        self.open = {}
        self.seq = {}
        self.aborted = [t for t in self.aborted if t.last_offset < end]
        self._rebuild_open(end)

    def _rebuild_open(self, end: int) -> None:
        from logcore import iter_batches

        off = 0
        while off < end:
            region = self.log.read(off, 1 << 20)
            if not region.size:
                break
            for b in iter_batches(region.read()):
                if b.producer_id < 0:
                    continue
                if b.is_control:
                    self.open.pop(b.producer_id, None)
                    continue
                if b.is_transactional:
                    self.open.setdefault(b.producer_id, b.base_offset)
                self.seq[b.producer_id] = b.base_sequence + b.records_count
            off = region.last_offset + 1

    @invariant()
    def lso_is_the_oldest_open_transaction(self) -> None:
        want = min(self.open.values()) if self.open else None
        assert self.log.first_unstable_offset == want
        leo = self.log.log_end_offset
        assert self.log.last_stable_offset() == (leo if want is None else want)

    @invariant()
    def aborted_transactions_match(self) -> None:
        leo = self.log.log_end_offset
        assert self.log.aborted_transactions(0, leo + 1) == self.aborted
        if self.aborted:
            t = self.aborted[len(self.aborted) // 2]
            got = self.log.aborted_transactions(t.first_offset, t.first_offset + 1)
            want = [a for a in self.aborted
                    if a.last_offset >= t.first_offset and a.first_offset < t.first_offset + 1]
            # The index may stop early only when no later entry can overlap.
            assert [a for a in got if a in want] == want


TxnMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40,
                                        deadline=None)
TestTxnLso = TxnMachine.TestCase
