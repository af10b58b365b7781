"""Transactions across a cluster: a real ZooKeeper, three ``pylog broker`` processes, the
transaction coordinator following the leadership of ``__transaction_state`` (replication
factor 3, min ISR 2) and writing markers to partitions led by other brokers.

- confluent-kafka and kafka-python transactional producers commit and abort transactions
  over a topic whose three partitions are led by three different brokers; read_committed
  consumers see exactly the committed records;
- the broker leading the transactional id's ``__transaction_state`` partition is killed with
  SIGKILL while a transaction is open: the producer carries on (retrying, or re-initialising
  after a fatal error, as the client requires) against the new coordinator, and every
  committed transaction is read exactly once, aborted ones never;
- a committed transaction whose marker cannot be written yet (the partition's leader is
  stopped with SIGSTOP) when its coordinator is killed: the new coordinator finds it in
  PrepareCommit when it loads the partition and completes it.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import confluent_kafka
import pytest
from _harness.txn_clients import TxnProducer, read_to_sentinel, send_plain
from _harness.waiting import wait_until as _wait
from _harness.zookeeper import zookeeper  # noqa: F401
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from pylog.cluster.zk_store import ZkStore
from pylog.log.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from pylog.txn.config import partition_for

pytestmark = pytest.mark.integration

SESSION_MS = 6000
TXN_PARTITIONS = 8
TOPIC = "txc"
#: Partition p of TOPIC is led by broker p (preferred leader first).
ASSIGNMENT = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]



def _cluster(zookeeper, new_broker, chroot: str):  # noqa: F811
    """Three brokers under their own ZooKeeper chroot (the server is shared by the module)."""
    connect = zookeeper.connect_string + chroot
    brokers = []
    for i in range(3):
        b = new_broker({
            "zookeeper.connect": connect, "broker.id": str(i), "node.id": str(i),
            "zookeeper.session.timeout.ms": str(SESSION_MS), "replica.lag.time.max.ms": "4000",
            "controlled.shutdown.enable": "false",
            "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
            "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
            "offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3",
        })
        brokers.append(b.start())
    store = ZkStore(connect, session_timeout_ms=SESSION_MS)
    store.start()
    _wait(lambda: store.get_broker_ids() == [0, 1, 2], 30, "3 registrations")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replica_assignment=ASSIGNMENT,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    _wait(lambda: all((s := store.get_partition_state(TOPIC, p)) and len(s[0].isr) == 3
                      and s[0].leader == p for p in range(3)), 30, "3 partitions led by 3 brokers")
    return brokers, store, bootstrap


def _coordinator(store: ZkStore, transactional_id: str) -> tuple[int, int]:
    """(leader, leader epoch) of the id's ``__transaction_state`` partition, once its ISR is full."""
    index = partition_for(transactional_id, TXN_PARTITIONS)

    def full():
        found = store.get_partition_state(TRANSACTION_STATE_TOPIC_NAME, index)
        return found if found and len(found[0].isr) == 3 else None
    state = _wait(full, 30, f"{TRANSACTION_STATE_TOPIC_NAME}-{index} with a full ISR")[0]
    return state.leader, state.leader_epoch


def _values(txn: int, prefix: str = "t") -> dict[int, list[bytes]]:
    return {p: [f"{prefix}{txn}-p{p}-{i}".encode() for i in range(3)] for p in range(3)}


def _read_all(bootstrap: str, patient: bool = False) -> dict[int, list[bytes]]:
    if patient:  # brokers are still coming back: a longer wait than send_plain's
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for part in range(3):
            p.produce(TOPIC, b"--sentinel--", partition=part)
        assert p.flush(120) == 0
    else:
        for part in range(3):
            send_plain(bootstrap, TOPIC, [b"--sentinel--"], partition=part)
    return {p: read_to_sentinel("confluent", bootstrap, TOPIC, "read_committed", partition=p,
                                timeout=90) for p in range(3)}


def test_commit_and_abort_over_three_leaders(zookeeper, new_broker):  # noqa: F811
    brokers, store, bootstrap = _cluster(zookeeper, new_broker, "/commit")
    try:
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "txc-ok",
                                      "linger.ms": 5})
        p.init_transactions(60)
        coordinator, _ = _coordinator(store, "txc-ok")
        assert coordinator in (0, 1, 2)
        expected: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        for n in range(6):
            p.begin_transaction()
            for part, vals in _values(n).items():
                for v in vals:
                    p.produce(TOPIC, v, partition=part)
            if n % 2 == 0:
                p.commit_transaction(60)
                for part, vals in _values(n).items():
                    expected[part] += vals
            else:
                p.abort_transaction(60)
        p.flush(10)

        # kafka-python's transactional producer: one committed, one aborted transaction.
        kp = TxnProducer("kafka-python", bootstrap, "txc-kafka-python")
        try:
            for n, commit in ((0, True), (1, False)):
                kp.begin()
                for part, vals in _values(n, "kp").items():
                    kp.send(TOPIC, vals, partition=part)
                kp.end(commit)
                if commit:
                    for part, vals in _values(n, "kp").items():
                        expected[part] += vals
        finally:
            kp.close()

        got = _read_all(bootstrap)
        for part in range(3):
            assert got[part] == expected[part], f"partition {part}"
    finally:
        store.close()


def _run_txn(state: dict, bootstrap: str, n: int, commit: bool, kill=None) -> str:
    return _run_txn_as(state, bootstrap, "txc-kill", n, commit, kill)


