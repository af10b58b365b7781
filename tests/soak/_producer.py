"""One soak producer process: ``python _producer.py CONFIG.json INDEX``.

Produces the records of ``_records.make_record(seed, INDEX, 0, 1, 2, ...)`` in that order with
confluent-kafka (idempotent, acks=all, this producer's codec) until the file named by
``stop_file`` appears, then flushes. Every delivery report is appended to ``out`` as one line:

    ok <seq> <partition> <offset>        acknowledged: the broker wrote it at that offset
    err <seq> <partition> <error name>   not acknowledged (may or may not be in the log)
    fatal <error name> <reason>          the producer raised a fatal error (idempotence lost)
    end <produced> <undelivered> <sent>  the flush ended; undelivered were never reported;
                                         sent: records put on the wire (librdkafka's
                                         ``txmsgs``), more than produced when records were
                                         sent again after an error or a kill

Records are produced at a steady pace (``rate`` per second) so that a 2-core CI machine keeps
up; the broker is killed and restarted under it by the test.
"""

from __future__ import annotations

import json
import os
import sys
import time

from _records import CODECS, make_record
from confluent_kafka import KafkaError, Producer


def main() -> int:
    cfg = json.loads(open(sys.argv[1]).read())
    index = int(sys.argv[2])
    seed, partitions, topic = cfg["seed"], cfg["partitions"], cfg["topic"]
    out = open(cfg["out"] % index, "a", buffering=1)  # line-buffered: a line is a fact
    lines: list[str] = []

    def on_delivery(err: KafkaError | None, msg: object, seq: int, partition: int) -> None:
        if err is None:
            lines.append(f"ok {seq} {partition} {msg.offset()}")  # type: ignore[attr-defined]
        else:
            lines.append(f"err {seq} {partition} {err.name()}")

    sent = [0]

    def on_stats(text: str) -> None:
        sent[0] = max(sent[0], json.loads(text).get("txmsgs", 0))

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            lines.append(f"fatal {err.name()} {err.str()!r}")

    conf = {
        "bootstrap.servers": cfg["bootstrap"],
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": CODECS[index % len(CODECS)],
        "linger.ms": (0, 2, 5, 20, 50)[index % 5],
        # Not too small: librdkafka sends one partition per ProduceRequest, and a backlog of
        # tiny batches after an outage starves some partitions for tens of seconds.
        "batch.num.messages": (50, 500, 10000)[index % 3],
        # The broker keeps each producer's last batch across a restart (as Kafka's snapshot
        # does); with one request in flight a retried batch is always that one.
        "max.in.flight.requests.per.connection": cfg["max_in_flight"],
        # Longer than any outage the test causes: an acknowledged record is the rule, a
        # timed-out one the exception.
        "message.timeout.ms": cfg["message_timeout_ms"],
        # One batch never exceeds the topic's segment.bytes (256 KiB in the kill soak), which
        # the broker would refuse; the largest record (192 KiB and headers) still fits.
        "message.max.bytes": 250000,
        "request.timeout.ms": 5000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 300,
        "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 300,
        "topic.metadata.refresh.interval.ms": 1000,
        "error_cb": on_error,
        "statistics.interval.ms": 500,
        "stats_cb": on_stats,
    }
    if cfg.get("client_debug"):
        conf["debug"] = cfg["client_debug"]  # librdkafka's debug contexts, to the log file
    producer = Producer(conf)
    pace = 1.0 / cfg["rate"]
    seq = 0
    started = time.monotonic()
    parent = os.getppid()
    while not os.path.exists(cfg["stop_file"]):
        if os.getppid() != parent:  # the test died without stopping us: no orphans
            return 1
        rec = make_record(seed, index, seq, partitions)
        try:
            producer.produce(
                topic, value=rec.value, key=rec.key, headers=rec.headers, partition=rec.partition,
                on_delivery=lambda e, m, s=seq, p=rec.partition: on_delivery(e, m, s, p))
        except BufferError:  # the local queue is full while the broker is down
            producer.poll(0.1)
            continue
        seq += 1
        while (ahead := started + seq * pace - time.monotonic()) > 0:
            producer.poll(ahead)  # returns early when it served a delivery report
        if lines:
            out.write("\n".join(lines) + "\n")
            lines.clear()
    undelivered = producer.flush(cfg["flush_timeout_s"])
    producer.poll(0.6)  # one more statistics report
    lines.append(f"end {seq} {undelivered} {sent[0]}")
    out.write("\n".join(lines) + "\n")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
