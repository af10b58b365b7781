"""logcore.Log properties: reads against a model of the batches appended (Hypothesis)."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from logcore import BatchBuilder, Log, LogConfig, ManualClock, OffsetOutOfRangeError, iter_batches

T0 = 1_700_000_000_000


def make_batch(n: int, ts: int, size: int = 8) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(b"v" * size, timestamp_ms=ts + i)
    return b.build()


def spans(region) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(region.read())]


@settings(max_examples=25, deadline=None)
@given(
    counts=st.lists(st.integers(1, 6), min_size=1, max_size=40),
    segment_bytes=st.integers(200, 2000),
    interval=st.integers(0, 600),
    max_bytes=st.integers(1, 3000),
)
def test_read_every_offset_returns_its_batch(counts, segment_bytes, interval, max_bytes) -> None:
    d = tempfile.mkdtemp(prefix="logprop-")
    try:
        cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                        segment_index_bytes=4096)
        model: list[tuple[int, int, int]] = []  # (base, last, size)
        with Log(d, cfg, clock=ManualClock(T0)) as log:
            for i, n in enumerate(counts):
                raw = make_batch(n, T0 + i)
                info = log.append(raw)
                model.append((info.first_offset, info.last_offset, len(raw)))
            leo = log.log_end_offset
            for o in range(leo):
                got = spans(log.read(o, max_bytes))
                i = next(k for k, (b, last, _s) in enumerate(model) if b <= o <= last)
                assert got[0] == model[i][:2]
                # whole batches, contiguous, within max_bytes unless it is the only one,
                # and never crossing into the next segment
                assert got == [m[:2] for m in model[i : i + len(got)]]
                total = sum(m[2] for m in model[i : i + len(got)])
                assert len(got) == 1 or total <= max_bytes
                for hw in (o + 1, leo):
                    r = log.read(o, max_bytes, max_offset=hw)
                    assert r.size == 0 or r.last_offset < hw
    finally:
        shutil.rmtree(d, ignore_errors=True)


class LogMachine(RuleBasedStateMachine):
    """Appends, rolls, truncations, start-offset moves, retention and reopens vs a list."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="logsm-")
        self.clock = ManualClock(T0)
        self.cfg = LogConfig(segment_bytes=1000, index_interval_bytes=100,
                             segment_index_bytes=240, file_delete_delay_ms=0)
        self.log = Log(self.dir, self.cfg, clock=self.clock)
        self.model: list[tuple[int, int]] = []
        self.start = 0
        self.end = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def leo(self) -> int:
        return self.end

    @rule(n=st.integers(1, 5), size=st.integers(1, 120))
    def append(self, n: int, size: int) -> None:
        info = self.log.append(make_batch(n, self.clock.time_ms(), size))
        assert info.first_offset == self.leo
        self.model.append((info.first_offset, info.last_offset))
        self.end = info.last_offset + 1

    @rule(gap=st.integers(0, 5), n=st.integers(1, 4))
    def replica_append(self, gap: int, n: int) -> None:
        """A follower's append: offsets kept, with a gap as after compaction."""
        b = BatchBuilder(base_offset=self.leo + gap)
        for i in range(n):
            b.append(b"r" * 10, timestamp_ms=self.clock.time_ms() + i)
        info = self.log.append(b.build(), assign_offsets=False)
        assert info.first_offset == self.leo + gap
        self.model.append((info.first_offset, info.last_offset))
        self.end = info.last_offset + 1

    @rule(ms=st.integers(0, 5000))
    def time_passes(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(retention_ms=st.sampled_from([-1, 2000, 10_000]), segment_ms=st.sampled_from([500, 10**9]))
    def change_config(self, retention_ms: int, segment_ms: int) -> None:
        self.cfg = self.cfg.replace(retention_ms=retention_ms, segment_ms=segment_ms)
        self.log.update_config(self.cfg)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(k=st.integers(0, 50))
    def truncate_to(self, k: int) -> None:
        if not self.model:
            return
        target = max(self.start, self.leo - k)
        self.log.truncate_to(target)
        if target >= self.leo:
            return
        # The log end becomes the offset after the last batch kept (a batch straddling
        # the target goes whole), or the active segment's base when it is left empty.
        self.model = [m for m in self.model if m[1] < target]
        after_kept = self.model[-1][1] + 1 if self.model else 0
        self.end = max(after_kept, self.log.segment_base_offsets[-1])
        self.start = min(self.start, self.end)

    @rule(k=st.integers(0, 30))
    def delete_records_before(self, k: int) -> None:
        target = min(self.leo, self.start + k)
        self.start = max(self.start, self.log.delete_records_before(target))
        assert self.log.log_start_offset == self.start

    @rule()
    def retention(self) -> None:
        self.log.apply_retention()
        assert self.log.log_start_offset >= self.start
        self.start = self.log.log_start_offset

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
        else:
            # a crash: the old object goes away without closing (its lock with it)
            self.log = None  # type: ignore[assignment]
        self.log = Log(self.dir, self.cfg, clock=self.clock)
        assert self.log.recovered is not clean

    @rule(data=st.data())
    def read(self, data) -> None:
        o = data.draw(st.integers(self.start, self.leo))
        mb = data.draw(st.integers(1, 2000))
        if o == self.leo:
            assert self.log.read(o, mb).size == 0
            return
        got = spans(self.log.read(o, mb))
        live = [m for m in self.model if m[1] >= o]
        assert got and got[0] == live[0] and got == live[: len(got)]

    @invariant()
    def offsets(self) -> None:
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.start
        try:
            self.log.read(self.start - 1, 10) if self.start > 0 else None
            raise AssertionError("read below the log start offset did not fail")
        except OffsetOutOfRangeError:
            pass
        except AssertionError:
            if self.start > 0:
                raise


LogMachine.TestCase.settings = settings(max_examples=20, stateful_step_count=25, deadline=None)
TestLogMachine = LogMachine.TestCase
