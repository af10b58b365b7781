"""The replica manager across real broker processes, without ZooKeeper: the test plays the
controller, sending LeaderAndIsr / StopReplica itself over the wire, and checks what the
brokers do with real clients (confluent-kafka) and by reading each broker's log files
with logcore afterwards.

- acks=all produces complete only once the followers have the records, and every
  replica's log is byte-identical afterwards;
- a killed follower leaves the ISR after replica.lag.time.max.ms; acks=all is then refused
  with NOT_ENOUGH_REPLICAS under min.insync.replicas=2; the follower restarts, catches up
  and rejoins, and acks=all works again;
- a follower with a diverged tail (records its old leader wrote that the new leader never
  got) truncates at the leader-epoch boundary and refetches: logs byte-identical again.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import (
    DeleteRecordsRequest,
    FetchRequest,
    LeaderAndIsrRequest,
    ProduceRequest,
    StopReplicaRequest,
)

pytestmark = pytest.mark.integration

TOPIC_ID = uuid.UUID("0b7e1f7c-5a8e-4c5e-9d55-3f1a2b3c4d5e")
FAST = {"replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "200",
        "auto.create.topics.enable": "false", "log.flush.interval.messages": "9223372036854775807"}


def start_brokers(new_broker: Any, n: int, **overrides: str) -> dict[int, Any]:
    brokers = {}
    for node in range(1, n + 1):
        brokers[node] = new_broker({**FAST, "node.id": str(node), **overrides}).start()
    return brokers


def leader_and_isr(target: Any, brokers: dict[int, Any], topic: str, partitions: list[int], *,
                   leader: int, epoch: int, isr: list[int], replicas: list[int],
                   partition_epoch: int = 0, controller_epoch: int = 1) -> dict[int, int]:
    """Send LeaderAndIsr (the newest version) to ``target``; returns {partition: error}."""
    R = LeaderAndIsrRequest
    body = R(controller_id=1, controller_epoch=controller_epoch, broker_epoch=-1, type=0,
             topic_states=[R.LeaderAndIsrTopicState(
                 topic_name=topic, topic_id=TOPIC_ID, partition_states=[
                     R.LeaderAndIsrPartitionState(
                         partition_index=p, controller_epoch=controller_epoch, leader=leader,
                         leader_epoch=epoch, isr=isr, partition_epoch=partition_epoch,
                         replicas=replicas, adding_replicas=[], removing_replicas=[],
                         is_new=False, leader_recovery_state=0)
                     for p in partitions])],
             live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=leader, host_name=brokers[leader].host,
                                                    port=brokers[leader].port)])
    with BrokerConnection(target.host, target.port, 10) as conn:
        resp = conn.request(body)
    assert resp.error_code == 0
    return {pe.partition_index: pe.error_code for t in resp.topics for pe in t.partition_errors}


def stop_replica(target: Any, topic: str, partition: int) -> None:
    R = StopReplicaRequest
    body = R(controller_id=1, controller_epoch=1, broker_epoch=-1, topic_states=[
        R.StopReplicaTopicState(topic_name=topic, partition_states=[
            R.StopReplicaPartitionState(partition_index=partition, leader_epoch=-1,
                                        delete_partition=False)])])
    with BrokerConnection(target.host, target.port, 10) as conn:
        resp = conn.request(body)
    assert resp.error_code == 0 and all(pe.error_code == 0 for pe in resp.partition_errors)


def wire_produce(target: Any, topic: str, n: int, acks: int = -1, timeout_ms: int = 1000) -> Any:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"wire-%d" % i, key=b"k%d" % i)
    R = ProduceRequest
    body = R(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[
            R.PartitionProduceData(index=0, records=b.build())])])
    with BrokerConnection(target.host, target.port, 10 + timeout_ms / 1000) as conn:
        resp = conn.request(body)
    return resp.responses[0].partition_responses[0]


def consumer_fetch(target: Any, topic: str, offset: int = 0) -> Any:
    F = FetchRequest
    body = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                 F.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                  last_fetched_epoch=-1, log_start_offset=-1,
                                  partition_max_bytes=1 << 24)])],
             forgotten_topics_data=[], rack_id="")
    with BrokerConnection(target.host, target.port, 10) as conn:
        return conn.request(body, 12).responses[0].partitions[0]


def log_bytes(broker: Any, topic: str, partition: int) -> tuple[bytes, int, list[tuple[int, int]], int]:
    """(every batch's bytes, log end offset, leader epochs, log start offset) read with
    logcore from a stopped broker's data directory."""
    log = logcore.Log(broker.data_dir / f"{topic}-{partition}")
    try:
        start = log.log_start_offset
        data = log.read(start, 1 << 30).read() if log.log_end_offset > start else b""
        return data, log.log_end_offset, log.leader_epoch_cache.entries, start
    finally:
        log.close()


def produce_all(bootstrap: str, topic: str, n: int, partitions: int) -> list[Any]:
    from confluent_kafka import Producer

    errs: list[Any] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "message.timeout.ms": 30000})
    for i in range(n):
        p.produce(topic, value=b"value-%d" % i, key=b"key-%d" % i, partition=i % partitions,
                  on_delivery=lambda err, _msg: errs.append(err) if err else None)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return errs


