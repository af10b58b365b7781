"""Transactions, partition side, against a real broker process: hand-built transactional
batches (Produce with a transactional id), markers through WriteTxnMarkers, and what
read_committed / read_uncommitted readers see (raw Fetch and ListOffsets, a
confluent-kafka consumer), DescribeProducers, and the LSO across a restart.

The brokers here run with ``transaction.partition.verification.enable=false``: the
batches come from made-up producers that no transaction coordinator knows, which KIP-890
verification would refuse (that check is tested with real transactions elsewhere)."""

from __future__ import annotations

import signal
import time

import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import (
    CreateTopicsRequest,
    DescribeProducersRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from tests.integration.conftest import BrokerProcess

pytestmark = pytest.mark.integration

NO_VERIFY = {"transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("broker") / "data"
    data.mkdir()
    b = BrokerProcess(data, {"auto.create.topics.enable": "true", **NO_VERIFY}).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_RECORD = 87
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def connect(broker) -> BrokerConnection:
    host, port = broker.bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout=20)


def create(conn, name: str, partitions: int = 1) -> None:
    R = CreateTopicsRequest
    resp = conn.request(R(topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000))
    assert resp.topics[0].error_code == 0


def new_pid(conn) -> int:
    resp = conn.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                              producer_id=-1, producer_epoch=-1))
    assert resp.error_code == 0
    return resp.producer_id


def batch(values: list[bytes], pid: int = -1, seq: int = -1, epoch: int = 0, *,
          transactional: bool = False) -> bytes:
    b = logcore.BatchBuilder(producer_id=pid, producer_epoch=epoch if pid >= 0 else -1,
                             base_sequence=seq, transactional=transactional)
    for v in values:
        b.append(v, key=b"k")
    return b.build()


def produce(conn, topic: str, records: bytes, transactional_id: str | None = None):
    R = ProduceRequest
    body = R(transactional_id=transactional_id, acks=-1, timeout_ms=5000,
             topic_data=[R.TopicProduceData(name=topic, partition_data=[
                 R.PartitionProduceData(index=0, records=records)])])
    return conn.request(body).responses[0].partition_responses[0]


def markers(conn, entries: list[tuple[int, int, bool, int, str]]) -> list[int]:
    """entries: (producer id, epoch, commit, coordinator epoch, topic); returns the codes."""
    R = WriteTxnMarkersRequest
    resp = conn.request(R(markers=[
        R.WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                            coordinator_epoch=coord, topics=[
                                R.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])
        for pid, epoch, commit, coord, topic in entries]))
    return [p.error_code for m in resp.markers for t in m.topics for p in t.partitions]


def fetch(conn, topic: str, offset: int, isolation: int, max_bytes: int = 1 << 20,
          max_wait_ms: int = 0):
    R = FetchRequest
    resp = conn.request(R(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        isolation_level=isolation, session_id=0, session_epoch=-1,
        topics=[R.FetchTopic(topic=topic, partitions=[R.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=max_bytes,
            log_start_offset=-1, current_leader_epoch=-1)])],
        forgotten_topics_data=[], rack_id=""))
    return resp.responses[0].partitions[0]


def offsets_of(pd) -> list[int]:
    data = bytes(pd.records) if pd.records is not None else b""
    return [r.offset for b in logcore.iter_batches(data) if not b.is_control for r in b]


def aborted_of(pd) -> list[tuple[int, int]] | None:
    if pd.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in pd.aborted_transactions]


def list_offset(conn, topic: str, timestamp: int, isolation: int) -> tuple[int, int]:
    R = ListOffsetsRequest
    resp = conn.request(R(replica_id=-1, isolation_level=isolation, topics=[R.ListOffsetsTopic(
        name=topic, partitions=[R.ListOffsetsPartition(partition_index=0, timestamp=timestamp,
                                                       current_leader_epoch=-1)])]))
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset, p.timestamp


def producers(conn, topic: str) -> dict[int, tuple[int, int, int, int]]:
    R = DescribeProducersRequest
    resp = conn.request(R(topics=[R.TopicRequest(name=topic, partition_indexes=[0, 7])]))
    ok, missing = resp.topics[0].partitions
    assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert ok.error_code == 0
    return {p.producer_id: (p.producer_epoch, p.last_sequence, p.coordinator_epoch,
                            p.current_txn_start_offset) for p in ok.active_producers}


