"""Transactional offset commits against a real broker (issue 10, the group coordinator's side):
raw TxnOffsetCommit requests, OffsetFetch with RequireStable, the transaction ending with
EndTxn, a broker restart with a transaction open, and confluent-kafka's
``send_offsets_to_transaction``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from _harness.wire import BrokerConnection

from pylog import errors
from pylog.protocol.messages import (
    AddOffsetsToTxnRequest,
    CreateTopicsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from tests.integration.conftest import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka

pytestmark = pytest.mark.integration

OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
}
DEADLINE = 30.0
UNSTABLE = errors.UnstableOffsetCommitError.code
LOADING = errors.CoordinatorLoadInProgressError.code
RETRIABLE = {errors.CoordinatorNotAvailableError.code, errors.CoordinatorLoadInProgressError.code,
             errors.NotCoordinatorError.code, errors.ConcurrentTransactionsError.code}


def _conn(b: BrokerProcess) -> BrokerConnection:
    return BrokerConnection(b.host, b.port, timeout=20)


def _wait(cond: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def _setup(c: BrokerConnection, topic: str) -> None:
    R = CreateTopicsRequest
    r = c.request(R(timeout_ms=10_000, topics=[R.CreatableTopic(name=topic, num_partitions=2,
                                                                 replication_factor=1)]))
    assert r.topics[0].error_code == 0
    _wait(lambda: c.request(FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0,
          "the group coordinator")


def _txn_commit(c: BrokerConnection, group: str, topic: str, offsets: dict[int, int], pid: int, epoch: int,
                version: int | None = None, generation: int = -1, member: str = "") -> dict[int, int]:
    R = TxnOffsetCommitRequest
    req = R(transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=generation, member_id=member, topics=[R.TxnOffsetCommitRequestTopic(
                name=topic, partitions=[R.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="m")
                    for p, o in offsets.items()])])
    for _ in range(100):
        r = c.request(req, version)
        codes = {p.partition_index: p.error_code for t in r.topics for p in t.partitions}
        if not set(codes.values()) & {errors.CoordinatorLoadInProgressError.code}:
            return codes
        time.sleep(0.05)
    return codes


def _fetch(c: BrokerConnection, group: str, topic: str, stable: bool, version: int | None = None) -> dict | None:
    """The group's offsets of partitions 0 and 1; None while its coordinator is still
    loading (COORDINATOR_LOAD_IN_PROGRESS, e.g. right after a restart: ``_wait`` asks again)."""
    R = OffsetFetchRequest
    v = version if version is not None else c.version_for(R())
    if v >= 8:
        r = c.request(R(require_stable=stable, groups=[R.OffsetFetchRequestGroup(group_id=group, topics=[
            R.OffsetFetchRequestTopics(name=topic, partition_indexes=[0, 1])])]), v)
        (g,) = r.groups
        if g.error_code == LOADING:
            return None
        assert g.error_code == 0
        return {p.partition_index: (p.committed_offset, p.error_code) for t in g.topics for p in t.partitions}
    r = c.request(R(group_id=group, require_stable=stable, topics=[
        R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])]), v)
    if r.error_code == LOADING:
        return None
    assert r.error_code == 0
    return {p.partition_index: (p.committed_offset, p.error_code) for t in r.topics for p in t.partitions}


def _begin(c: BrokerConnection, group: str, add: bool = True) -> tuple[int, int]:
    """InitProducerId for transactional id "tx" and (``add``) AddOffsetsToTxn for ``group``."""
    _wait(lambda: c.request(FindCoordinatorRequest(key="tx", key_type=1), 3).error_code == 0,
          "the transaction coordinator")

    def init() -> tuple[int, int] | None:
        r = c.request(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000,
                                            producer_id=-1, producer_epoch=-1))
        if r.error_code in RETRIABLE:
            return None
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch
    pid, epoch = _wait(init, "InitProducerId")

    def add_offsets() -> bool:
        r = c.request(AddOffsetsToTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                             group_id=group))
        if r.error_code in RETRIABLE:
            return False
        assert r.error_code == 0, r
        return True
    if add:
        _wait(add_offsets, "AddOffsetsToTxn")
    return pid, epoch


def _end(c: BrokerConnection, pid: int, epoch: int, commit: bool) -> None:
    def end() -> bool:
        r = c.request(EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=commit))
        if r.error_code in RETRIABLE:
            return False
        assert r.error_code == 0, r
        return True
    _wait(end, "EndTxn")


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("txnoffsets") / "data"
    data.mkdir()
    b = BrokerProcess(data, OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


# --------------------------------------------------------------------------- any broker with API 28


def test_txn_offset_commit_is_advertised_and_checks_the_group(tbroker: BrokerProcess, topic_name: str) -> None:
    with _conn(tbroker) as c:
        assert c.versions[28] == (0, 4)
        _setup(c, topic_name)
        # With a transaction coordinator the broker verifies the transaction first (KIP-890):
        # then the producer must have added the group's partition to its transaction.
        pid, epoch = _begin(c, "nobody") if 25 in c.versions else (1, 0)
        # A generation for a group the coordinator does not know: ILLEGAL_GENERATION.
        assert _txn_commit(c, "nobody", topic_name, {0: 1}, pid, epoch, generation=3, member="m") == {
            0: errors.IllegalGenerationError.code}
        assert _txn_commit(c, "", topic_name, {0: 1}, pid, epoch) == {0: errors.InvalidGroupIdError.code}
        if 25 in c.versions:
            _end(c, pid, epoch, commit=False)
        R = TxnOffsetCommitRequest
        r = c.request(R(transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, topics=[
            R.TxnOffsetCommitRequestTopic(name="no-such-topic", partitions=[
                R.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata="")])]))
        assert r.topics[0].partitions[0].error_code == errors.UnknownTopicOrPartitionError.code


# --------------------------------------------------------------------------- needs the transaction coordinator


@pytest.mark.parametrize("commit", [True, False])
def test_offsets_are_pending_until_the_transaction_ends(tbroker: BrokerProcess, topic_name: str,
                                                        commit: bool) -> None:
    group = f"g-{topic_name}"
    with _conn(tbroker) as c:
        _setup(c, topic_name)
        R = OffsetCommitRequest
        r = c.request(R(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            R.OffsetCommitRequestTopic(name=topic_name, partitions=[
                R.OffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_metadata="")])]))
        assert r.topics[0].partitions[0].error_code == 0
        pid, epoch = _begin(c, group, add=False)
        # Not added to the transaction (no AddOffsetsToTxn): the verification refuses it,
        # with the error each version's clients know.
        assert _txn_commit(c, group, topic_name, {0: 10}, pid, epoch, version=4) == {
            0: errors.TransactionAbortableError.code}
        assert _txn_commit(c, group, topic_name, {0: 10}, pid, epoch, version=3) == {
            0: errors.InvalidTxnStateError.code}
        pid, epoch = _begin(c, group)
        assert _txn_commit(c, group, topic_name, {0: 10, 1: 11}, pid, epoch) == {0: 0, 1: 0}
        # Not visible; RequireStable (v7+) answers UNSTABLE_OFFSET_COMMIT per partition.
        assert _fetch(c, group, topic_name, stable=False) == {0: (3, 0), 1: (-1, 0)}
        assert _fetch(c, group, topic_name, stable=True) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert _fetch(c, group, topic_name, stable=True, version=7) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        _end(c, pid, epoch, commit)
        expected = {0: (10, 0), 1: (11, 0)} if commit else {0: (3, 0), 1: (-1, 0)}
        # The markers are written after EndTxn is answered.
        _wait(lambda: _fetch(c, group, topic_name, stable=True) == expected, "the transaction's end")


def test_an_open_transaction_survives_a_restart(new_broker: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = new_broker(OVERRIDES).start()
    group = "g-restart"
    with _conn(b) as c:
        _setup(c, topic_name)
        pid, epoch = _begin(c, group)
        assert _txn_commit(c, group, topic_name, {1: 42}, pid, epoch) == {1: 0}
    assert b.stop() == 0
    b.start()
    with _conn(b) as c:
        _wait(lambda: _fetch(c, group, topic_name, stable=True) == {0: (-1, 0), 1: (-1, UNSTABLE)},
              "the reloaded pending offset")
        _end(c, pid, epoch, commit=True)
        _wait(lambda: _fetch(c, group, topic_name, stable=True) == {0: (-1, 0), 1: (42, 0)}, "the commit")
    assert b.stop() == 0


@pytest.mark.parametrize("commit", [True, False])
def test_confluent_send_offsets_to_transaction(tbroker: BrokerProcess, topic_name: str, commit: bool) -> None:
    with _conn(tbroker) as c:
        _setup(c, topic_name)
    group = f"cg-{topic_name}"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": tbroker.bootstrap, "group.id": group,
                                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = confluent_kafka.Producer({"bootstrap.servers": tbroker.bootstrap,
                                         "transactional.id": f"tx-{topic_name}"})
    try:
        producer.init_transactions(DEADLINE)
        producer.begin_transaction()
        producer.produce(topic_name, b"v", partition=0)
        offsets = [confluent_kafka.TopicPartition(topic_name, 0, 7), confluent_kafka.TopicPartition(topic_name, 1, 9)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), DEADLINE)
        if commit:
            producer.commit_transaction(DEADLINE)
        else:
            producer.abort_transaction(DEADLINE)
        want = [7, 9] if commit else [confluent_kafka.OFFSET_INVALID] * 2
        parts = [confluent_kafka.TopicPartition(topic_name, p) for p in (0, 1)]
        _wait(lambda: [tp.offset for tp in consumer.committed(parts, timeout=10)] == want,
              "the committed offsets")
    finally:
        consumer.close()
