"""One soak producer process: ``python _producer.py CONFIG.json INDEX``.

Produces the records of ``_records.make_record(seed, INDEX, 0, 1, 2, ...)`` in that order with
confluent-kafka (idempotent, acks=all, this producer's codec; kafka-python for lz4, see
``run_kafka_python``) until the file named by
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
from typing import TextIO

from _records import CODECS, make_record
from confluent_kafka import KafkaError, Producer


def main() -> int:
    cfg = json.loads(open(sys.argv[1]).read())
    index = int(sys.argv[2])
    with open(cfg["out"] % index, "a", buffering=1) as out:  # line-buffered: a line is a fact
        if CODECS[index % len(CODECS)] == "lz4":
            return run_kafka_python(cfg, index, out)
        return run_confluent(cfg, index, out)


def run_confluent(cfg: dict, index: int, out: TextIO) -> int:
    seed, partitions, topic = cfg["seed"], cfg["partitions"], cfg["topic"]
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
    return 0


def run_kafka_python(cfg: dict, index: int, out: TextIO) -> int:
    """The lz4 producer uses kafka-python (idempotent, acks=all as well): librdkafka sends
    lz4-configured batches uncompressed to a broker whose ApiVersions lack FindCoordinator,
    which pylog's do until consumer groups are served."""
    from kafka import KafkaProducer

    seed, partitions, topic = cfg["seed"], cfg["partitions"], cfg["topic"]
    lines: list[str] = []
    producer = KafkaProducer(
        bootstrap_servers=cfg["bootstrap"], acks="all", enable_idempotence=True,
        compression_type="lz4", linger_ms=5, batch_size=64 * 1024,
        max_in_flight_requests_per_connection=cfg["max_in_flight"],
        delivery_timeout_ms=cfg["message_timeout_ms"], request_timeout_ms=5000,
        retry_backoff_ms=20, reconnect_backoff_ms=20, reconnect_backoff_max_ms=300,
        metadata_max_age_ms=1000, max_block_ms=120000)
    reported = 0

    def done(seq: int, partition: int, md: object = None, exc: BaseException | None = None) -> None:
        if exc is None:
            lines.append(f"ok {seq} {partition} {md.offset}")  # type: ignore[attr-defined]
        else:
            lines.append(f"err {seq} {partition} {type(exc).__name__}")

    pace = 1.0 / cfg["rate"]
    seq = 0
    started = time.monotonic()
    parent = os.getppid()
    while not os.path.exists(cfg["stop_file"]):
        if os.getppid() != parent:  # the test died without stopping us: no orphans
            return 1
        rec = make_record(seed, index, seq, partitions)
        fut = producer.send(topic, value=rec.value, key=rec.key, headers=rec.headers,
                            partition=rec.partition)
        fut.add_callback(lambda md, s=seq, p=rec.partition: done(s, p, md=md))
        fut.add_errback(lambda exc, s=seq, p=rec.partition: done(s, p, exc=exc))
        seq += 1
        ahead = started + seq * pace - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        while lines:  # callbacks run on the sender thread; pop() is atomic
            out.write(lines.pop(0) + "\n")
            reported += 1
    try:
        producer.flush(cfg["flush_timeout_s"])
    except Exception as exc:  # noqa: BLE001 - a flush timeout: reported below
        print(f"flush: {exc!r}", file=sys.stderr)
    producer.close(5)
    while lines:
        out.write(lines.pop(0) + "\n")
        reported += 1
    out.write(f"end {seq} {seq - reported} 0\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