def wait_until(what: str, check: Any, timeout: float = 20.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_acks_all_waits_for_followers_and_replicas_are_byte_identical(new_broker, topic_name) -> None:
    brokers = start_brokers(new_broker, 3, **{"replica.lag.time.max.ms": "8000"})
    for b in brokers.values():
        assert leader_and_isr(b, brokers, topic_name, [0, 1], leader=1, epoch=0, isr=[1, 2, 3],
                              replicas=[1, 2, 3]) == {0: 0, 1: 0}
    assert produce_all(brokers[1].bootstrap, topic_name, 3000, 2) == []
    # DeleteRecords on the leader: the followers' log start follows it (their next fetch
    # carries it, and acks=all below waits for that fetch).
    D = DeleteRecordsRequest
    with BrokerConnection(brokers[1].host, brokers[1].port, 10) as conn:
        resp = conn.request(D(timeout_ms=5000, topics=[D.DeleteRecordsTopic(
            name=topic_name, partitions=[D.DeleteRecordsPartition(partition_index=1, offset=100)])]))
    assert resp.topics[0].partitions[0].error_code == 0

    # A paused follower holds acks=all (it is still in the ISR) until it resumes.
    from confluent_kafka import Producer

    done: list[Any] = []
    p = Producer({"bootstrap.servers": brokers[1].bootstrap, "acks": "all", "linger.ms": 0})
    p.produce(topic_name, value=b"held", partition=0, on_delivery=lambda e, m: done.append(e))
    p.produce(topic_name, value=b"after-delete", partition=1)
    p.flush(10)
    assert done == [None]
    brokers[3].proc.send_signal(signal.SIGSTOP)
    try:
        p.produce(topic_name, value=b"waits", partition=0, on_delivery=lambda e, m: done.append(e))
        p.poll(2.0)
        assert len(done) == 1, "acks=all completed while an ISR follower was paused"
    finally:
        brokers[3].proc.send_signal(signal.SIGCONT)
    assert p.flush(20) == 0 and done == [None, None]

    for b in brokers.values():
        assert b.stop() == 0, b.read_log()
    for partition in (0, 1):
        logs = [log_bytes(b, topic_name, partition) for b in brokers.values()]
        assert logs[0][1] == (1502 if partition == 0 else 1501)
        assert logs[0][3] == (0 if partition == 0 else 100)
        assert logs[0][0] and logs[0] == logs[1] == logs[2]
        assert logs[0][2] == [(0, logs[0][3])]


def test_dead_follower_leaves_the_isr_then_rejoins(new_broker, topic_name) -> None:
    brokers = start_brokers(new_broker, 2, **{"replica.lag.time.max.ms": "2000",
                                               "min.insync.replicas": "2"})
    for b in brokers.values():
        leader_and_isr(b, brokers, topic_name, [0], leader=1, epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce_all(brokers[1].bootstrap, topic_name, 200, 1) == []
    assert wire_produce(brokers[1], topic_name, 5).error_code == 0

    brokers[2].stop(sig=signal.SIGKILL)
    killed = time.monotonic()
    codes: list[int] = []

    def refused() -> bool:
        codes.append(wire_produce(brokers[1], topic_name, 1, timeout_ms=500).error_code)
        return codes[-1] == 19  # NOT_ENOUGH_REPLICAS

    wait_until("the ISR to shrink", refused, timeout=30)
    # Not before the follower's lag passed (it was caught up when killed); before that
    # acks=all produces waited and timed out.
    assert time.monotonic() - killed >= 1.5
    assert set(codes[:-1]) <= {7}, codes  # REQUEST_TIMED_OUT while the follower was still in
    assert "ISR shrink from [1, 2] to [1]" in brokers[1].read_log()
    assert wire_produce(brokers[1], topic_name, 1, acks=1).error_code == 0
    leo_fetch = consumer_fetch(brokers[1], topic_name)
    assert leo_fetch.error_code == 0

    # The follower comes back (same data, same port) and catches up: the ISR expands.
    brokers[2].start()
    leader_and_isr(brokers[2], brokers, topic_name, [0], leader=1, epoch=0, isr=[1],
                   replicas=[1, 2], partition_epoch=1)
    wait_until("acks=all to work again",
               lambda: wire_produce(brokers[1], topic_name, 1, timeout_ms=500).error_code == 0)
    assert "ISR expand from [1] to [1, 2]" in brokers[1].read_log()
    for b in brokers.values():
        assert b.stop() == 0, b.read_log()
    a, b2 = (log_bytes(b, topic_name, 0) for b in brokers.values())
    assert a == b2


def test_diverged_follower_truncates_to_the_epoch_boundary(new_broker, topic_name) -> None:
    brokers = start_brokers(new_broker, 2, **{"replica.lag.time.max.ms": "30000"})
    for b in brokers.values():
        leader_and_isr(b, brokers, topic_name, [0], leader=1, epoch=0, isr=[1, 2], replicas=[1, 2])
    assert produce_all(brokers[1].bootstrap, topic_name, 100, 1) == []  # on both

    # Broker 2 stops following; broker 1 takes 50 records only it will have.
    stop_replica(brokers[2], topic_name, 0)
    for _ in range(5):
        assert wire_produce(brokers[1], topic_name, 10, acks=1).error_code == 0
    # Consumers of broker 1 see only what is committed: up to the high watermark, 100.
    pd = consumer_fetch(brokers[1], topic_name)
    assert pd.error_code == 0 and pd.high_watermark == 100
    batches = list(logcore.iter_batches(bytes(pd.records)))
    assert batches[0].base_offset == 0 and batches[-1].last_offset == 99

    # Broker 2 becomes leader in epoch 1 (from offset 100) and takes 30 new records.
    leader_and_isr(brokers[2], brokers, topic_name, [0], leader=2, epoch=1, isr=[2], replicas=[1, 2],
                   partition_epoch=1)
    for _ in range(3):
        assert wire_produce(brokers[2], topic_name, 10, acks=1).error_code == 0
    # Broker 1 follows it: its fetch at 150 in epoch 0 diverges at 100; it cuts its 50
    # records and fetches the new leader's 30.
    leader_and_isr(brokers[1], brokers, topic_name, [0], leader=2, epoch=1, isr=[2], replicas=[1, 2],
                   partition_epoch=1)
    wait_until("the ISR to expand (broker 1 caught up)",
               lambda: "ISR expand from [2] to [1, 2]" in brokers[2].read_log())
    assert "truncated from 150 to 100" in brokers[1].read_log()
    for b in brokers.values():
        assert b.stop() == 0, b.read_log()
    one, two = (log_bytes(b, topic_name, 0) for b in brokers.values())
    assert one[1] == two[1] == 130
    assert one == two
    assert one[2] == [(0, 0), (1, 100)]
