"""unclean.leader.election.enable end to end: the documented loss happens when, and only when,
it is enabled.

A partition with replicas [a, b] (neither the controller) and ``min.insync.replicas=1`` takes
acks=all records on both; then b hangs (SIGSTOP) until it leaves the ISR, and more acks=all
records are acknowledged by a alone. Both are killed (SIGKILL) and only the stale b comes back:

- unclean off (Kafka's default): the partition stays offline (ZooKeeper state leader -1,
  Metadata leader -1, a produce times out); once a, the last ISR member, returns it leads
  again and every acknowledged record is there; b catches up and its log is byte-identical.
- unclean on (topic config): b is elected from outside the ISR and exactly the records it
  lacked (acknowledged at offsets from b's log end on) are lost; the rest is read back
  intact. When a returns it truncates its diverged tail and holds b's bytes.
"""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from _harness.zookeeper import missing_reason
from confluent_kafka.admin import AdminClient

import logcore
from pylog.cluster import zk_data as z

from .harness import SESSION_MS, Cluster, wait_for

pytestmark = pytest.mark.integration

TOPIC = "unclean"
BEFORE, AFTER = 200, 150


def _produce(bootstrap: str, start: int, n: int) -> list[tuple[int, bytes]]:
    acked: list[tuple[int, bytes]] = []
    errs: list[str] = []

    def done(err, msg):  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.offset(), msg.value()))
        else:
            errs.append(str(err))

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 60000})
    for i in range(start, start + n):
        p.produce(TOPIC, f"record-{i:05d}".encode() * 3, partition=0, on_delivery=done)
        p.poll(0)
    assert p.flush(90) == 0
    assert not errs, errs[:3]
    return sorted(acked)


def _read(bootstrap: str, expect: int) -> list[tuple[int, bytes]]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unclean-check",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(got) < expect:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    # Nothing more arrives: the partition holds exactly what was read.
    end = time.monotonic() + 2
    while time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    return got


def _metadata_leader(bootstrap: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=TOPIC, timeout=10)
    return md.topics[TOPIC].partitions[0].leader


def _log_bytes(cluster: Cluster, broker: int) -> bytes:
    with logcore.ReadOnlyLog(str(cluster.brokers[broker].data_dir / f"{TOPIC}-0")) as log:
        return log.read(0, 1 << 30).read()


@pytest.mark.parametrize("unclean", [False, True], ids=["unclean-off", "unclean-on"])
def test_unclean_leader_election_loses_exactly_what_the_stale_replica_lacked(
        tmp_path, unclean: bool) -> None:
    if missing_reason():
        pytest.skip(missing_reason())
    with Cluster(tmp_path) as cluster:
        ctl = wait_for(lambda: (c := cluster.controller()) is not None and (c,), 30,
                       "a controller")[0]
        a, b = [i for i in cluster.ids if i != ctl]
        assert cluster.store is not None
        cluster.store.create_topic(
            TOPIC, z.TopicAssignment({0: z.ReplicaAssignment((a, b))}, z.new_uuid_text()),
            {"unclean.leader.election.enable": str(unclean).lower(),
             "min.insync.replicas": "1"})
        wait_for(lambda: (st := cluster.state(TOPIC, 0)) and st.leader == a
                 and set(st.isr) == {a, b}, 60, "leader a with ISR [a, b]")
        first = _produce(cluster.bootstrap, 0, BEFORE)  # on a and b (acks=all, ISR [a, b])

        cluster.brokers[b].pause()  # b hangs past replica.lag.time.max.ms and its session
        wait_for(lambda: (st := cluster.state(TOPIC, 0)) and st.isr == (a,),
                 SESSION_MS / 1000 + 60, "b to leave the ISR")
        second = _produce(cluster.brokers[a].bootstrap, BEFORE, AFTER)  # acknowledged by a alone
        acked = first + second
        assert [o for o, _ in acked] == list(range(BEFORE + AFTER))

        cluster.brokers[b].kill()
        cluster.brokers[a].kill()
        cluster.wait_unregistered(a)
        cluster.wait_unregistered(b)
        stale_end = logcore.ReadOnlyLog(str(cluster.brokers[b].data_dir / f"{TOPIC}-0")
                                        ).log_end_offset
        # b lacks what was acknowledged after it left the ISR, and only that.
        assert stale_end == BEFORE
        lacked = [(o, v) for o, v in acked if o >= stale_end]
        cluster.restart(b)  # only the stale replica comes back

        if not unclean:
            time.sleep(SESSION_MS / 1000)  # the controller has seen b return
            st = cluster.state(TOPIC, 0)
            assert st.leader == -1 and st.isr == (a,), st  # offline, a keeps its ISR seat
            assert _metadata_leader(cluster.brokers[b].bootstrap) == -1
            p = confluent_kafka.Producer({"bootstrap.servers": cluster.brokers[b].bootstrap,
                                          "acks": "all", "message.timeout.ms": 5000})
            failed: list[object] = []
            p.produce(TOPIC, b"while offline", partition=0,
                      on_delivery=lambda err, msg: failed.append(err))
            p.flush(30)
            assert failed and failed[0] is not None, "a produce to an offline partition " \
                                                     "was acknowledged"
            cluster.restart(a)  # the ISR member returns: it leads, nothing is lost
            wait_for(lambda: (s := cluster.state(TOPIC, 0)) and s.leader == a
                     and set(s.isr) == {a, b}, 90, "a to lead again and b to rejoin")
            assert _read(cluster.bootstrap, len(acked)) == acked
        else:
            st = wait_for(lambda: (s := cluster.state(TOPIC, 0)) and s.leader == b and s,
                          60, "the unclean election of b")
            assert st.isr == (b,)
            got = _read(cluster.bootstrap, len(acked) - len(lacked))
            assert got == [r for r in acked if r not in lacked]  # the rest is intact
            lost = [r for r in acked if r not in got]
            assert lost == lacked and len(lost) == AFTER
            cluster.restart(a)  # a returns as a follower and truncates its diverged tail
            wait_for(lambda: (s := cluster.state(TOPIC, 0)) and set(s.isr) == {a, b}, 90,
                     "a to rejoin the ISR")
            assert _read(cluster.bootstrap, len(got)) == got
        cluster.stop_brokers()
        assert _log_bytes(cluster, a) == _log_bytes(cluster, b)
