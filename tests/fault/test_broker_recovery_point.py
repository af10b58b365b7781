"""kill -9 of a real broker after 200+ segment rolls: the restart scans only the segments at
or above the checkpointed recovery point (Kafka's flush-on-roll + periodic checkpoint)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from integration.conftest import BrokerProcess  # type: ignore[import-not-found]

pytestmark = pytest.mark.integration

TOPIC = "rolls"
RECORDS = 220


def _checkpoint(path: str) -> int | None:
    try:
        with open(path) as f:
            lines = f.read().split("\n")
        return int(lines[2].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _segments(directory: str) -> list[int]:
    return sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log"))


def test_kill9_after_200_rolls_recovers_only_above_the_checkpoint(tmp_path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    data = tmp_path / "data"
    data.mkdir()
    b = BrokerProcess(data, {
        "auto.create.topics.enable": "true",
        # one ~1.1 KB batch per segment: every produced record rolls a segment
        "log.segment.bytes": "2048",
        "log.flush.offset.checkpoint.interval.ms": "300",
    })
    b.start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 0,
                      "batch.size": 1100, "enable.idempotence": False})
        failed: list[object] = []
        for i in range(RECORDS):
            p.produce(TOPIC, key=b"%d" % i, value=b"%04d" % i + b"x" * 996, partition=0,
                      on_delivery=lambda err, _m: failed.append(err) if err else None)
            p.poll(0)
        assert p.flush(30) == 0 and not failed
        part = str(data / f"{TOPIC}-0")
        segments = _segments(part)
        assert len(segments) >= 200, len(segments)
        # Rolled segments are flushed in the background and the recovery point is
        # checkpointed every 300 ms: wait for the checkpoint to reach the last roll.
        ckpt = os.path.join(part, "recovery-point-offset-checkpoint")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rp = _checkpoint(ckpt)
            if rp is not None and rp >= segments[-1]:
                break
            time.sleep(0.05)
        rp = _checkpoint(ckpt)
        assert rp is not None and rp >= segments[-2], (rp, segments[-3:])
        b.stop(signal.SIGKILL)
        above = [s for s in _segments(part) if s >= rp or s == max(x for x in segments if x <= rp)]
        b.start()
        log = b.read_log()
        m = re.search(rf"recovered {TOPIC}-0 after an unclean shutdown: scanned (\d+) of (\d+) "
                      r"segments", log)
        assert m, log[-3000:]
        scanned, total = int(m.group(1)), int(m.group(2))
        assert total >= 200
        assert scanned <= len(above) <= 2, (scanned, above)
        # acks=1 means the page cache: a killed process loses nothing the OS holds.
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused",
                      "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(TOPIC, 0, 0)])
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < RECORDS and time.monotonic() < deadline:
                msg = c.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(int(msg.value()[:4]))
        finally:
            c.close()
        assert got == list(range(RECORDS))
    finally:
        b.stop(signal.SIGKILL)