def _run_txn_as(state: dict, bootstrap: str, transactional_id: str, n: int, commit: bool,
                kill=None) -> str:
    """One transaction of the confluent producer in ``state['p']``; returns 'committed',
    'aborted' or 'doubt' (a fatal error after EndTxn may have been applied). ``kill`` runs
    while the transaction is open (its records sent)."""
    p = state["p"]
    p.begin_transaction()
    for part, vals in _values(n).items():
        for v in vals:
            p.produce(TOPIC, v, partition=part)
    p.flush(60)
    if kill is not None:
        kill()
    deadline = time.monotonic() + 120
    while True:
        try:
            (p.commit_transaction if commit else p.abort_transaction)(60)
            return "committed" if commit else "aborted"
        except KafkaException as exc:
            err = exc.args[0]
            if time.monotonic() > deadline:
                raise
            if err.retriable():
                continue
            if err.txn_requires_abort():
                _abort(p)
                return "aborted"
            # Fatal (e.g. fenced after its own epoch bump): a new producer with the same id.
            state["p"] = _new_producer(bootstrap, transactional_id)
            return "doubt" if commit else "aborted"


def _abort(p) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            p.abort_transaction(60)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


def _new_producer(bootstrap: str, transactional_id: str = "txc-kill"):
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                  "linger.ms": 5, "transaction.timeout.ms": 60000})
    deadline = time.monotonic() + 120
    while True:
        try:
            p.init_transactions(60)
            return p
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() > deadline:
                raise


def test_coordinator_killed_mid_transaction(zookeeper, new_broker):  # noqa: F811
    brokers, store, bootstrap = _cluster(zookeeper, new_broker, "/kill")
    try:
        state = {"p": _new_producer(bootstrap)}
        coordinator, epoch = _coordinator(store, "txc-kill")
        outcomes: dict[int, str] = {}
        for n in range(4):
            outcomes[n] = _run_txn(state, bootstrap, n, commit=n % 3 != 2)
        assert set(outcomes.values()) == {"committed", "aborted"}

        def kill() -> None:
            brokers[coordinator].stop(sig=signal.SIGKILL)
        outcomes[4] = _run_txn(state, bootstrap, 4, commit=True, kill=kill)
        for n in range(5, 10):
            outcomes[n] = _run_txn(state, bootstrap, n, commit=n % 3 != 2)
        state["p"].flush(10)

        new_leader, new_epoch = _wait(
            lambda: (s := store.get_partition_state(TRANSACTION_STATE_TOPIC_NAME,
                                                    partition_for("txc-kill", TXN_PARTITIONS)))
            and s[0].leader not in (-1, coordinator) and (s[0].leader, s[0].leader_epoch),
            30, "a new coordinator")
        assert new_epoch > epoch

        live = ",".join(b.bootstrap for i, b in enumerate(brokers) if i != coordinator)
        got = _read_all(live)
        counts = {part: Counter(vals) for part, vals in got.items()}
        for part in range(3):
            assert all(c == 1 for c in counts[part].values()), f"duplicates on partition {part}"
        for n, outcome in outcomes.items():
            present = [v in counts[part] for part, vals in _values(n).items() for v in vals]
            if outcome == "committed":
                assert all(present), f"committed transaction {n} not (fully) read: {present}"
            elif outcome == "aborted":
                assert not any(present), f"aborted transaction {n} read: {present}"
            else:
                assert all(present) or not any(present), f"transaction {n} read in part"
        everything = {v for n in outcomes for vals in _values(n).values() for v in vals}
        for part in range(3):
            assert set(counts[part]) <= everything
        assert sum(o == "committed" for o in outcomes.values()) >= 6
    finally:
        store.close()


def test_prepared_transaction_is_completed_by_the_new_coordinator(zookeeper, new_broker):  # noqa: F811
    brokers, store, bootstrap = _cluster(zookeeper, new_broker, "/prepared")
    try:
        p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "txc-prep",
                                      "linger.ms": 5, "transaction.timeout.ms": 120000})
        p.init_transactions(60)
        coordinator, _ = _coordinator(store, "txc-prep")
        stalled = next(b for b in range(3) if b != coordinator)  # leads partition `stalled`
        p.begin_transaction()
        for part, vals in _values(0).items():
            for v in vals:
                p.produce(TOPIC, v, partition=part)
        assert p.flush(60) == 0
        pid = brokers[stalled].proc.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            # Answered once PrepareCommit is in the ISR (after the stalled broker drops out of
            # it); the marker for partition `stalled` hangs on its stopped leader.
            p.commit_transaction(90)
            brokers[coordinator].stop(sig=signal.SIGKILL)
        finally:
            os.kill(pid, signal.SIGCONT)
        # The new coordinator loaded the partition and resumed the prepared transaction.
        survivors = [b for i, b in enumerate(brokers) if i != coordinator]
        _wait(lambda: any("(1 transactions to complete)" in b.read_log() for b in survivors), 90,
              "a new coordinator resuming the prepared transaction")
        # The producer carries on with the new coordinator.
        state = {"p": p}
        outcome = _run_txn_as(state, bootstrap, "txc-prep", 1, commit=True)
        live = ",".join(b.bootstrap for b in survivors)
        got = _read_all(live, patient=True)
        for part, vals in _values(0).items():
            assert got[part][:3] == vals, f"partition {part}: {got[part]}"
        if outcome == "committed":
            for part, vals in _values(1).items():
                assert got[part][3:] == vals
        for part in range(3):
            assert len(got[part]) == len(set(got[part]))
    finally:
        store.close()
