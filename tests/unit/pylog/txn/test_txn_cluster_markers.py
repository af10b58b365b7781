"""The cluster-mode pieces of the transaction coordinator, without sockets: the coordinator
epoch per hosted partition, marker routing by leader, the WriteTxnMarkers / verify-only
AddPartitionsToTxn requests and answers, the per-broker marker channels (fake channels), the
controller channel's no-retry mode and producer ids from ZooKeeper blocks (fake store)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pylog import errors
from pylog._clock import ManualClock
from pylog.cluster import zk_data as z
from pylog.controller.metadata_cache import BrokerInfo, MetadataCache, PartitionMeta
from pylog.controller.producer_ids import ClusterProducerIds
from pylog.net.channel import BrokerChannel
from pylog.protocol.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pylog.txn import markers as mk
from pylog.txn.config import TransactionConfig
from pylog.txn.coordinator import TransactionCoordinator

NOT_LEADER = errors.NotLeaderOrFollowerError.code
UNKNOWN = errors.UnknownTopicOrPartitionError.code


# --------------------------------------------------------------------------- coordinator epoch


class _Coord:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.pids = iter(range(5000, 6000))
        self.coord = TransactionCoordinator(self.clock, TransactionConfig(num_partitions=1),
                                            new_producer_id=lambda: next(self.pids))
        self.log: list[tuple[bytes, bytes | None]] = []
        self.timeouts: list[int] = []

    def flush(self) -> None:
        while writes := self.coord.take_writes():
            for w in writes:
                self.log.extend(w.records)
                self.timeouts.append(w.timeout_ms)
                w.complete()

    def load(self, epoch: int) -> list[Any]:
        self.coord.begin_load(0, epoch)
        assert self.coord.coordinator_epoch_of(0) == epoch
        for key, value in self.log:
            assert key is not None
            self.coord.replay(0, key, value)
        self.coord.complete_load(0)
        return self.coord.take_markers()

    def prepare_commit(self, txn: str = "tx") -> Any:
        init = self.coord.init_producer_id(txn, 45_000)
        self.flush()
        pid, epoch = init.result.producer_id, init.result.producer_epoch
        self.coord.add_partitions(txn, pid, epoch, [("t", 0), ("t", 1)])
        self.flush()
        done = self.coord.end_txn(txn, pid, epoch, True)
        self.flush()
        assert done.result == 0
        [request] = self.coord.take_markers()
        return request


def test_markers_carry_the_partition_leader_epoch_and_writes_the_txn_timeout() -> None:
    c = _Coord()
    c.load(7)
    request = c.prepare_commit()
    assert request.coordinator_epoch == 7 and request.commit
    assert c.timeouts and set(c.timeouts) == {45_000}  # Kafka: appends wait the txn timeout
    assert c.coord.wants_markers(request)


def test_reload_in_a_newer_epoch_resends_and_ignores_the_old_answer() -> None:
    c = _Coord()
    c.load(3)
    old = c.prepare_commit()
    resent = c.load(4)  # leadership moved away and back (or the epoch was bumped)
    assert [m.coordinator_epoch for m in resent] == [4]
    assert not c.coord.wants_markers(old) and c.coord.wants_markers(resent[0])
    # The old request's answer does not complete (or retry) the reloaded transaction.
    c.coord.on_markers_written(old, {("t", 0): 0, ("t", 1): 0})
    c.flush()
    assert c.coord.metadata("tx").state.kafka_name == "PrepareCommit"
    c.coord.on_markers_written(resent[0], {("t", 0): 0, ("t", 1): 0})
    c.flush()
    assert c.coord.metadata("tx").state.kafka_name == "CompleteCommit"


def test_resigned_partition_wants_no_markers_and_answers_not_coordinator() -> None:
    c = _Coord()
    c.load(1)
    request = c.prepare_commit()
    c.coord.unload(0)
    assert not c.coord.wants_markers(request)
    assert c.coord.end_txn("tx", request.producer_id, request.producer_epoch, True).result == \
        errors.NotCoordinatorError.code
    assert c.coord.coordinator_epoch_of(0) is None


def test_unreachable_leader_is_retried() -> None:
    c = _Coord()
    c.load(1)
    request = c.prepare_commit()
    c.coord.on_markers_written(request, {("t", 0): 0, ("t", 1): mk.NETWORK})
    c.clock.advance(1000)
    c.coord.tick()
    [retry] = c.coord.take_markers()
    assert retry.partitions == frozenset({("t", 1)}) and retry.coordinator_epoch == 1


# --------------------------------------------------------------------------- routing


def _metadata() -> MetadataCache:
    cache = MetadataCache()
    cache.brokers = {b: BrokerInfo(b, "127.0.0.1", 9000 + b, None) for b in (0, 1, 2)}
    cache.partitions = {"t": {
        0: PartitionMeta(0, 1, (0, 1), (0, 1), (), 0),
        1: PartitionMeta(1, 1, (1, 2), (1, 2), (), 0),
        2: PartitionMeta(2, 1, (2, 0), (2, 0), (), 0),
        3: PartitionMeta(-1, 2, (3,), (3,), (3,), 0),  # offline
        4: PartitionMeta(5, 2, (5,), (5,), (), 0),  # leader not live
    }}
    return cache


def test_route_by_leader() -> None:
    tps = [("t", i) for i in range(5)] + [("gone", 0), ("t", 9)]
    r = mk.route(tps, 0, _metadata())
    assert r.local == [("t", 0)]
    assert r.remote == {1: [("t", 1)], 2: [("t", 2)]}
    assert r.settled == {("t", 3): NOT_LEADER, ("t", 4): NOT_LEADER, ("gone", 0): UNKNOWN,
                         ("t", 9): UNKNOWN}
    assert mk.leaders([("t", 1), ("gone", 0)], _metadata()) == {("t", 1): 1, ("gone", 0): None}


def test_write_txn_markers_request_and_response_codes() -> None:
    req = mk.build_request(42, 3, True, 9, [("b", 1), ("a", 0), ("b", 0)])
    for version in (0, 1):
        back = WriteTxnMarkersRequest.decode(req.encode(version), version)
        [m] = back.markers
        assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (42, 3, True, 9)
        assert [(t.name, t.partition_indexes) for t in m.topics] == [("a", [0]), ("b", [0, 1])]
    R = WriteTxnMarkersResponse
    resp = R(markers=[
        R.WritableTxnMarkerResult(producer_id=41, topics=[]),
        R.WritableTxnMarkerResult(producer_id=42, topics=[R.WritableTxnMarkerTopicResult(
            name="a", partitions=[R.WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),
                                  R.WritableTxnMarkerPartitionResult(partition_index=7, error_code=5)])]),
    ])
    assert mk.response_codes(resp, 42, [("a", 0), ("b", 1)]) == {("a", 0): 0, ("b", 1): mk.NETWORK}


def test_verify_request_version_and_answer() -> None:
    req = mk.build_verify_request("tx", 7, 2, "t", 3)
    back = AddPartitionsToTxnRequest.decode(req.encode(4), 4)
    [t] = back.transactions
    assert (t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only) == ("tx", 7, 2, True)
    assert [(x.name, x.partitions) for x in t.topics] == [("t", [3])]
    conn = SimpleNamespace(node_id=1, versions={AddPartitionsToTxnRequest.API_KEY: (0, 5)})
    assert mk.verify_version(conn) >= 4
    conn.versions = {AddPartitionsToTxnRequest.API_KEY: (0, 3)}
    with pytest.raises(errors.UnsupportedVersionError):
        mk.verify_version(conn)
    R = AddPartitionsToTxnResponse
    ok = R(error_code=0, results_by_transaction=[R.AddPartitionsToTxnResult(
        transactional_id="tx", topic_results=[R.AddPartitionsToTxnTopicResult(
            name="t", results_by_partition=[R.AddPartitionsToTxnPartitionResult(
                partition_index=3, partition_error_code=errors.TransactionAbortableError.code)])])])
    assert mk.verify_response_code(ok, "tx", "t", 3) == errors.TransactionAbortableError.code
    assert mk.verify_response_code(ok, "tx", "t", 4) == mk.NETWORK
    assert mk.verify_response_code(R(error_code=51, results_by_transaction=[]), "tx", "t", 3) == 51
    assert mk.verify_response_code(ConnectionRefusedError(), "tx", "t", 3) == mk.NETWORK


# --------------------------------------------------------------------------- channels


class _FakeChannel:
    def __init__(self, broker_id: int, host: str, port: int, client_id: str) -> None:
        self.host, self.port = host, port
        self.sent: list[Any] = []
        self.closed = False
        self.answer: Any = None

    def enqueue(self, builder: Any, on_response: Any, version: Any = None) -> None:
        body = builder(None)
        self.sent.append(body)
        asyncio.get_running_loop().call_soon(on_response, self.answer(body))

    async def close(self) -> None:
        self.closed = True


def test_marker_channels_one_per_broker_errors_and_address_changes() -> None:
    made: list[_FakeChannel] = []

    def factory(*args: Any) -> _FakeChannel:
        ch = _FakeChannel(*args)
        R = WriteTxnMarkersResponse
        ch.answer = lambda body: R(markers=[R.WritableTxnMarkerResult(
            producer_id=body.markers[0].producer_id, topics=[R.WritableTxnMarkerTopicResult(
                name=t.name, partitions=[R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=0)
                                         for p in t.partition_indexes]) for t in body.markers[0].topics])])
        made.append(ch)
        return ch

    async def run() -> None:
        chans = mk.MarkerChannels("test", factory)
        b1 = BrokerInfo(1, "h", 1, None)
        assert await chans.send(b1, 5, 0, True, 2, [("t", 1)]) == {("t", 1): 0}
        assert await chans.send(b1, 6, 0, False, 2, [("t", 1), ("t", 4)]) == {("t", 1): 0, ("t", 4): 0}
        assert len(made) == 1 and len(made[0].sent) == 2
        made[0].answer = lambda body: ConnectionRefusedError("gone")
        assert await chans.send(b1, 5, 0, True, 2, [("t", 1)]) == {("t", 1): mk.NETWORK}
        # The broker came back at another port: a new channel, the old one closed.
        assert await chans.send(BrokerInfo(1, "h", 2, None), 5, 0, True, 2, [("t", 1)]) == {("t", 1): 0}
        await asyncio.sleep(0)
        assert len(made) == 2 and made[0].closed
        chans.retain({})
        await asyncio.sleep(0)
        assert made[1].closed
        await chans.close()

    asyncio.run(run())


def test_broker_channel_without_retry_reports_the_failure_and_goes_on() -> None:
    async def run() -> None:
        ch = BrokerChannel(1, "127.0.0.1", 1, "test", retry=False)
        attempts = 0

        async def refuse() -> Any:
            nonlocal attempts
            attempts += 1
            raise ConnectionRefusedError("refused")
        ch._connection = refuse  # type: ignore[method-assign]
        got: list[Any] = []
        done = asyncio.Event()
        ch.enqueue(lambda conn: "first", got.append)
        ch.enqueue(lambda conn: "second", lambda r: (got.append(r), done.set()))
        await asyncio.wait_for(done.wait(), 5)
        assert attempts == 2 and all(isinstance(g, ConnectionRefusedError) for g in got)
        await ch.close()

    asyncio.run(run())


# --------------------------------------------------------------------------- producer ids


class _FakeCluster:
    def __init__(self, fail: bool = False) -> None:
        self.last: z.ProducerIdBlock | None = None
        self.fail = fail
        self.store = SimpleNamespace(claim_producer_id_block=self._claim)

    def _claim(self, broker_id: int) -> z.ProducerIdBlock:
        if self.fail:
            raise OSError("zookeeper is down")
        self.last = z.ProducerIdBlock.next_after(self.last, broker_id)
        return self.last

    async def zk(self, fn: Any, *args: Any) -> Any:
        return fn(*args)


def test_cluster_producer_ids_come_from_zookeeper_blocks() -> None:
    async def run() -> None:
        cluster = _FakeCluster()
        a, b = ClusterProducerIds(cluster, 0), ClusterProducerIds(cluster, 1)
        ids_a = [await a.next_id() for _ in range(3)]
        ids_b = [await b.next_id() for _ in range(2)]
        assert ids_a == [0, 1, 2] and ids_b == [1000, 1001]
        for _ in range(997):
            await a.next_id()
        assert await a.next_id() == 2000  # a's first block used up: the next free block
        down = ClusterProducerIds(_FakeCluster(fail=True), 2)
        with pytest.raises(errors.CoordinatorNotAvailableError):
            await down.next_id()

    asyncio.run(run())

