"""kill -9 at every phase of a clean (logcore.cleaner + the loader's swap recovery).

A child process builds a compacted log, starts a clean and SIGKILLs itself at one phase:
while writing the ``.cleaned`` files, after writing them, after renaming them ``.swap``,
after renaming the old segments ``.deleted``. The parent reopens the directory and
checks that it is a valid log (CRCs, increasing offsets, indexes agree with the data:
the independent reader in tests/_harness/kafka_format.py), that no temporary file is
left, that every key still has its latest value, and that a clean then completes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from _harness.kafka_format import check_partition

from logcore import Log, LogConfig, iter_batches
from logcore.cleaner import Cleaner

CFG = dict(cleanup_policy="compact", segment_bytes=3000, index_interval_bytes=200,
           segment_index_bytes=4096, file_delete_delay_ms=60_000)
KEYS = 13
RECORDS = 600

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    sys.path[:0] = {paths!r}
    from logcore import BatchBuilder, Log, LogConfig, compaction, cleaner
    phase = sys.argv[2]
    cfg = LogConfig(**{cfg!r})
    log = Log(sys.argv[1], cfg)
    for i in range({records}):
        b = BatchBuilder()
        value = None if i % 17 == 16 else b"v%d" % i
        b.append(value, key=b"k%d" % (i % {keys}), timestamp_ms=1_700_000_000_000 + i)
        log.append(b.build())
    log.roll()
    log.flush()
    # several old segments per cleaned one
    log.config = cfg.replace(segment_bytes=12000)

    def die(at):
        if at == phase:
            os.kill(os.getpid(), signal.SIGKILL)

    compaction.phase_hook = die
    if phase == "writing":
        def finish(self, mtime, *rest):
            self._drain()
            die("writing")
        cleaner._Writer.finish = finish
    cleaner.Cleaner(1 << 20).clean(log)
    os.write(1, b"finished\\n")
    """
)


def expected_latest() -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for i in range(RECORDS):
        out[b"k%d" % (i % KEYS)] = None if i % 17 == 16 else b"v%d" % i
    return out


def read_all(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        region = log.read(off, 1 << 30)
        if not region:
            break
        for b in iter_batches(region.read()):
            b.validate()
            out.extend((r.offset, r.key, r.value) for r in b if r.offset >= off)
        off = region.last_offset + 1
    return out


@pytest.mark.parametrize("phase", ["writing", "cleaned", "swap", "deleted"])
def test_kill_at_each_phase_of_a_clean(tmp_path, phase) -> None:
    d = str(tmp_path / "t-0")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(paths=[p for p in sys.path if p], cfg=CFG,
                                   records=RECORDS, keys=KEYS))
    proc = subprocess.run([sys.executable, str(script), d, phase], capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    names = os.listdir(d)
    marker = {"writing": ".cleaned", "cleaned": ".cleaned", "swap": ".swap",
              "deleted": ".deleted"}[phase]
    assert any(n.endswith(marker) for n in names), names
    cfg = LogConfig(**CFG)
    with Log(d, cfg) as log:
        assert not [n for n in os.listdir(d)
                    if n.endswith((".cleaned", ".swap", ".deleted"))]
        assert log.log_end_offset == RECORDS
        recs = read_all(log)
        offsets = [r[0] for r in recs]
        assert offsets == sorted(set(offsets))
        latest = {}
        for _o, k, v in recs:
            latest[k] = v
        assert latest == expected_latest()
        for o, k, v in recs:  # every record is the one written at its offset
            assert k == b"k%d" % (o % KEYS)
            assert v == (None if o % 17 == 16 else b"v%d" % o)
        stats = Cleaner(1 << 20).clean(log)
        assert stats is not None
        after = read_all(log)
        assert {k: v for _o, k, v in after} == expected_latest()
        assert len(after) == KEYS
    check_partition(d)
