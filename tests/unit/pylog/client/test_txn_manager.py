"""The transactional producer's requests (``_txn_manager``) against a stub coordinator that
answers canned responses (no network): what is sent, in which order, with which fields, and
how each error code is handled (retried, coordinator looked up again, fatal, abortable),
timeouts that leave the work going on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from pylog import errors
from pylog.client import (
    AbortableTransactionError,
    CommitFailedError,
    ConsumerGroupMetadata,
    FatalTransactionError,
    IllegalStateError,
    RetriableTransactionError,
    TopicPartition,
)
from pylog.client.aio._accumulator import RecordAccumulator
from pylog.client.aio._cluster import Cluster
from pylog.client.aio._sender import Sender
from pylog.client.aio._txn_manager import TransactionManager
from pylog.client.aio._txn_state import TxnState
from pylog.client.aio.producer import producer_settings
from pylog.client.errors import KafkaConnectionError
from pylog.protocol.messages import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

FENCED, CONCURRENT, LOADING, NOT_COORD = 90, 51, 14, 16


class StubConnection:
    """Answers each request with the next canned response for its type (a callable gets
    the request; an awaitable is awaited)."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.sent: list[Any] = []
        self.closed = False

    def version_for(self, cls: Any, max_version: int | None = None) -> int:
        top = int(cls.VALID_VERSIONS[1])
        return top if max_version is None else min(top, max_version)

    async def send(self, body: Any, version: int | None = None, *,
                   timeout: float | None = None) -> Any:
        self.sent.append(body)
        r = self.script[type(body).__name__].pop(0)
        r = r(body) if callable(r) else r
        if asyncio.iscoroutine(r):
            r = await r
        return r

    def names(self) -> list[str]:
        return [type(b).__name__.removesuffix("Request") for b in self.sent]

    async def close(self) -> None:
        self.closed = True


class StubCluster(Cluster):
    def __init__(self, conn: StubConnection) -> None:
        super().__init__([("127.0.0.1", 1)], client_id="p", request_timeout=1,
                         connect_timeout=1, metadata_max_age=300)
        self.conn = conn
        self.brokers = {0: ("127.0.0.1", 1)}
        self.own: list[int] = []

    async def any_connection(self) -> Any:
        return self.conn

    async def connection(self, node_id: int) -> Any:
        assert node_id in self.brokers
        return self.conn

    async def coordinator_connection(self, node_id: int, host: str, port: int) -> Any:
        self.own.append(node_id)  # a coordinator not in the metadata: a connection of its own
        return self.conn


def found(node: int = 0) -> Any:
    R = FindCoordinatorResponse
    return R(coordinators=[R.Coordinator(key="k", node_id=node, host="127.0.0.1", port=1)])


def pid(code: int = 0, producer_id: int = 7, epoch: int = 0) -> Any:
    return InitProducerIdResponse(error_code=code, producer_id=producer_id, producer_epoch=epoch)


def added(tps: list[tuple[str, int]], code: int = 0) -> Callable[[Any], Any]:
    R = AddPartitionsToTxnResponse

    def answer(req: Any) -> Any:
        asked = {(t.name, p) for t in req.v3_and_below_topics for p in t.partitions}
        assert asked == set(tps), asked
        by: dict[str, list[Any]] = {}
        for t, p in sorted(tps):
            by.setdefault(t, []).append(R.AddPartitionsToTxnPartitionResult(
                partition_index=p, partition_error_code=code))
        return R(results_by_topic_v3_and_below=[
            R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps)
            for t, ps in by.items()])
    return answer


def offsets_answer(codes: dict[tuple[str, int], int]) -> Callable[[Any], Any]:
    R = TxnOffsetCommitResponse

    def answer(req: Any) -> Any:
        return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                               error_code=codes.get((t.name, p.partition_index), 0))
            for p in t.partitions]) for t in req.topics])
    return answer


