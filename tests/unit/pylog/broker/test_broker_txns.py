"""The transaction handlers and their glue (``pylog.txn.service``) in-process: FindCoordinator
creates ``__transaction_state``; state changes go through Produce's append path; markers go to
``write_markers`` (replaced here by a recording stand-in with the contract's signature, so that
these tests do not depend on the partition side); a new broker on the same directory replays
the log and completes prepared transactions."""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.log.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from pylog.protocol.apis import ApiKey
from pylog.protocol.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
)
from pylog.replication import markers as replication_markers
from pylog.txn.records import decode_key, decode_value

T0 = 1_700_000_000_000


class TxnMarker(NamedTuple):
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: list[tuple[str, int]]


class FakeMarkers:
    """``write_markers(broker, markers)`` with scripted error codes per partition."""

    def __init__(self) -> None:
        self.calls: list[TxnMarker] = []
        self.codes: list[dict[tuple[str, int], int]] = []  # one dict per call, then all 0
        self.block = False

    async def write_markers(self, broker: Any, markers: list[TxnMarker]) -> list[tuple[int, str, int, int]]:
        if self.block:
            await asyncio.Event().wait()
        self.calls.extend(markers)
        codes = self.codes.pop(0) if self.codes else {}
        return [(m.producer_id, t, p, codes.get((t, p), 0)) for m in markers for t, p in m.partitions]


@pytest.fixture
def markers(monkeypatch: pytest.MonkeyPatch) -> FakeMarkers:
    fake = FakeMarkers()
    monkeypatch.setattr(replication_markers, "write_markers", fake.write_markers)
    # Scripted markers go through the delivery task (the inline path defers to it).
    monkeypatch.setattr(replication_markers, "write_markers_inline", lambda broker, markers: None)
    return fake


def _config(tmp_path: Any, **extra: str) -> BrokerConfig:
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "2",
                         "transaction.state.log.num.partitions": "3", **extra})


async def _start(tmp_path: Any, **extra: str) -> Broker:
    b = Broker(_config(tmp_path, **extra), clock=ManualClock(time_ms=T0), allow_pure_python=True)
    await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.startup)
    await b.txns.start()
    return b


async def _stop(b: Broker) -> None:
    await b.txns.shutdown()
    await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.shutdown)
    b.io.shutdown()


async def _call(b: Broker, key: int, version: int, request: Any) -> Any:
    ctx = handlers.RequestContext(b, key, version, 1, "client-a", "127.0.0.1:5555")
    return await handlers.dispatch(ctx, request)


async def _begin(b: Broker, txn: str, topic: str = "t") -> tuple[int, int]:
    r = await _call(b, ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=txn, key_type=1))
    assert r.error_code == 0
    if topic not in b.log_manager.topics:
        R = CreateTopicsRequest
        await _call(b, ApiKey.CREATE_TOPICS, 5, R(topics=[R.CreatableTopic(
            name=topic, num_partitions=2, replication_factor=1)], timeout_ms=1000))
    r = await _call(b, ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
    assert r.error_code == 0
    R2 = AddPartitionsToTxnRequest
    resp = await _call(b, ApiKey.ADD_PARTITIONS_TO_TXN, 3, R2(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=r.producer_id,
        v3_and_below_producer_epoch=r.producer_epoch,
        v3_and_below_topics=[R2.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])]))
    assert [p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition] == [0, 0]
    return r.producer_id, r.producer_epoch


async def _state(b: Broker, txn: str) -> str:
    r = await _call(b, ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=[txn]))
    return str(r.transaction_states[0].transaction_state)


async def _until(b: Broker, txn: str, state: str) -> None:
    for _ in range(400):
        if await _state(b, txn) == state:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{txn} is {await _state(b, txn)}, not {state}")


async def _end(b: Broker, txn: str, pid: int, epoch: int, commit: bool) -> int:
    r = await _call(b, ApiKey.END_TXN, 3, EndTxnRequest(transactional_id=txn, producer_id=pid,
                                                         producer_epoch=epoch, committed=commit))
    return int(r.error_code)


def _records(b: Broker) -> list[tuple[str, Any]]:
    out = []
    for p in b.log_manager.topics[TRANSACTION_STATE_TOPIC_NAME].partitions:
        data = p.log.read(0, 1 << 20, min_one_batch=True).read()
        for batch in logcore.iter_batches(data):
            for rec in batch:
                out.append((decode_key(rec.key).transactional_id, decode_value(rec.value)))  # type: ignore[union-attr]
    return out


