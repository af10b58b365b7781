"""A compacted partition whose leader has cleaned segments is copied to new replicas: a
real ZooKeeper, three ``pylog broker`` processes, confluent-kafka and kafka-python.

The leader's cleaner leaves what a producer could never send: batches with fewer records
than their offset delta says, batches it emptied to keep an idempotent producer's last
sequence, tombstones with a delete horizon. The followers added by a reassignment store
those batches as they are (Kafka's follower append), the ISR fills up, the replicas hold
the same records, and once the old replicas are gone the new one leads and serves the
latest value of every key.
"""

from __future__ import annotations

import signal
import time

import confluent_kafka
import pytest
from _harness.compaction import cleaner_checkpoint, latest_per_key, read_confluent
from _harness.waiting import wait_until as _wait
from _harness.zk_cluster import zk_cluster
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP

import logcore
from pylog.cluster.zk_store import ZkStore

pytestmark = pytest.mark.integration

SESSION_MS = 6000
TOPIC = "cleaned"
KEYS = 30
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4000", "segment.ms": "300",
           "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0",
           "file.delete.delay.ms": "0"}


@pytest.fixture
def cluster(zookeeper, new_broker):  # noqa: F811
    with zk_cluster(zookeeper, new_broker, SESSION_MS,
                    {"auto.leader.rebalance.enable": "false", "log.cleaner.backoff.ms": "100",
                     "replica.lag.time.max.ms": "5000"}) as c:
        yield c


def _state(store: ZkStore):
    found = store.get_partition_state(TOPIC, 0)
    return found[0] if found else None


def _produce(bootstrap: str, items: list[tuple[bytes, bytes | None]]) -> list[tuple]:
    """One idempotent producer (its own producer id), acks=all, several records a batch;
    returns (offset, key, value) from the delivery reports."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 20, "batch.size": 600})
    out: list[tuple] = []
    failures: list[str] = []

    def report(err, msg) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            out.append((msg.offset(), msg.key(), msg.value()))

    for key, value in items:
        p.produce(TOPIC, value=value, key=key, partition=0, on_delivery=report)
        p.poll(0)
    assert p.flush(30) == 0 and not failures, failures[:3]
    return out


def _replica_batches(broker) -> list:
    """Every batch of the broker's replica, read from its files (one segment a read)."""
    out = []
    with logcore.ReadOnlyLog(str(broker.data_dir / f"{TOPIC}-0")) as log:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            region = log.read(offset, 1 << 30)
            if not region:
                break
            out.extend(b for b in logcore.iter_batches(region.read()) if b.last_offset >= offset)
            offset = region.last_offset + 1
    return out


def _replica_records(broker) -> list[tuple]:
    return [(r.offset, r.key, r.value) for b in _replica_batches(broker) for r in b]


def test_a_cleaned_compacted_log_is_copied_to_new_replicas_which_then_lead(cluster):
    brokers, store = cluster
    ctl = _wait(store.get_controller, 30, "a controller").broker_id
    # x leads alone; y and w (the controller, which stays up to elect it) are added.
    x, y = [b for b in (0, 1, 2) if b != ctl]
    w = ctl
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[x]],
                                  config=COMPACT)])[TOPIC].result(30)
    _wait(lambda: (s := _state(store)) and s.leader == x, 30, f"{TOPIC} led by broker {x}")

    # Producer A writes every key; producer B overwrites them all (A's last batch is kept
    # empty: it holds A's sequence) and deletes five; a later write of some keys leaves
    # B's batches with gaps; the pads roll the segment (segment.ms) so all is cleanable.
    written = _produce(bootstrap, [(b"k%d" % (i % KEYS), b"a%d" % i) for i in range(120)])
    written += _produce(bootstrap, [(b"k%d" % (i % KEYS), b"b%d" % i) for i in range(120)]
                        + [(b"k%d" % i, None) for i in range(5)])
    written += _produce(bootstrap, [(b"k%d" % i, b"c%d" % i) for i in range(10, 20)])
    dirty_end = max(o for o, _k, _v in written) + 1
    pads = 0
    while (cleaner_checkpoint(brokers[x].data_dir / f"{TOPIC}-0") or 0) < dirty_end:
        written += _produce(bootstrap, [(b"pad%d" % pads, b"p")])  # each may roll a segment
        pads += 1
        assert pads < 100, "the leader's cleaner did not clean the written records"
        time.sleep(0.4)  # past segment.ms: the next record rolls the segment
    batches = _replica_batches(brokers[x])
    assert [b for b in batches if b.records_count == 0], "an emptied batch"
    assert [b for b in batches if 0 < b.records_count < b.last_offset_delta + 1], "a gappy batch"
    assert [r for b in batches for r in b if r.value is None], "tombstones"
    expected = latest_per_key(sorted(written))

    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        tp = KTP(TOPIC, 0)
        assert kadmin.alter_partition_reassignments({tp: [x, y, w]}) == {tp: None}
        _wait(lambda: (a := store.get_topic_assignment(TOPIC)[0].partitions[0])
              and not a.adding_replicas and a.replicas == (x, y, w), 60,
              "the reassignment to complete (the new replicas in the ISR)")
    finally:
        kadmin.close()
    st = _state(store)
    assert st.leader == x and sorted(st.isr) == [0, 1, 2]

    # The old leader and one new replica go; w, the other new replica, leads.
    brokers[x].stop(sig=signal.SIGTERM)
    brokers[y].stop(sig=signal.SIGTERM)
    _wait(lambda: (s := _state(store)) and s.leader == w, SESSION_MS / 1000 + 30,
          f"broker {w} to lead")
    end = max(o for o, _k, _v in written) + 1
    got = read_confluent(brokers[w].bootstrap, TOPIC, end)
    assert latest_per_key(got) == expected
    latest = {k: v for _o, k, v in latest_per_key(got)}
    assert latest[b"k0"] is None and latest[b"k15"] == b"c15"
    assert latest[b"k29"] == b"b%d" % max(i for i in range(120) if i % KEYS == 29)

    # Read offline, the three replicas hold the same records.
    brokers[w].stop(sig=signal.SIGTERM)
    copies = [_replica_records(brokers[b]) for b in (x, y, w)]
    assert copies[0] == copies[1] == copies[2]
    assert latest_per_key(copies[0]) == expected