def make(script: dict[str, list[Any]], **settings: Any) -> tuple[TransactionManager, StubConnection]:
    s = producer_settings({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "tx-1",
                           "retry.backoff.ms": 1, "retry.backoff.max.ms": 5, **settings}, {})
    conn = StubConnection(script)
    cluster = StubCluster(conn)
    acc = RecordAccumulator(s["batch.size"], s["buffer.memory"], lambda: None)
    sender = Sender(cluster, acc, s, True)
    mgr = sender.txn = TransactionManager(cluster, s, sender)
    return mgr, conn


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_init_retries_concurrent_transactions_and_loading_then_sets_the_producer_id() -> None:
    async def go() -> None:
        mgr, conn = make({"FindCoordinatorRequest": [found()],
                          "InitProducerIdRequest": [pid(CONCURRENT), pid(LOADING), pid(0, 7, 3)]},
                         **{"transaction.timeout.ms": 30000})
        await mgr.init_transactions(5)
        assert conn.names() == ["FindCoordinator", "InitProducerId", "InitProducerId",
                                "InitProducerId"]
        find = conn.sent[0]
        assert find.key_type == 1 and find.coordinator_keys == ["tx-1"]
        init = conn.sent[1]
        assert (init.transactional_id, init.transaction_timeout_ms) == ("tx-1", 30000)
        assert (mgr.sender.producer_id, mgr.sender.producer_epoch) == (7, 3)
        assert mgr.state.state is TxnState.READY
    run(go())


def test_not_coordinator_looks_the_coordinator_up_again() -> None:
    async def go() -> None:
        mgr, conn = make({"FindCoordinatorRequest": [found(), found()],
                          "InitProducerIdRequest": [pid(NOT_COORD), pid()]})
        await mgr.init_transactions(5)
        assert conn.names() == ["FindCoordinator", "InitProducerId", "FindCoordinator",
                                "InitProducerId"]
    run(go())


def test_fenced_init_is_fatal_and_final() -> None:
    async def go() -> None:
        mgr, conn = make({"FindCoordinatorRequest": [found()],
                          "InitProducerIdRequest": [pid(errors.TransactionalIdAuthorizationFailedError.code)]})
        with pytest.raises(FatalTransactionError) as info:
            await mgr.init_transactions(5)
        assert isinstance(info.value.error, errors.TransactionalIdAuthorizationFailedError)
        with pytest.raises(FatalTransactionError):
            mgr.begin_transaction()
    run(go())


async def initialized(script: dict[str, list[Any]]) -> tuple[TransactionManager, StubConnection]:
    script.setdefault("FindCoordinatorRequest", []).insert(0, found())
    script.setdefault("InitProducerIdRequest", []).insert(0, pid(0, 7, 0))
    mgr, conn = make(script)
    await mgr.init_transactions(5)
    conn.sent.clear()
    return mgr, conn


def test_partitions_are_added_in_one_request_before_their_records_go_then_commit() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "AddPartitionsToTxnRequest": [added([("a", 0), ("a", 1), ("b", 0)])],
            "EndTxnRequest": [EndTxnResponse(error_code=CONCURRENT), EndTxnResponse()]})
        mgr.begin_transaction()
        for tp in [("a", 0), ("a", 1), ("b", 0), ("a", 0)]:
            mgr.state.check_send(tp)
        assert not mgr.state.may_send(("a", 0))
        mgr.add_partitions()
        await mgr._adding  # type: ignore[misc]
        assert all(mgr.state.may_send(tp) for tp in [("a", 0), ("a", 1), ("b", 0)])
        req = conn.sent[0]
        assert (req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch) == ("tx-1", 7, 0)
        await mgr.commit_transaction(5)
        assert conn.names() == ["AddPartitionsToTxn", "EndTxn", "EndTxn"]
        assert conn.sent[-1].committed is True and conn.sent[-1].producer_id == 7
        assert mgr.state.state is TxnState.READY
    run(go())


def test_a_transaction_that_added_nothing_ends_without_end_txn() -> None:
    async def go() -> None:
        mgr, conn = await initialized({})
        mgr.begin_transaction()
        await mgr.commit_transaction(5)
        mgr.begin_transaction()
        await mgr.abort_transaction(5)
        assert conn.sent == []
    run(go())


def test_unauthorized_partition_makes_the_transaction_abortable() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "AddPartitionsToTxnRequest": [added([("secret", 0)], code=29)]})
        mgr.begin_transaction()
        mgr.state.check_send(("secret", 0))
        mgr.add_partitions()
        await mgr._adding  # type: ignore[misc]
        with pytest.raises(AbortableTransactionError) as info:
            await mgr.commit_transaction(5)
        assert info.value.txn_requires_abort()
        assert isinstance(info.value.error, errors.TopicAuthorizationFailedError)
        await mgr.abort_transaction(5)  # nothing was added: no EndTxn
        assert conn.names() == ["AddPartitionsToTxn"]
        mgr.begin_transaction()
    run(go())


