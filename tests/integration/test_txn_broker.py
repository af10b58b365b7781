"""The transaction coordinator in a real broker process: confluent-kafka's transactional
producer, and exact requests (FindCoordinator key type 1, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions) for the rules clients rely on.
"""

from __future__ import annotations

import signal
import time
import uuid
from typing import Any

import pytest
from _harness.wire import BrokerConnection

from pylog.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    MetadataRequest,
)

NONE = 0
NOT_COORDINATOR = 16
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
UNKNOWN_TOPIC_OR_PARTITION = 3
OPERATION_NOT_ATTEMPTED = 55
TRANSACTION_ABORTABLE = 120



def connect(broker: Any) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=15)


def find_txn_coordinator(conn: BrokerConnection, txn: str) -> Any:
    return conn.request(FindCoordinatorRequest(key=txn, key_type=1, coordinator_keys=[txn]))


def init_pid(conn: BrokerConnection, txn: str | None, timeout_ms: int = 60_000, version: int | None = None,
             producer_id: int = -1, producer_epoch: int = -1) -> Any:
    body = InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=timeout_ms,
                                 producer_id=producer_id, producer_epoch=producer_epoch)
    return conn.request(body, version) if version is not None else conn.request(body)


def init_until_ready(conn: BrokerConnection, txn: str, timeout_ms: int = 60_000, **kw: Any) -> Any:
    """InitProducerId, retried while the coordinator says CONCURRENT_TRANSACTIONS (as clients do)."""
    deadline = time.monotonic() + 20
    while True:
        r = init_pid(conn, txn, timeout_ms, **kw)
        if r.error_code != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def add_partitions(conn: BrokerConnection, txn: str, pid: int, epoch: int, topic: str, partitions: list[int],
                   version: int = 3) -> dict[tuple[str, int], int]:
    R = AddPartitionsToTxnRequest
    body = R(v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
             v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=partitions)])
    resp = conn.request(body, version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def describe(conn: BrokerConnection, *txns: str) -> list[Any]:
    return list(conn.request(DescribeTransactionsRequest(transactional_ids=list(txns))).transaction_states)


def create_topic(conn: BrokerConnection, name: str, partitions: int) -> None:
    R = CreateTopicsRequest
    resp = conn.request(R(topics=[R.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
                          timeout_ms=10_000))
    assert resp.topics[0].error_code == 0, resp


def wait_for(predicate: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- raw protocol


def test_find_coordinator_creates_the_transaction_state_topic(broker) -> None:
    conn = connect(broker)
    try:
        txn = uid("find")
        assert init_pid(conn, "before-" + txn).error_code in (NONE, NOT_COORDINATOR)
        r = find_txn_coordinator(conn, txn)
        assert (r.error_code, r.node_id) == (0, 0)
        meta = conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="__transaction_state")]))
        [topic] = meta.topics
        assert topic.is_internal and len(topic.partitions) == 50
        R = DescribeConfigsRequest
        cfg = conn.request(R(resources=[R.DescribeConfigsResource(
            resource_type=2, resource_name="__transaction_state", configuration_keys=["cleanup.policy",
                                                                                    "compression.type"])]))
        values = {c.name: c.value for c in cfg.results[0].configs}
        assert values == {"cleanup.policy": "compact", "compression.type": "uncompressed"}
    finally:
        conn.close()


def test_init_producer_id_epochs_and_fencing(broker) -> None:
    conn = connect(broker)
    try:
        txn = uid("init")
        find_txn_coordinator(conn, txn)
        first = init_pid(conn, txn)
        assert first.error_code == 0 and first.producer_epoch == 0
        second = init_pid(conn, txn)
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
        # The first producer is fenced: PRODUCER_FENCED (v2+), INVALID_PRODUCER_EPOCH before.
        assert add_partitions(conn, txn, first.producer_id, 0, "any", [0]) == {("any", 0): UNKNOWN_TOPIC_OR_PARTITION}
        topic = uid("fence")
        create_topic(conn, topic, 2)
        assert add_partitions(conn, txn, first.producer_id, 0, topic, [0]) == {(topic, 0): PRODUCER_FENCED}
        assert add_partitions(conn, txn, first.producer_id, 0, topic, [0], version=1) == {
            (topic, 0): INVALID_PRODUCER_EPOCH}
        assert add_partitions(conn, txn, first.producer_id + 1, 1, topic, [0]) == {
            (topic, 0): INVALID_PRODUCER_ID_MAPPING}
        # KIP-360 (v3+): the current id and epoch bump; a stale epoch is fenced (v3 -> old code).
        bumped = init_pid(conn, txn, producer_id=first.producer_id, producer_epoch=1)
        assert (bumped.error_code, bumped.producer_epoch) == (0, 2)
        assert init_pid(conn, txn, version=4, producer_id=first.producer_id, producer_epoch=0).error_code == \
            PRODUCER_FENCED
        assert init_pid(conn, txn, version=3, producer_id=first.producer_id, producer_epoch=0).error_code == \
            INVALID_PRODUCER_EPOCH
        assert init_pid(conn, txn, timeout_ms=900_001).error_code == INVALID_TRANSACTION_TIMEOUT
        assert init_pid(conn, "").error_code == 42  # INVALID_REQUEST
        assert init_pid(conn, txn, producer_id=first.producer_id, producer_epoch=-1).error_code == 42
    finally:
        conn.close()