def test_read_committed_lso_aborted_transactions_and_markers(broker, topic_name) -> None:
    conn = connect(broker)
    try:
        create(conn, topic_name)
        a, b = new_pid(conn), new_pid(conn)
        assert produce(conn, topic_name, batch([b"a0", b"a1", b"a2"], a, 0, transactional=True),
                       "tx-a").base_offset == 0
        assert produce(conn, topic_name, batch([b"p3", b"p4"])).base_offset == 3
        assert produce(conn, topic_name, batch([b"b5", b"b6"], b, 0, transactional=True),
                       "tx-b").base_offset == 5
        # Both transactions open: read_committed stops at the first one.
        pd = fetch(conn, topic_name, 0, 1)
        assert (pd.error_code, pd.high_watermark, pd.last_stable_offset) == (0, 7, 0)
        assert offsets_of(pd) == [] and aborted_of(pd) == []
        pd = fetch(conn, topic_name, 0, 0)
        assert offsets_of(pd) == list(range(7)) and aborted_of(pd) is None
        assert pd.last_stable_offset == 0
        assert list_offset(conn, topic_name, -1, 1) == (0, -1)
        assert list_offset(conn, topic_name, -1, 0) == (7, -1)
        assert producers(conn, topic_name)[a] == (0, 2, -1, 0)

        # A non-transactional write of a producer with an open transaction is refused.
        bad = produce(conn, topic_name, batch([b"x"], a, 3), None)
        assert bad.error_code == INVALID_TXN_STATE
        # Transactional batches need the request's transactional id.
        bad = produce(conn, topic_name, batch([b"x"], a, 3, transactional=True), None)
        assert bad.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED

        # Abort a: LSO moves to b's first offset; a's range is listed as aborted.
        assert markers(conn, [(a, 0, False, 3, topic_name)]) == [0]  # marker at 7
        pd = fetch(conn, topic_name, 0, 1)
        assert (pd.high_watermark, pd.last_stable_offset) == (8, 5)
        assert offsets_of(pd) == [0, 1, 2, 3, 4]
        assert aborted_of(pd) == [(a, 0)]
        assert list_offset(conn, topic_name, -1, 1) == (5, -1)
        assert producers(conn, topic_name)[a] == (0, 2, 3, -1)

        # Fenced markers change nothing.
        assert markers(conn, [(b, 0, True, 2, topic_name)]) == [0]  # b commits at 8
        assert markers(conn, [(b, 0, True, 1, topic_name), (a, 0, False, 3, topic_name),
                              (a, 0, False, 3, "no-such-topic")]) == [
            TRANSACTION_COORDINATOR_FENCED, 0, UNKNOWN_TOPIC_OR_PARTITION]
        # (a's second ABORT has no open transaction: written, nothing aborted: offset 9)
        pd = fetch(conn, topic_name, 0, 1)
        assert (pd.high_watermark, pd.last_stable_offset) == (10, 10)
        assert offsets_of(pd) == [0, 1, 2, 3, 4, 5, 6]
        assert aborted_of(pd) == [(a, 0)]
        # Only the transactions overlapping the returned range are listed.
        assert aborted_of(fetch(conn, topic_name, 8, 1)) == []
        assert aborted_of(fetch(conn, topic_name, 5, 1)) == [(a, 0)]  # its marker (7) is in range
        assert list_offset(conn, topic_name, -1, 1) == (10, -1)

        # A marker with an older producer epoch: INVALID_PRODUCER_EPOCH.
        assert produce(conn, topic_name, batch([b"b10"], b, 0, 1, transactional=True),
                       "tx-b").base_offset == 10
        assert markers(conn, [(b, 0, False, 2, topic_name)]) == [INVALID_PRODUCER_EPOCH]
        assert fetch(conn, topic_name, 0, 1).last_stable_offset == 10
        assert markers(conn, [(b, 1, False, 2, topic_name)]) == [0]
        pd = fetch(conn, topic_name, 10, 1)
        assert aborted_of(pd) == [(b, 10)] and pd.last_stable_offset == 12
        got = producers(conn, topic_name)
        assert got[b] == (1, 0, 2, -1)
    finally:
        conn.close()


def test_marker_wakes_a_waiting_read_committed_fetch(broker, topic_name) -> None:
    import threading

    conn, other = connect(broker), connect(broker)
    try:
        create(conn, topic_name)
        pid = new_pid(conn)
        produce(conn, topic_name, batch([b"t0", b"t1"], pid, 0, transactional=True), "tx")
        result = {}

        def poll() -> None:
            start = time.monotonic()
            result["pd"] = fetch(other, topic_name, 0, 1, max_wait_ms=15000)
            result["s"] = time.monotonic() - start

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.5)  # the fetch is waiting: nothing below the LSO (0)
        assert markers(conn, [(pid, 0, True, 0, topic_name)]) == [0]
        t.join(20)
        assert offsets_of(result["pd"]) == [0, 1]
        assert result["s"] < 10  # woken by the marker, not by max_wait_ms
    finally:
        conn.close()
        other.close()


