"""A transactional producer loop (confluent-kafka) for tests/fault/test_txn_broker_kill.py.

    python txn_loop.py BOOTSTRAP TOPIC PARTITIONS TRANSACTIONAL_ID OUT STOP

Transaction ``n`` writes the records ``n:0`` .. ``n:8`` spread over the topic's PARTITIONS
partitions and commits. OUT gets one line per outcome, written after it is known:
``C n`` (commit_transaction returned: the transaction must be visible), ``A n`` (aborted
by us: must not be), ``F n`` (fatal error or an unknown outcome: either, but all or
nothing). On a fatal error the producer is replaced (a new one with the same id fences
the old). Exits 0 when the file STOP exists.
"""

from __future__ import annotations

import os
import sys

import confluent_kafka
from confluent_kafka import KafkaException

RECORDS_PER_TXN = 9


def new_producer(bootstrap: str, txn_id: str) -> confluent_kafka.Producer:
    p = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2,
        "transaction.timeout.ms": 20000, "reconnect.backoff.max.ms": 200,
    })
    while True:
        try:
            p.init_transactions(30)
            return p
        except KafkaException as exc:
            if exc.args[0].fatal():
                p = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                              "transactional.id": txn_id})
            # retriable (broker down, coordinator loading): try again


def main() -> int:
    bootstrap, topic, partitions, txn_id, out_path, stop = sys.argv[1:7]
    nparts = int(partitions)
    out = open(out_path, "a", buffering=1)  # noqa: SIM115 - closed at exit
    p = new_producer(bootstrap, txn_id)
    n = 0
    while not os.path.exists(stop):
        outcome = "F"
        try:
            p.begin_transaction()
            for i in range(RECORDS_PER_TXN):
                p.produce(topic, f"{n}:{i}".encode(), partition=i % nparts)
            for _attempt in range(5):
                try:
                    p.commit_transaction(30)
                    outcome = "C"
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
        except KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                    outcome = "A"
                except KafkaException:
                    outcome = "F"
            if outcome == "F":
                p = new_producer(bootstrap, txn_id)
        out.write(f"{outcome} {n}\n")
        n += 1
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