def test_add_partitions_describe_list_and_end(broker) -> None:
    conn = connect(broker)
    try:
        txn, topic = uid("desc"), uid("desc")
        find_txn_coordinator(conn, txn)
        create_topic(conn, topic, 3)
        r = init_pid(conn, txn, timeout_ms=45_000)
        pid, epoch = r.producer_id, r.producer_epoch
        [d] = describe(conn, txn)
        assert (d.error_code, d.transaction_state, d.transaction_start_time_ms, d.topics) == (0, "Empty", -1, [])
        assert end_txn(conn, txn, pid, epoch, True) == INVALID_TXN_STATE
        # One unknown partition fails the whole request; nothing is added.
        assert add_partitions(conn, txn, pid, epoch, topic, [0, 7]) == {
            (topic, 0): OPERATION_NOT_ATTEMPTED, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION}
        before = int(time.time() * 1000)
        assert add_partitions(conn, txn, pid, epoch, topic, [0, 2]) == {(topic, 0): 0, (topic, 2): 0}
        off = conn.request(AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                  group_id="g1"))
        assert off.error_code == 0
        [d, missing] = describe(conn, txn, uid("nobody"))
        assert missing.error_code == TRANSACTIONAL_ID_NOT_FOUND
        assert (d.error_code, d.transaction_state, d.transaction_timeout_ms, d.producer_id, d.producer_epoch) == (
            0, "Ongoing", 45_000, pid, epoch)
        assert d.transaction_start_time_ms >= before - 5_000
        parts = {(t.topic, p) for t in d.topics for p in t.partitions}
        assert {(topic, 0), (topic, 2)} <= parts and any(t == "__consumer_offsets" for t, _ in parts)
        # The verify-only check of v4+ (what partition leaders ask, KIP-890).
        R = AddPartitionsToTxnRequest
        v = conn.request(R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])])]), 4)
        [res] = v.results_by_transaction
        codes = {(t.name, p.partition_index): p.partition_error_code for t in res.topic_results
                 for p in t.results_by_partition}
        assert codes == {(topic, 0): 0, (topic, 1): TRANSACTION_ABORTABLE}
        listed = conn.request(ListTransactionsRequest(state_filters=["Ongoing", "Nope"], producer_id_filters=[pid],
                                                      duration_filter=-1))
        assert listed.error_code == 0 and list(listed.unknown_state_filters) == ["Nope"]
        assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
            (txn, pid, "Ongoing")]
        longer = conn.request(ListTransactionsRequest(state_filters=[], producer_id_filters=[pid],
                                                      duration_filter=3_600_000), 1)
        assert list(longer.transaction_states) == []
        # Abort: answered once PrepareAbort is written; the markers follow.
        assert end_txn(conn, txn, pid, epoch, False) == 0
        assert end_txn(conn, txn, pid, epoch, True) in (INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS)
        [d] = describe(conn, txn)
        assert d.transaction_state in ("PrepareAbort", "CompleteAbort")
        assert wait_for(lambda: describe(conn, txn)[0].transaction_state == "CompleteAbort")
        assert end_txn(conn, txn, pid, epoch, False) == 0
    finally:
        conn.close()


def end_txn(conn: BrokerConnection, txn: str, pid: int, epoch: int, commit: bool, version: int | None = None) -> int:
    body = EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit)
    resp = conn.request(body, version) if version is not None else conn.request(body)
    return int(resp.error_code)


