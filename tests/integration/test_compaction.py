"""Log compaction in a real broker, with real clients: the latest value of every key at its
original offset, tombstones dropped after delete.retention.ms, nothing newer than
min.compaction.lag.ms touched, keyless records refused with INVALID_RECORD, a kill -9 during
a clean, and Kafka's answers for the internal topics."""

from __future__ import annotations

import signal
import time

import pytest
from _harness.compaction import (
    cleaner_checkpoint,
    create_topic,
    end_offset,
    latest_per_key,
    log_bytes,
    produce,
    read_confluent,
    read_kafka_python,
    segment_bases,
    wait_cleaned_to,
    wait_for,
)

from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

# The cleaner looks for work every 200 ms when idle (Kafka's default is 15 s).
CLEANER = {"log.cleaner.backoff.ms": "200"}
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2048", "segment.ms": "1000",
           "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "200"}


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory):
    data = tmp_path_factory.mktemp("compaction") / "data"
    data.mkdir()
    b = BrokerProcess(data, CLEANER).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def _roll_and_clean(b: BrokerProcess, topic: str, marker: bytes) -> list:
    """Wait past segment.ms, produce one marker record (it rolls the active segment, so
    everything before it is cleanable), wait until the cleaner has cleaned up to it. Each
    marker has its own key: the active segment is never cleaned, so a later record of the
    same key there would not replace the earlier one yet."""
    time.sleep(1.2)
    (rec,) = produce(b.bootstrap, topic, [(b"marker-" + marker, marker, None)])
    wait_cleaned_to(b.data_dir / f"{topic}-0", rec[0])
    assert segment_bases(b.data_dir / f"{topic}-0")[-1] == rec[0]
    return [rec]


def _both_clients(b: BrokerProcess, topic: str, expected: list) -> None:
    end = end_offset(b.bootstrap, topic)
    assert end == expected[-1][0] + 1
    got_confluent = read_confluent(b.bootstrap, topic, end)
    assert got_confluent == expected
    got_kafka_python = read_kafka_python(b.bootstrap, topic, end)
    assert got_kafka_python == expected


def test_latest_value_per_key_with_original_offsets_and_tombstones_expire(cbroker, topic_name) -> None:
    b = cbroker
    create_topic(b.bootstrap, topic_name, {**COMPACT, "delete.retention.ms": "3000"})
    keys, rounds = 30, 20
    items = [(b"k%02d" % k, b"k%02d:r%d" % (k, r), None) for r in range(rounds - 1) for k in range(keys)]
    # the last round: five tombstones, the other keys updated once more
    items += [(b"k%02d" % k, None if k < 5 else b"k%02d:r%d" % (k, rounds - 1), None) for k in range(keys)]
    written = produce(b.bootstrap, topic_name, items)
    assert len(written) == keys * rounds
    written += _roll_and_clean(b, topic_name, b"m1")
    cleaned_at = time.monotonic()
    first = latest_per_key(written)
    assert len(first) == keys + 1 and [r[2] for r in first[:5]] == [None] * 5  # tombstones kept
    _both_clients(b, topic_name, first)
    assert log_bytes(b.data_dir / f"{topic_name}-0", live_only=True) < 2048 * 3

    # Past delete.retention.ms, the next clean drops the tombstones.
    time.sleep(max(0.0, 3.5 - (time.monotonic() - cleaned_at)))
    written += produce(b.bootstrap, topic_name,
                       [(b"k%02d" % k, b"k%02d:r%d" % (k, rounds), None) for k in range(5, keys)])
    written += _roll_and_clean(b, topic_name, b"m2")
    second = latest_per_key(written, drop_tombstones=True)
    assert len(second) == keys - 5 + 2 and not [r for r in second if r[1] in {b"k%02d" % k for k in range(5)}]
    _both_clients(b, topic_name, second)


def test_nothing_within_min_compaction_lag_is_touched(cbroker, topic_name) -> None:
    b = cbroker
    create_topic(b.bootstrap, topic_name, {**COMPACT, "segment.bytes": "1048576",
                                           "min.compaction.lag.ms": "3600000"})
    two_hours_ago = int(time.time() * 1000) - 7_200_000
    old = produce(b.bootstrap, topic_name, [(b"k%d" % (i % 10), b"old%d" % i, two_hours_ago + i)
                                            for i in range(200)])
    recent = produce(b.bootstrap, topic_name, [(b"k%d" % (i % 10), b"new%d" % i, None) for i in range(50)])
    first_recent = recent[0][0]
    # The segment holding the recent records is not the active one after this, but every
    # record in it is younger than the lag: the cleaner stops at its base offset.
    time.sleep(1.2)
    marker = produce(b.bootstrap, topic_name, [(b"marker", b"m", None)])
    d = b.data_dir / f"{topic_name}-0"
    wait_cleaned_to(d, first_recent)
    time.sleep(1.0)  # several more looks of the cleaner: it must not go further
    assert cleaner_checkpoint(d) == first_recent
    assert first_recent in segment_bases(d)
    expected = latest_per_key(old) + recent + marker
    assert len(expected) == 10 + 50 + 1
    _both_clients(b, topic_name, expected)


