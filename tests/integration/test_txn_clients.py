"""Transactions with the real clients: confluent-kafka, kafka-python and aiokafka as
transactional producers, each read back by read_committed consumers of all three.

What Kafka guarantees (KIP-98): a read_committed consumer sees the records of committed
transactions only, in offset order, never one of an aborted transaction, and nothing past
the last stable offset (the first offset of a transaction still open); read_uncommitted
sees everything.
"""

from __future__ import annotations

import time
import uuid

import pytest
from _harness.txn_clients import (
    CLIENTS,
    SENTINEL,
    TxnProducer,
    read_to_sentinel,
    send_plain,
)

pytestmark = pytest.mark.integration


def _values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


@pytest.mark.parametrize("producer_client", CLIENTS)
def test_commit_and_abort_seen_by_every_reader(broker, topic_name, producer_client):
    p = TxnProducer(producer_client, broker.bootstrap, f"txn-{uuid.uuid4().hex[:8]}")
    try:
        p.transaction(topic_name, _values("c1", 10), commit=True)
        p.transaction(topic_name, _values("ab", 10), commit=False)
        p.transaction(topic_name, _values("c2", 10), commit=True)
    finally:
        p.close()
    send_plain(broker.bootstrap, topic_name, [SENTINEL])
    committed = _values("c1", 10) + _values("c2", 10)
    everything = _values("c1", 10) + _values("ab", 10) + _values("c2", 10)
    for reader in CLIENTS:
        assert read_to_sentinel(reader, broker.bootstrap, topic_name, "read_committed") \
            == committed, f"{producer_client} -> {reader} read_committed"
        assert read_to_sentinel(reader, broker.bootstrap, topic_name, "read_uncommitted") \
            == everything, f"{producer_client} -> {reader} read_uncommitted"


def test_interleaved_transactions_on_one_partition(broker, topic_name):
    """Three producers (one per client) with transactions open at once on one partition;
    one aborts. Readers see the committed ones' records in offset order, as written."""
    producers = {c: TxnProducer(c, broker.bootstrap, f"il-{c}-{uuid.uuid4().hex[:6]}")
                 for c in CLIENTS}
    try:
        for p in producers.values():
            p.begin()
        for step in range(3):
            for c, p in producers.items():
                p.send(topic_name, _values(f"{c}-{step}", 4))
        producers["kafka-python"].end(commit=False)
        producers["confluent"].send(topic_name, _values("confluent-late", 3))
        producers["aiokafka"].end(commit=True)
        producers["confluent"].end(commit=True)
    finally:
        for p in producers.values():
            p.close()
    send_plain(broker.bootstrap, topic_name, [SENTINEL])
    everything = read_to_sentinel("confluent", broker.bootstrap, topic_name, "read_uncommitted")
    assert len(everything) == 3 * 3 * 4 + 3
    expected = [v for v in everything if not v.startswith(b"kafka-python-")]
    assert len(expected) == 2 * 3 * 4 + 3
    for reader in CLIENTS:
        assert read_to_sentinel(reader, broker.bootstrap, topic_name, "read_committed") \
            == expected, reader


def _poll_for(consumer, seconds: float) -> list[bytes]:
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m = consumer.poll(0.2)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


def test_open_transaction_holds_read_committed_at_the_lso(broker, topic_name):
    """Records after an open transaction's first offset wait for its end, even records
    of other producers; read_uncommitted sees them at once; ListOffsets LATEST answers the
    LSO for read_committed and the high watermark otherwise."""
    import confluent_kafka
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    send_plain(broker.bootstrap, topic_name, [b"before"])
    p = TxnProducer("confluent", broker.bootstrap, f"open-{uuid.uuid4().hex[:8]}")
    consumers = {}
    try:
        p.begin()
        p.send(topic_name, [b"open-1", b"open-2"])
        send_plain(broker.bootstrap, topic_name, [b"after"])
        for iso in ("read_committed", "read_uncommitted"):
            c = confluent_kafka.Consumer({
                "bootstrap.servers": broker.bootstrap, "group.id": f"lso-{iso}",
                "enable.auto.commit": False, "isolation.level": iso})
            c.assign([confluent_kafka.TopicPartition(topic_name, 0,
                                                     confluent_kafka.OFFSET_BEGINNING)])
            consumers[iso] = c
        assert _poll_for(consumers["read_uncommitted"], 3) == [b"before", b"open-1", b"open-2",
                                                               b"after"]
        assert _poll_for(consumers["read_committed"], 2) == [b"before"]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        tp = confluent_kafka.TopicPartition(topic_name, 0)

        def latest(level):
            fut = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level)[tp]
            return fut.result(30).offset

        assert latest(IsolationLevel.READ_COMMITTED) == 1  # the open transaction's first offset
        assert latest(IsolationLevel.READ_UNCOMMITTED) == 4

        p.end(commit=True)
        assert _poll_for(consumers["read_committed"], 3) == [b"open-1", b"open-2", b"after"]
        assert latest(IsolationLevel.READ_COMMITTED) == 5  # the marker is offset 4
    finally:
        for c in consumers.values():
            c.close()
        p.close()


@pytest.mark.parametrize("zombie_client", CLIENTS)
def test_a_second_producer_fences_the_first_and_aborts_its_transaction(broker, topic_name,
                                                                       zombie_client):
    """A new producer with the same transactional id fences the old one (Kafka's zombie
    fencing): the old one's open transaction is aborted, its commit fails with a fenced
    error, and read_committed readers never see its records."""
    txn = f"fence-{uuid.uuid4().hex[:8]}"
    zombie = TxnProducer(zombie_client, broker.bootstrap, txn)
    successor = None
    try:
        zombie.begin()
        zombie.send(topic_name, [b"zombie-1", b"zombie-2"])  # in the log, transaction open
        successor = TxnProducer("confluent", broker.bootstrap, txn)  # fences, aborts the open one
        successor.transaction(topic_name, [b"successor-1"], commit=True)
        with pytest.raises(Exception) as info:
            zombie.end(commit=True)
        what = f"{type(info.value).__name__} {info.value}".lower()
        assert "fenced" in what or "epoch" in what, what
    finally:
        try:
            zombie.close()
        except Exception:  # noqa: BLE001 - a fenced producer may refuse to close cleanly
            pass
        if successor is not None:
            successor.close()
    send_plain(broker.bootstrap, topic_name, [SENTINEL])
    for reader in CLIENTS:
        assert read_to_sentinel(reader, broker.bootstrap, topic_name, "read_committed") \
            == [b"successor-1"], reader
    assert read_to_sentinel("confluent", broker.bootstrap, topic_name, "read_uncommitted") \
        == [b"zombie-1", b"zombie-2", b"successor-1"]