def test_fenced_end_txn_is_fatal() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "AddPartitionsToTxnRequest": [added([("a", 0)])],
            "EndTxnRequest": [EndTxnResponse(error_code=FENCED)]})
        mgr.begin_transaction()
        mgr.state.check_send(("a", 0))
        mgr.add_partitions()
        await mgr._adding  # type: ignore[misc]
        with pytest.raises(FatalTransactionError) as info:
            await mgr.commit_transaction(5)
        assert isinstance(info.value.error, errors.ProducerFencedError)
        with pytest.raises(FatalTransactionError):
            await mgr.abort_transaction(5)
        with pytest.raises(FatalTransactionError):
            mgr.state.check_send(("a", 0))
    run(go())


def test_send_offsets_adds_the_group_then_commits_to_the_group_coordinator() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "FindCoordinatorRequest": [found(3)],
            "AddOffsetsToTxnRequest": [AddOffsetsToTxnResponse(error_code=CONCURRENT),
                                       AddOffsetsToTxnResponse()],
            "TxnOffsetCommitRequest": [offsets_answer({("in", 1): LOADING}), offsets_answer({})],
            "EndTxnRequest": [EndTxnResponse()]})
        mgr.begin_transaction()
        meta = ConsumerGroupMetadata("g", 5, "member-1", "static-1")
        await mgr.send_offsets_to_transaction({TopicPartition("in", 0): 10, ("in", 1): 20},
                                              meta, 5)
        assert conn.names() == ["AddOffsetsToTxn", "AddOffsetsToTxn", "FindCoordinator",
                                "TxnOffsetCommit", "TxnOffsetCommit"]
        add = conn.sent[1]
        assert (add.transactional_id, add.producer_id, add.group_id) == ("tx-1", 7, "g")
        assert (conn.sent[2].key_type, conn.sent[2].coordinator_keys) == (0, ["g"])
        assert mgr.cluster.own == [3]  # type: ignore[attr-defined]
        first, again = conn.sent[3], conn.sent[4]
        assert (first.generation_id, first.member_id, first.group_instance_id) == (
            5, "member-1", "static-1")
        assert [(p.partition_index, p.committed_offset) for p in first.topics[0].partitions] == [
            (0, 10), (1, 20)]
        assert [(p.partition_index, p.committed_offset) for p in again.topics[0].partitions] == [
            (1, 20)]  # only what failed is sent again
        await mgr.commit_transaction(5)  # the offsets partition makes the EndTxn needed
        assert conn.names()[-1] == "EndTxn"
    run(go())


def test_offsets_of_a_stale_generation_make_the_transaction_abortable() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "FindCoordinatorRequest": [found()],
            "AddOffsetsToTxnRequest": [AddOffsetsToTxnResponse()],
            "TxnOffsetCommitRequest": [offsets_answer({("in", 0): 22})],
            "EndTxnRequest": [EndTxnResponse()]})
        mgr.begin_transaction()
        with pytest.raises(AbortableTransactionError) as info:
            await mgr.send_offsets_to_transaction({("in", 0): 1}, ConsumerGroupMetadata("g", 1, "m"), 5)
        assert isinstance(info.value.error, CommitFailedError)
        await mgr.abort_transaction(5)
        assert conn.sent[-1].committed is False  # the group's partition was added: EndTxn
    run(go())


def test_send_offsets_needs_a_transaction_and_group_metadata() -> None:
    async def go() -> None:
        mgr, conn = await initialized({})
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await mgr.send_offsets_to_transaction({("in", 0): 1}, "g", 5)
        mgr.begin_transaction()
        with pytest.raises(TypeError, match="consumer_group_metadata"):
            await mgr.send_offsets_to_transaction({("in", 0): 1}, 42, 5)
        await mgr.send_offsets_to_transaction({}, "g", 5)  # nothing to send
        assert conn.sent == []
    run(go())


def test_a_timed_out_call_goes_on_and_the_same_call_waits_for_it() -> None:
    async def go() -> None:
        gate = asyncio.Event()

        async def slow() -> Any:
            await gate.wait()
            return pid(0, 9, 1)

        mgr, conn = make({"FindCoordinatorRequest": [found()],
                          "InitProducerIdRequest": [lambda req: slow()]})
        with pytest.raises(RetriableTransactionError) as info:
            await mgr.init_transactions(0.05)
        assert info.value.retriable and isinstance(info.value, TimeoutError)
        with pytest.raises(IllegalStateError, match="init_transactions"):
            mgr.begin_transaction()
        with pytest.raises(IllegalStateError, match="still in progress"):
            await mgr.commit_transaction(1)
        gate.set()
        await mgr.init_transactions(5)
        assert conn.names() == ["FindCoordinator", "InitProducerId"]  # not sent twice
        assert mgr.sender.producer_epoch == 1
        mgr.begin_transaction()
    run(go())


