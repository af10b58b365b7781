"""A broker killed (SIGKILL) with a transaction in each state, then restarted: Kafka's rules
decide the outcome, read_committed readers never see an aborted record, nothing committed is
lost.

A confluent-kafka producer commits one transaction, then writes the records of a second
one to two partitions and does not end it; the broker is killed. What the coordinator had
written to ``__transaction_state`` at the kill decides what the restarted broker must do:

- ``Ongoing`` (killed before EndTxn): the transaction stays open, holding read_committed
  readers at its first offset, until its timeout; then it is aborted and the LSO moves on;
- ``PrepareCommit`` (killed after EndTxn was logged, before any marker was written): the
  restarted coordinator writes the COMMIT markers and completes it: the records appear;
- ``PrepareAbort`` (same, for an abort): the ABORT markers are written, the records never
  appear to read_committed readers.

The Prepare* states are the moment between the coordinator's log append and its marker
writes, too short to hit with a timed kill: the test kills the broker in Ongoing and then
appends the record the coordinator appends at EndTxn (Kafka's TransactionLog value with the
new state) to the transaction's ``__transaction_state`` partition, as it would be on disk had
the kill come a moment later.
"""

from __future__ import annotations

import signal
import time
import uuid

import confluent_kafka
import pytest
from _harness.wire import BrokerConnection

import logcore
from pylog.protocol.messages import DescribeTransactionsRequest
from pylog.txn.config import partition_for
from pylog.txn.metadata import TxnState, TxnTransit
from pylog.txn.records import decode_key, decode_value, encode_key, encode_value

pytestmark = pytest.mark.integration

TXN_PARTITIONS = 50


def _describe(bootstrap: str, txn: str) -> tuple[int, str]:
    host, port = bootstrap.rsplit(":", 1)
    with BrokerConnection(host, int(port), timeout=15) as conn:
        (s,) = conn.request(DescribeTransactionsRequest(transactional_ids=[txn])).transaction_states
        return s.error_code, s.transaction_state


def _wait_state(bootstrap: str, txn: str, want: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    got: tuple[int, str] = (-1, "")
    while time.monotonic() < deadline:
        got = _describe(bootstrap, txn)
        if got == (0, want):
            return
        time.sleep(0.1)
    raise AssertionError(f"{txn} is {got}, expected {want}")


def _read(bootstrap: str, topic: str, isolation: str, settle: float = 2.0) -> list[bytes]:
    """Everything readable now in both partitions (polled until quiet for ``settle`` s)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-reader",
                                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
              for p in range(2)])
    out: list[bytes] = []
    quiet = time.monotonic() + settle
    try:
        while time.monotonic() < quiet:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m.value())
                quiet = time.monotonic() + settle
    finally:
        c.close()
    return sorted(out)


def _log_prepare(data_dir: str, txn: str, state: TxnState) -> None:
    """Append ``txn``'s next state to its ``__transaction_state`` partition, as the
    coordinator's EndTxn does (the broker is down)."""
    directory = f"{data_dir}/__transaction_state-{partition_for(txn, TXN_PARTITIONS)}"
    with logcore.Log(directory) as log:
        last = None
        pos = log.log_start_offset
        while pos < log.log_end_offset:
            region = log.read(pos, 1 << 20)
            for batch in logcore.iter_batches(region.read()):
                for rec in batch:
                    key = decode_key(rec.key)
                    if getattr(key, "transactional_id", None) == txn:
                        last = decode_value(rec.value)
            pos = region.last_offset + 1
        assert last is not None and last.transaction_status == TxnState.ONGOING, last
        parts = frozenset((p.topic, i) for p in last.transaction_partitions for i in p.partition_ids)
        transit = TxnTransit(
            producer_id=last.producer_id, previous_producer_id=-1, producer_epoch=last.producer_epoch,
            last_producer_epoch=-1, txn_timeout_ms=last.transaction_timeout_ms, state=state,
            partitions=parts, txn_start_ms=last.transaction_start_timestamp_ms,
            txn_last_update_ms=int(time.time() * 1000))
        b = logcore.BatchBuilder()
        b.append(encode_value(transit), key=encode_key(txn), timestamp_ms=transit.txn_last_update_ms)
        log.append(b.build())


@pytest.mark.parametrize("state", ["Ongoing", "PrepareCommit", "PrepareAbort"])
def test_broker_killed_with_a_transaction_in_state(new_broker, state: str) -> None:
    broker = new_broker({"num.partitions": "2",
                         "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    broker.start()
    bs = broker.bootstrap
    topic, txn = f"crash-{uuid.uuid4().hex[:6]}", f"crash-{state}-{uuid.uuid4().hex[:6]}"
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "transactional.id": txn,
                                  "transaction.timeout.ms": 4000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, f"open-{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0  # the records are in both partitions' logs
    assert _describe(bs, txn) == (0, "Ongoing")

    broker.stop(sig=signal.SIGKILL)
    if state != "Ongoing":
        target = TxnState.PREPARE_COMMIT if state == "PrepareCommit" else TxnState.PREPARE_ABORT
        _log_prepare(str(broker.data_dir), txn, target)
    broker.start()

    committed = sorted(f"committed-{i}".encode() for i in range(4))
    opened = sorted(f"open-{i}".encode() for i in range(6))
    if state == "Ongoing":
        # Held at the open transaction's first offsets until its 4 s timeout aborts it.
        assert _read(bs, topic, "read_committed", settle=1.0) == committed
        _wait_state(bs, txn, "CompleteAbort")
    elif state == "PrepareCommit":
        _wait_state(bs, txn, "CompleteCommit")
    else:
        _wait_state(bs, txn, "CompleteAbort")
    expected = sorted(committed + opened) if state == "PrepareCommit" else committed
    assert _read(bs, topic, "read_committed") == expected
    assert _read(bs, topic, "read_uncommitted") == sorted(committed + opened)
    # The LSO has moved past the transaction: a later record is readable at once.
    later = confluent_kafka.Producer({"bootstrap.servers": bs})
    later.produce(topic, b"later", partition=0)
    assert later.flush(30) == 0
    assert b"later" in _read(bs, topic, "read_committed")