def test_clients_may_not_write_control_batches(broker, topic_name) -> None:
    conn = connect(broker)
    try:
        create(conn, topic_name)
        pid = new_pid(conn)
        b = logcore.BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=-1,
                                 transactional=True, is_control=True)
        b.append(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x01")
        resp = produce(conn, topic_name, b.build(), "tx")
        assert resp.error_code == INVALID_RECORD
        assert "control" in resp.error_message
    finally:
        conn.close()


def test_confluent_read_committed_consumer_skips_aborted_records(broker, topic_name) -> None:
    from confluent_kafka import Consumer, TopicPartition

    conn = connect(broker)
    try:
        create(conn, topic_name)
        a, b = new_pid(conn), new_pid(conn)
        # interleaved: a (aborted) and b (committed) and plain records
        produce(conn, topic_name, batch([b"a0", b"a1"], a, 0, transactional=True), "tx-a")
        produce(conn, topic_name, batch([b"b0"], b, 0, transactional=True), "tx-b")
        produce(conn, topic_name, batch([b"plain0"]))
        produce(conn, topic_name, batch([b"a2"], a, 2, transactional=True), "tx-a")
        produce(conn, topic_name, batch([b"b1"], b, 1, transactional=True), "tx-b")
        assert markers(conn, [(a, 0, False, 0, topic_name)]) == [0]
        produce(conn, topic_name, batch([b"plain1"]))
        assert markers(conn, [(b, 0, True, 0, topic_name)]) == [0]
        produce(conn, topic_name, batch([b"a3"], a, 3, transactional=True), "tx-a")
        assert markers(conn, [(a, 0, True, 0, topic_name)]) == [0]
        end = fetch(conn, topic_name, 0, 1).high_watermark
    finally:
        conn.close()

    def consume(isolation: str) -> list[bytes]:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{isolation}",
                      "isolation.level": isolation, "enable.auto.commit": False,
                      "fetch.wait.max.ms": 100})
        try:
            c.assign([TopicPartition(topic_name, 0, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    if c.position([TopicPartition(topic_name, 0)])[0].offset >= end:
                        break
                    continue
                assert m.error() is None, m.error()
                got.append(m.value())
            return got
        finally:
            c.close()

    assert consume("read_committed") == [b"b0", b"plain0", b"b1", b"plain1", b"a3"]
    assert consume("read_uncommitted") == [b"a0", b"a1", b"b0", b"plain0", b"a2", b"b1",
                                           b"plain1", b"a3"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_open_transaction_survives_a_restart(new_broker, sig) -> None:
    b = new_broker({"auto.create.topics.enable": "true", **NO_VERIFY}).start()
    topic = "txn-restart"
    conn = connect(b)
    try:
        create(conn, topic)
        pid = new_pid(conn)
        produce(conn, topic, batch([b"p0"]))
        produce(conn, topic, batch([b"t1", b"t2"], pid, 0, transactional=True), "tx")
        produce(conn, topic, batch([b"p3"]))
        assert fetch(conn, topic, 0, 1).last_stable_offset == 1
    finally:
        conn.close()
    b.stop(sig=sig)
    b.start()
    conn = connect(b)
    try:
        pd = fetch(conn, topic, 0, 1)
        assert (pd.high_watermark, pd.last_stable_offset) == (4, 1)
        assert offsets_of(pd) == [0]
        assert list_offset(conn, topic, -1, 1) == (1, -1)
        assert producers(conn, topic)[pid] == (0, 1, -1, 1)
        assert markers(conn, [(pid, 0, False, 0, topic)]) == [0]
        pd = fetch(conn, topic, 0, 1)
        assert pd.last_stable_offset == 5 and aborted_of(pd) == [(pid, 1)]
    finally:
        conn.close()
    b.stop()
    b.start()  # the abort's index entry is kept too
    conn = connect(b)
    try:
        pd = fetch(conn, topic, 0, 1)
        assert pd.last_stable_offset == 5 and aborted_of(pd) == [(pid, 1)]
    finally:
        conn.close()
    assert b.stop() == 0


def test_verification_refuses_a_partition_not_added_to_the_transaction(new_broker, topic_name) -> None:
    """KIP-890 part 1 (on by default): a producer's first transactional batch on a partition
    is checked with the coordinator; a partition the producer did not add with
    AddPartitionsToTxn is refused (INVALID_TXN_STATE before Produce v11) and nothing is
    written; the added one is accepted."""
    from pylog.protocol.messages import AddPartitionsToTxnRequest, FindCoordinatorRequest

    b = new_broker().start()
    conn = connect(b)
    try:
        create(conn, topic_name, 2)
        txn = f"verify-{topic_name[-6:]}"
        assert conn.request(FindCoordinatorRequest(key=txn, key_type=1,
                                                   coordinator_keys=[txn])) is not None
        deadline = time.monotonic() + 20
        while True:
            r = conn.request(InitProducerIdRequest(transactional_id=txn, transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1))
            if r.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # the coordinator's partition is loading / being created
        assert r.error_code == 0
        R = AddPartitionsToTxnRequest
        added = conn.request(R(v3_and_below_transactional_id=txn, v3_and_below_producer_id=r.producer_id,
                               v3_and_below_producer_epoch=r.producer_epoch,
                               v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=topic_name,
                                                                              partitions=[0])]), 3)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

        P = ProduceRequest
        recs = batch([b"x"], r.producer_id, 0, r.producer_epoch, transactional=True)
        body = P(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name=topic_name, partition_data=[P.PartitionProduceData(index=1, records=recs)])])
        refused = conn.request(body, 10).responses[0].partition_responses[0]
        assert refused.error_code == INVALID_TXN_STATE, refused
        body.topic_data[0].partition_data[0].index = 0
        ok = conn.request(body, 10).responses[0].partition_responses[0]
        assert (ok.error_code, ok.base_offset) == (0, 0)
        assert fetch(conn, topic_name, 0, 0).high_watermark == 1
    finally:
        conn.close()