def test_open_transaction_times_out_and_is_aborted(new_broker) -> None:
    b = new_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}).start()
    conn = connect(b)
    try:
        txn, topic = uid("timeout"), uid("timeout")
        find_txn_coordinator(conn, txn)
        create_topic(conn, topic, 1)
        r = init_pid(conn, txn, timeout_ms=1_000)
        assert add_partitions(conn, txn, r.producer_id, r.producer_epoch, topic, [0]) == {(topic, 0): 0}
        # The fence bumps the epoch in memory at once; the state stays Ongoing until the
        # PrepareAbort write is acknowledged (as in Kafka): wait for both.
        aborted = wait_for(lambda: (d := describe(conn, txn)[0]).producer_epoch == r.producer_epoch + 1
                           and d.transaction_state in ("PrepareAbort", "CompleteAbort"))
        assert aborted, describe(conn, txn)
        # The producer that left it open is fenced.
        assert add_partitions(conn, txn, r.producer_id, r.producer_epoch, topic, [0]) == {(topic, 0): PRODUCER_FENCED}
        assert end_txn(conn, txn, r.producer_id, r.producer_epoch, True) == PRODUCER_FENCED
        assert wait_for(lambda: describe(conn, txn)[0].transaction_state == "CompleteAbort")
        again = init_until_ready(conn, txn)
        assert (again.error_code, again.producer_epoch) == (0, r.producer_epoch + 2)
    finally:
        conn.close()
        b.stop()


def test_transactions_survive_a_restart(new_broker) -> None:
    b = new_broker().start()
    txn, topic = uid("restart"), uid("restart")
    conn = connect(b)
    try:
        find_txn_coordinator(conn, txn)
        create_topic(conn, topic, 2)
        r = init_pid(conn, txn)
        assert add_partitions(conn, txn, r.producer_id, r.producer_epoch, topic, [1]) == {(topic, 1): 0}
    finally:
        conn.close()
    assert b.stop(sig=signal.SIGKILL) is not None
    b.start()
    conn = connect(b)
    try:
        d = wait_for(lambda: (s := describe(conn, txn)[0]).error_code == 0 and s)
        assert d, describe(conn, txn)
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", r.producer_id, r.producer_epoch)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [1])]
        # The restarted coordinator fences as before.
        again = init_until_ready(conn, txn)
        assert (again.error_code, again.producer_epoch) == (0, r.producer_epoch + 2)
    finally:
        conn.close()
        b.stop()


# --------------------------------------------------------------------------- confluent-kafka


def producer(broker: Any, txn: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": txn, "transaction.timeout.ms": 30_000,
            "message.timeout.ms": 20_000}
    conf.update(extra)
    return Producer(conf)


def test_confluent_init_transactions_and_fencing_by_a_second_producer(broker, topic_name) -> None:
    from confluent_kafka import KafkaException

    txn = uid("cfence")
    first = producer(broker, txn)
    first.init_transactions(20)
    second = producer(broker, txn)
    second.init_transactions(20)
    conn = connect(broker)
    try:
        [d] = describe(conn, txn)
        assert (d.transaction_state, d.producer_epoch) == ("Empty", 1)
    finally:
        conn.close()
    first.begin_transaction()
    first.produce(topic_name, b"zombie")
    with pytest.raises(KafkaException) as info:
        first.commit_transaction(20)
    err = info.value.args[0]
    assert err.fatal() and "fenced" in err.str().lower(), err


@pytest.mark.parametrize("commit", [True, False])
def test_confluent_commit_and_abort_end_to_end(broker, topic_name, commit: bool) -> None:
    from confluent_kafka import Consumer, TopicPartition

    txn = uid("e2e")
    p = producer(broker, txn)
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, b"m%d" % i, partition=0)
    if commit:
        p.commit_transaction(20)
    else:
        p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic_name, b"after", partition=0)
    p.commit_transaction(20)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uid("g"), "isolation.level": "read_committed",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while b"after" not in got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    expected = [b"m%d" % i for i in range(10)] if commit else []
    assert got == [*expected, b"after"]
    conn = connect(broker)
    try:
        # EndTxn is answered once PrepareCommit is written; completion follows the markers.
        assert wait_for(lambda: describe(conn, txn)[0].transaction_state == "CompleteCommit")
    finally:
        conn.close()


def test_confluent_transaction_left_open_is_aborted_by_the_coordinator(new_broker, topic_name) -> None:
    from confluent_kafka import KafkaException

    b = new_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
                    "auto.create.topics.enable": "true"}).start()
    try:
        txn = uid("open")
        # librdkafka requires message.timeout.ms <= transaction.timeout.ms.
        p = producer(b, txn, **{"transaction.timeout.ms": 1_500, "message.timeout.ms": 1_500})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce(topic_name, b"left open", partition=0)
        p.flush(20)
        conn = connect(b)
        try:
            assert wait_for(lambda: describe(conn, txn)[0].transaction_state == "CompleteAbort")
        finally:
            conn.close()
        with pytest.raises(KafkaException):
            p.commit_transaction(20)
    finally:
        b.stop()
