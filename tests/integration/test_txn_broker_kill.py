"""Broker SIGKILLs under a transactional producer: atomic, durable, never an aborted record.

A confluent-kafka producer (tests/_harness/txn_loop.py) runs transactions of 9 records over
3 partitions back to back while the broker is killed with SIGKILL at random moments (any
transaction state: Ongoing, PrepareCommit with markers partly written, ...) and restarted
on the same port. Afterwards a read_committed reader must see, for every transaction,
all of its 9 records or none; every transaction whose commit returned; none that the
producer aborted; no record twice. The coordinator finishes what a kill interrupted when it
loads ``__transaction_state`` again (Kafka's rules: Prepare* completes, Ongoing aborts at
its timeout or when the producer re-initialises).
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

LOOP = pathlib.Path(__file__).resolve().parents[1] / "_harness" / "txn_loop.py"
PARTITIONS = 3
KILLS = 5


def _read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "kill-check", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
              for p in range(PARTITIONS)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    assert len(eof) == PARTITIONS, "reader did not reach the end of every partition"
    return out


def test_broker_sigkill_during_transactions(new_broker, tmp_path):
    broker = new_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
    broker.start()
    bs = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("txk", PARTITIONS, 1)])["txk"].result(30)

    out = tmp_path / "outcomes"
    stop = tmp_path / "stop"
    log = open(tmp_path / "loop.log", "ab")  # noqa: SIM115 - closed below
    loop = subprocess.Popen([sys.executable, str(LOOP), bs, "txk", str(PARTITIONS), "txk-loop",
                             str(out), str(stop)], stdout=log, stderr=subprocess.STDOUT)
    rng = random.Random(1125)
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 3.0))
            broker.stop(sig=signal.SIGKILL)
            time.sleep(rng.uniform(0.1, 1.0))
            broker.start()
        time.sleep(3.0)
        stop.touch()
        assert loop.wait(120) == 0, (tmp_path / "loop.log").read_text()[-3000:]
    finally:
        if loop.poll() is None:
            loop.kill()
        log.close()

    # Any transaction still open (the producer died mid-way? it exits cleanly) is done now.
    outcomes = {}
    for line in out.read_text().splitlines():
        kind, n = line.split()
        outcomes[int(n)] = kind
    seen = collections.Counter(_read_all(bs, "txk", "read_committed"))
    by_txn: dict[int, set[int]] = collections.defaultdict(set)
    for value, count in seen.items():
        assert count == 1, f"record {value!r} read {count} times"
        n, i = value.decode().split(":")
        by_txn[int(n)].add(int(i))
    committed = [n for n, k in outcomes.items() if k == "C"]
    aborted = [n for n, k in outcomes.items() if k == "A"]
    print(f"transactions={len(outcomes)} committed={len(committed)} aborted={len(aborted)} "
          f"unknown={len(outcomes) - len(committed) - len(aborted)} kills={KILLS}")
    assert len(committed) > 20
    for n, parts in by_txn.items():
        assert parts == set(range(9)), f"transaction {n} is partly visible: {sorted(parts)}"
    for n in committed:
        assert n in by_txn, f"transaction {n} was committed and is lost"
    for n in aborted:
        assert n not in by_txn, f"transaction {n} was aborted and is visible"