def test_abort_after_a_sequenced_batch_failed_bumps_the_epoch() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "AddPartitionsToTxnRequest": [added([("a", 0)])],
            "EndTxnRequest": [EndTxnResponse()],
            "InitProducerIdRequest": [pid(CONCURRENT), pid(0, 7, 1)]})
        mgr.begin_transaction()
        mgr.state.check_send(("a", 0))
        mgr.add_partitions()
        await mgr._adding  # type: ignore[misc]
        mgr.state.batch_failed(errors.NotEnoughReplicasError(), "a", 0, sequenced=True)
        assert mgr.state.state is TxnState.ABORTABLE_ERROR
        await mgr.abort_transaction(5)
        assert conn.names() == ["AddPartitionsToTxn", "EndTxn", "InitProducerId",
                                "InitProducerId"]
        bump = conn.sent[-1]
        assert (bump.producer_id, bump.producer_epoch) == (7, 0)  # KIP-360: this id's epoch
        assert (mgr.sender.producer_id, mgr.sender.producer_epoch) == (7, 1)
        assert mgr.state.state is TxnState.READY and not mgr.state.need_epoch_bump
    run(go())


def test_abort_after_an_add_whose_answer_was_lost_ends_the_transaction_anyway() -> None:
    async def go() -> None:
        def lost(req: Any) -> Any:
            raise KafkaConnectionError("connection lost with the request in flight")

        s = {"retry.backoff.ms": 200, "retry.backoff.max.ms": 200}
        mgr, conn = make({"FindCoordinatorRequest": [found(), found()],  # again after the loss
                          "InitProducerIdRequest": [pid()],
                          "AddPartitionsToTxnRequest": [lost],
                          "EndTxnRequest": [EndTxnResponse(error_code=48)]}, **s)
        await mgr.init_transactions(5)
        mgr.begin_transaction()
        mgr.state.check_send(("a", 0))
        mgr.add_partitions()
        await asyncio.sleep(0.05)  # the add failed and waits to be retried
        assert mgr.state.maybe_started and not mgr.state.started
        await mgr.abort_transaction(5)
        # The coordinator may have added the partition: EndTxn(ABORT) is sent, and its
        # INVALID_TXN_STATE (it had not) means there was nothing to abort.
        assert conn.names() == ["FindCoordinator", "InitProducerId", "AddPartitionsToTxn",
                                "FindCoordinator", "EndTxn"]
        assert conn.sent[-1].committed is False
        assert mgr.state.state is TxnState.READY
    run(go())


def test_the_sender_adds_the_partitions_of_a_flush_in_one_request() -> None:
    async def go() -> None:
        mgr, conn = await initialized({
            "AddPartitionsToTxnRequest": [added([("a", 0), ("a", 1), ("b", 0)])]})
        sender, acc = mgr.sender, mgr.sender.acc
        sender.linger = 60.0  # nothing is due by time
        mgr.begin_transaction()
        for t, p in [("a", 0), ("a", 1), ("b", 0)]:
            assert mgr.state.check_send((t, p))
            acc.append(t, p, b"v", None, 0, None, 30, None)
        now = time.monotonic()
        ready, _ = sender._drain(now)
        assert ready == {} and mgr._adding is None  # not ready: no request yet
        sender.flush_mark = acc.next_batch_id  # a flush (or commit) wants them now
        ready, _ = sender._drain(now)
        assert ready == {}  # not in the transaction yet: nothing is drained
        assert mgr._adding is not None
        await mgr._adding
        assert conn.names() == ["AddPartitionsToTxn"]  # one request for all three
        assert all(mgr.state.may_send(tp) for tp in [("a", 0), ("a", 1), ("b", 0)])
    run(go())


def test_the_first_add_of_a_transaction_retries_concurrent_transactions_quickly() -> None:
    async def go() -> None:
        answers = [added([("a", 0)], code=CONCURRENT)] * 3 + [added([("a", 0)])]
        mgr, conn = await initialized({"AddPartitionsToTxnRequest": answers})
        mgr.sender.backoff = mgr.backoff = 5.0  # retry.backoff.ms would be far longer
        mgr.begin_transaction()
        mgr.state.check_send(("a", 0))
        started = time.monotonic()
        mgr.add_partitions()
        await mgr._adding  # type: ignore[misc]
        assert time.monotonic() - started < 2.0  # three 20 ms pauses, not 5 s ones
        assert conn.names() == ["AddPartitionsToTxn"] * 4 and mgr.state.may_send(("a", 0))
    run(go())
