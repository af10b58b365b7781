"""A consume-transform-produce processor (confluent-kafka) for tests/integration/test_txn_eos.py.

    python txn_processor.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID STOP

It consumes INPUT (read_committed, group GROUP with a static member id, so a restarted
processor takes its predecessor's place at once) and, per poll of at most 10 records, runs
one transaction: the transformed records (value + b"|out", same key, same partition) go to
OUTPUT and the consumed positions are committed with ``send_offsets_to_transaction``. An
abortable error aborts the transaction and rewinds to the committed offsets; a fatal one
(fenced) exits 3. It exits 0 when the file STOP exists and a poll returns nothing. The test
SIGKILLs it at random moments and starts it again.
"""

from __future__ import annotations

import os
import sys
import time

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException


def rewind(consumer: confluent_kafka.Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=30):
        if tp.offset < 0:
            tp.offset = confluent_kafka.OFFSET_BEGINNING
        consumer.seek(tp)


def main() -> int:
    bootstrap, source, sink, group, txn_id, stop = sys.argv[1:7]
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": f"{txn_id}-member",
        "enable.auto.commit": False, "isolation.level": "read_committed",
        "auto.offset.reset": "earliest", "session.timeout.ms": 30000,
    })
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1,
    })
    producer.init_transactions(60)
    consumer.subscribe([source])
    while True:
        msgs = consumer.consume(num_messages=10, timeout=0.5)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            if os.path.exists(stop):
                break
            continue
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, m.value() + b"|out", key=m.key(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal():
                print(f"fatal: {err}", file=sys.stderr, flush=True)
                return 3
            print(f"aborting: {err}", file=sys.stderr, flush=True)
            producer.abort_transaction(60)
            rewind(consumer)
            time.sleep(0.1)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