def test_commit_goes_through_the_log_and_the_marker_writer(tmp_path, markers: FakeMarkers) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            pid, epoch = await _begin(b, "tx")
            topic = b.log_manager.topics[TRANSACTION_STATE_TOPIC_NAME]
            assert len(topic.partitions) == 3
            assert await _end(b, "tx", pid, epoch, True) == 0
            await _until(b, "tx", "CompleteCommit")
            assert markers.calls == [TxnMarker(pid, epoch, True, 0, [("t", 0), ("t", 1)])]
            statuses = [v.transaction_status for t, v in _records(b) if t == "tx"]
            assert statuses == [0, 1, 2, 4]  # Empty, Ongoing, PrepareCommit, CompleteCommit
        finally:
            await _stop(b)
    asyncio.run(scenario())


def test_failed_markers_are_retried(tmp_path, markers: FakeMarkers) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            pid, epoch = await _begin(b, "tx")
            markers.codes = [{("t", 1): errors.NotLeaderOrFollowerError.code}]
            assert await _end(b, "tx", pid, epoch, False) == 0
            for _ in range(100):
                if len(markers.calls) == 1:
                    break
                await asyncio.sleep(0.01)
            assert await _state(b, "tx") == "PrepareAbort"
            b.clock.advance(b.txns.config.retry_backoff_ms)  # type: ignore[attr-defined]
            await _until(b, "tx", "CompleteAbort")
            assert [(m.commit, m.partitions) for m in markers.calls] == [
                (False, [("t", 0), ("t", 1)]), (False, [("t", 1)])]
        finally:
            await _stop(b)
    asyncio.run(scenario())


def test_restart_completes_a_prepared_transaction(tmp_path, markers: FakeMarkers) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            pid, epoch = await _begin(b, "tx")
            markers.block = True  # the markers never get out before the shutdown
            assert await _end(b, "tx", pid, epoch, True) == 0
            assert await _state(b, "tx") == "PrepareCommit"
        finally:
            await _stop(b)
        markers.block = False
        b = await _start(tmp_path)
        try:
            await _until(b, "tx", "CompleteCommit")
            assert markers.calls == [TxnMarker(pid, epoch, True, 0, [("t", 0), ("t", 1)])]
        finally:
            await _stop(b)
    asyncio.run(scenario())


@pytest.mark.parametrize("enabled", [True, False])
def test_txn_verify_hook(tmp_path, markers: FakeMarkers, enabled: bool) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path, **{"transaction.partition.verification.enable": str(enabled).lower()})
        try:
            pid, epoch = await _begin(b, "tx")
            assert await b.txn_verify("tx", pid, epoch, "t", 1) == 0
            abortable = errors.TransactionAbortableError.code
            assert await b.txn_verify("tx", pid, epoch, "other", 0) == (abortable if enabled else 0)
            fenced = errors.ProducerFencedError.code
            assert await b.txn_verify("tx", pid, epoch + 1, "t", 0) == (fenced if enabled else 0)
        finally:
            await _stop(b)
    asyncio.run(scenario())


def test_requests_after_shutdown_get_coordinator_not_available(tmp_path, markers: FakeMarkers) -> None:
    async def scenario() -> None:
        b = await _start(tmp_path)
        pid, epoch = await _begin(b, "tx")
        await b.txns.shutdown()
        try:
            assert await _end(b, "tx", pid, epoch, True) == errors.CoordinatorNotAvailableError.code
        finally:
            await asyncio.get_running_loop().run_in_executor(b.executor, b.log_manager.shutdown)
            b.io.shutdown()
    asyncio.run(scenario())


def test_deleting_the_topic_resigns_and_find_coordinator_creates_it_anew(tmp_path, markers: FakeMarkers) -> None:
    from pylog.protocol.messages import DeleteTopicsRequest

    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            await _begin(b, "tx")
            r = await _call(b, ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(
                topic_names=[TRANSACTION_STATE_TOPIC_NAME], timeout_ms=1000))
            assert r.responses[0].error_code == 0
            d = await _call(b, ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=["tx"]))
            assert d.transaction_states[0].error_code == errors.NotCoordinatorError.code
            await _begin(b, "tx")  # a new topic, a new producer id for the id
            assert await _state(b, "tx") == "Ongoing"
        finally:
            await _stop(b)
    asyncio.run(scenario())