def test_keyless_record_refused_with_invalid_record(cbroker, topic_name) -> None:
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    b = cbroker
    create_topic(b.bootstrap, topic_name, COMPACT)
    reports: list = []
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "enable.idempotence": False})
    p.produce(topic_name, value=b"no key", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(15) == 0
    p.produce(topic_name, value=b"keyed", key=b"k", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(15) == 0
    assert reports[0] is not None and reports[0].code() == KafkaError.INVALID_RECORD, reports
    assert not reports[0].retriable()
    assert reports[1] is None, reports

    kp = KafkaProducer(bootstrap_servers=b.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            kp.send(topic_name, value=b"no key either").get(timeout=15)
        assert kp.send(topic_name, value=b"v", key=b"k").get(timeout=15).offset == 1
    finally:
        kp.close()
    assert end_offset(b.bootstrap, topic_name) == 2  # the refused ones wrote nothing


def test_keyless_error_names_the_records_like_kafka(cbroker, topic_name) -> None:
    """The per-record errors (Produce v8+) and the message, as Kafka's LogValidator words them."""
    from _harness.wire import BrokerConnection

    import logcore
    from pylog.protocol.messages import ProduceRequest

    b = cbroker
    create_topic(b.bootstrap, topic_name, COMPACT)
    builder = logcore.BatchBuilder()
    for i in range(5):
        builder.append(b"v%d" % i, key=None if i in (1, 2, 3, 4) else b"k")
    P = ProduceRequest
    body = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic_name, partition_data=[P.PartitionProduceData(index=0, records=builder.build())])])
    host, port = b.bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), timeout=10) as conn:
        part = conn.request(body, 9).responses[0].partition_responses[0]
    what = f"Compacted topic cannot accept message without key in topic partition {topic_name}-0"
    assert part.error_code == 87
    assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
        (i, what) for i in (1, 2, 3, 4)]
    assert part.error_message.startswith(
        "One or more records have been rejected due to 4 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{what}'), ")
    assert part.error_message.count("RecordError(") == 3


def test_kill_9_during_a_clean_then_restart(new_broker, topic_name) -> None:
    # Reads and writes throttled to 400 KB/s: a clean of the 3 MB written takes seconds.
    b = new_broker({**CLEANER, "log.cleaner.io.max.bytes.per.second": "400000"}).start()
    create_topic(b.bootstrap, topic_name, {**COMPACT, "segment.bytes": "262144"})
    value = b"x" * 90
    written = produce(b.bootstrap, topic_name, [(b"k%03d" % (i % 300), value + b"%d" % i, None)
                                                for i in range(30000)])
    time.sleep(1.2)
    written += produce(b.bootstrap, topic_name, [(b"marker", b"m", None)])
    d = b.data_dir / f"{topic_name}-0"
    # Kill as soon as the cleaner has a cleaned segment on disk (mid-clean).
    wait_for(lambda: any(".cleaned" in n or ".swap" in n for n in _names(d)), 60,
             lambda: f"no clean started: {sorted(_names(d))}")
    b.stop(sig=signal.SIGKILL)
    in_flight = sorted(n for n in _names(d) if ".cleaned" in n or ".swap" in n or ".deleted" in n)
    assert in_flight, "the kill came after the clean"
    by_offset = {r[0]: r for r in written}

    b.overrides.pop("log.cleaner.io.max.bytes.per.second")
    b.start()
    end = end_offset(b.bootstrap, topic_name)
    assert end == written[-1][0] + 1
    # Right after the restart: a valid partial compaction (every record is one that was
    # written, at its offset; every key's latest value is there).
    seen = read_confluent(b.bootstrap, topic_name, end)
    assert all(by_offset[o] == (o, k, v) for o, k, v in seen)
    assert set(latest_per_key(written)) <= set(seen)
    # Then the cleaner finishes: exactly the latest value of each key.
    wait_cleaned_to(d, written[-1][0])
    expected = latest_per_key(written)
    assert read_kafka_python(b.bootstrap, topic_name, end) == expected
    assert not [n for n in _names(d) if ".cleaned" in n or ".swap" in n]
    assert b.stop() == 0


def _names(d) -> list[str]:
    import os

    try:
        return os.listdir(d)
    except FileNotFoundError:
        return []
