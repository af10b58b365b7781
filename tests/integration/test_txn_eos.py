"""Exactly-once consume-transform-produce across SIGKILLs of the processor.

A confluent-kafka processor (tests/_harness/txn_processor.py) reads an input topic with
read_committed and, per poll, writes the transformed records and commits its input offsets
in one transaction (``send_offsets_to_transaction``). The test kills it with SIGKILL at
random moments 20 times and starts it again each time (same transactional id: the new
one fences the old and aborts its open transaction). Then it lets the last one finish and
reads the output with read_committed: exactly one copy of every input record, per
partition in input order.
"""

from __future__ import annotations

import collections
import pathlib
import random
import signal
import subprocess
import sys
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

PROCESSOR = pathlib.Path(__file__).resolve().parents[1] / "_harness" / "txn_processor.py"
KILLS = 20
RECORDS = 3000
PARTITIONS = 2


def _create(bootstrap: str, *topics: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        fut.result(30)


def _read_committed(bootstrap: str, topic: str, want: int, timeout: float) -> list:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "eos-check", "enable.auto.commit": False,
        "isolation.level": "read_committed"})
    c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
              for p in range(PARTITIONS)])
    out = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                out.append((m.partition(), m.key(), m.value()))
                quiet_until = None
            elif len(out) >= want:
                # Everything expected is here: keep polling a little for extra copies.
                quiet_until = quiet_until or time.monotonic() + 2.0
                if time.monotonic() > quiet_until:
                    break
    finally:
        c.close()
    return out


def test_processor_killed_20_times_outputs_each_record_once(new_broker, tmp_path):
    broker = new_broker({"group.initial.rebalance.delay.ms": "0"}).start()
    bs = broker.bootstrap
    _create(bs, "eos-in", "eos-out")
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce("eos-in", f"rec-{i}".encode(), key=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0

    rng = random.Random(20261125)
    stop = tmp_path / "stop"
    cmd = [sys.executable, str(PROCESSOR), bs, "eos-in", "eos-out", "eos-group", "eos-proc",
           str(stop)]
    log = open(tmp_path / "processor.log", "ab")  # noqa: SIM115 - closed below
    kills = 0
    try:
        for _ in range(KILLS):
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(rng.uniform(1.0, 3.0))
            assert proc.poll() is None, f"processor exited early with {proc.returncode}: " \
                                        f"{(tmp_path / 'processor.log').read_text()[-3000:]}"
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills += 1
        stop.touch()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        rc = proc.wait(180)
        assert rc == 0, (tmp_path / "processor.log").read_text()[-3000:]
    finally:
        log.close()

    out = _read_committed(bs, "eos-out", RECORDS, timeout=60)
    counts = collections.Counter(v for _p, _k, v in out)
    missing = [i for i in range(RECORDS) if counts[f"rec-{i}|out".encode()] == 0]
    dupes = {v: n for v, n in counts.items() if n > 1}
    print(f"kills={kills} output={len(out)} missing={len(missing)} duplicated={len(dupes)}")
    assert not missing, f"{len(missing)} input records have no output, e.g. {missing[:5]}"
    assert not dupes, f"{len(dupes)} output records appear more than once, e.g. " \
                      f"{list(dupes.items())[:5]}"
    assert len(out) == RECORDS
    for part in range(PARTITIONS):
        seq = [int(v.split(b"|")[0][4:]) for p_, _k, v in out if p_ == part]
        assert seq == sorted(seq), f"partition {part} out of input order"
        assert all(i % PARTITIONS == part for i in seq)