def test_marker_result_shapes_are_all_read() -> None:
    from pylog.txn.service import _marker_results

    class Entry(NamedTuple):
        producer_id: int
        topic: str
        partition_index: int
        error_code: int

    want = [(7, "t", 0, 0), (7, "t", 1, 6)]
    assert _marker_results([(7, "t", 0, 0), (7, "t", 1, 6)]) == want
    assert _marker_results({(7, "t", 0): 0, (7, "t", 1): 6}) == want
    assert _marker_results([Entry(7, "t", 0, 0), Entry(7, "t", 1, 6)]) == want


async def _add(b: Broker, txn: str, pid: int, epoch: int, topic: str = "t") -> int:
    R = AddPartitionsToTxnRequest
    resp = await _call(b, ApiKey.ADD_PARTITIONS_TO_TXN, 3, R(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[0])]))
    (code,) = {p.partition_error_code for t in resp.results_by_topic_v3_and_below
               for p in t.results_by_partition}
    return int(code)


def test_next_transaction_waits_for_the_previous_to_complete(tmp_path, markers: FakeMarkers) -> None:
    """EndTxn answers once PrepareCommit is written; an AddPartitionsToTxn for the next
    transaction arriving while the markers are still being written is held until the
    transaction completes and answered NONE, not CONCURRENT_TRANSACTIONS."""
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            pid, epoch = await _begin(b, "tx")
            assert await _end(b, "tx", pid, epoch, True) == 0
            assert await _state(b, "tx") == "PrepareCommit"  # the markers are on their way
            assert await _add(b, "tx", pid, epoch) == 0
            assert await _state(b, "tx") == "Ongoing"
            assert [m.commit for m in markers.calls] == [True]
        finally:
            await _stop(b)
    asyncio.run(scenario())


def test_a_single_nodes_markers_and_complete_commit_are_written_before_end_txn_answers(tmp_path) -> None:
    """Real markers on a single node: EndTxn's PrepareCommit, the markers and CompleteCommit
    are all appended inline (no delivery task), in Kafka's order, before EndTxn returns;
    the next transaction's AddPartitionsToTxn finds it complete."""
    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            pid, epoch = await _begin(b, "tx")
            tasks = len(b.txns.runtime._tasks)
            assert await _end(b, "tx", pid, epoch, True) == 0
            assert await _state(b, "tx") == "CompleteCommit"
            assert len(b.txns.runtime._tasks) == tasks  # no delivery task was spawned
            statuses = [v.transaction_status for t, v in _records(b) if t == "tx"]
            assert statuses == [0, 1, 2, 4]  # Empty, Ongoing, PrepareCommit, CompleteCommit
            for index in (0, 1):  # one COMMIT marker at the end of each data partition
                plog = b.log_manager.topics["t"].partitions[index].log
                batches = list(logcore.iter_batches(plog.read(0, 1 << 20).read()))
                assert batches[-1].is_control and plog.last_stable_offset(plog.log_end_offset) == \
                    plog.log_end_offset
            assert await _add(b, "tx", pid, epoch) == 0
            assert await _state(b, "tx") == "Ongoing"
        finally:
            await _stop(b)
    asyncio.run(scenario())


def test_concurrent_transactions_after_a_bounded_wait(tmp_path, markers: FakeMarkers) -> None:
    """Markers that cannot be written: the next AddPartitionsToTxn and a repeated EndTxn get
    CONCURRENT_TRANSACTIONS after CONCURRENT_WAIT_S, as Kafka answers them."""
    from pylog.txn.service import CONCURRENT_WAIT_S

    async def scenario() -> None:
        b = await _start(tmp_path)
        try:
            pid, epoch = await _begin(b, "tx")
            markers.block = True
            assert await _end(b, "tx", pid, epoch, True) == 0
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            assert await _add(b, "tx", pid, epoch) == errors.ConcurrentTransactionsError.code
            assert await _end(b, "tx", pid, epoch, True) == errors.ConcurrentTransactionsError.code
            waited = loop.time() - t0
            assert 2 * CONCURRENT_WAIT_S * 0.9 <= waited < 2 * CONCURRENT_WAIT_S + 5
            assert await _state(b, "tx") == "PrepareCommit"
        finally:
            await _stop(b)
    asyncio.run(scenario())
