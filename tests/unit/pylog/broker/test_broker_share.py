"""ShareFetch and ShareAcknowledge through the dispatcher, in process, with a manual clock:
share sessions and their errors, acquisition, acknowledgements, lock expiry, closing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.messages import ProduceRequest, ShareAcknowledgeRequest, ShareFetchRequest

T0 = 1_700_000_000_000
F = ShareFetchRequest
A = ShareAcknowledgeRequest


@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "1"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.executor.shutdown()


async def call(broker: Broker, api_key: int, version: int, body: Any) -> Any:
    ctx = handlers.RequestContext(broker, api_key, version, 1, "test", "127.0.0.1:1")
    return await asyncio.wait_for(handlers.dispatch(ctx, body), 10)


async def produce(broker: Broker, topic: str, n: int) -> None:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, timestamp_ms=T0)
    R = ProduceRequest
    body = R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name=topic, partition_data=[R.PartitionProduceData(index=0, records=b.build())])])
    resp = await call(broker, 0, 9, body)
    assert resp.responses[0].partition_responses[0].error_code == 0


async def initialize(broker: Broker, tid: Any, group: str = "g") -> None:
    """InitializeShareGroupState of partition 0 (start offset -1) through the persister, as
    the group coordinator does before it assigns the partition (it makes the state topic)."""
    r = await broker.share.persister.initialize((group, tid, 0), 1, -1)
    assert r.error_code == 0


def fetch(tid: Any, member: str, epoch: int, *, max_records: int = 100, wait: int = 0,
          acks: list[tuple[int, int, int]] = (), group: str = "g", mode: int = 0,
          batch_size: int | None = None) -> Any:
    """A ShareFetch; ``mode`` is v2's ShareAcquireMode (0 batch-optimized, 1 record-limit)."""
    return F(group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=wait,
             min_bytes=1, max_bytes=1 << 20, max_records=max_records,
             batch_size=max_records if batch_size is None else batch_size,
             share_acquire_mode=mode, is_renew_ack=False,
             topics=[F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(
                 partition_index=0, acknowledgement_batches=[
                     F.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=[t])
                     for a, b, t in acks])])],
             forgotten_topics_data=[])


def ack(tid: Any, member: str, epoch: int, acks: list[tuple[int, int, list[int]]]) -> Any:
    return A(group_id="g", member_id=member, share_session_epoch=epoch, topics=[A.AcknowledgeTopic(
        topic_id=tid, partitions=[A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t)
            for a, b, t in acks])])])


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def test_share_fetch_sessions_acknowledgements_and_locks(broker: Broker) -> None:
    async def go() -> None:
        topic = broker.log_manager.create_topic("t", 1)
        tid = topic.topic_id
        await produce(broker, "t", 10)
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
        await initialize(broker, tid)

        r = await call(broker, 78, 2, fetch(tid, "m1", 0, max_records=5, mode=1))  # record-limit
        assert r.error_code == 0 and acquired(r) == [(0, 4, 1)]
        assert r.acquisition_lock_timeout_ms == 30_000
        assert r.responses[0].partitions[0].records.size > 0  # the batch, as a file region

        # Session errors are top-level.
        assert (await call(broker, 78, 1, fetch(tid, "m1", 5))).error_code == \
            errors.InvalidShareSessionEpochError.code
        assert (await call(broker, 78, 1, fetch(tid, "nobody", 1))).error_code == \
            errors.ShareSessionNotFoundError.code
        assert (await call(broker, 78, 1, fetch(tid, "m3", 0, acks=[(0, 0, 1)]))).error_code == \
            errors.InvalidRequestError.code
        assert (await call(broker, 79, 1, ack(tid, "m1", 0, []))).error_code == \
            errors.InvalidShareSessionEpochError.code

        # ShareAcknowledge: accept 0-1, release 2, reject 3 (per-offset types).
        r = await call(broker, 79, 1, ack(tid, "m1", 1, [(0, 3, [1, 1, 2, 3])]))
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
        r = await call(broker, 79, 1, ack(tid, "m1", 2, [(9, 9, [1])]))  # never acquired
        assert r.responses[0].partitions[0].error_code == errors.InvalidRecordStateError.code

        # Another member gets the released offset again (delivery 2) and the rest; 4 is m1's.
        r = await call(broker, 78, 1, fetch(tid, "m2", 0))
        assert acquired(r) == [(2, 2, 2), (5, 9, 1)]

        # m1's lock on 4 expires: it comes back with its delivery counted.
        broker.clock.advance(30_000)
        r = await call(broker, 78, 1, fetch(tid, "m3", 0))
        assert acquired(r) == [(2, 2, 3), (4, 9, 2)]

        # Piggy-backed acknowledgements: a bad one is the partition's AcknowledgeErrorCode.
        # (3 was rejected: a batch over it is refused as a whole.)
        r = await call(broker, 78, 2, fetch(tid, "m3", 1, acks=[(2, 9, 1)], max_records=0))
        assert r.responses[0].partitions[0].acknowledge_error_code == \
            errors.InvalidRecordStateError.code
        r = await call(broker, 78, 2, fetch(tid, "m3", 2, acks=[(2, 2, 1), (4, 9, 1)],
                                            max_records=0))
        pd = r.responses[0].partitions[0]
        assert pd.acknowledge_error_code == 0 and acquired(r) == []
        sp = broker.share.partitions[("g", tid, 0)]
        assert sp.start_offset == 10 and sp.end_offset == 10
        r = await call(broker, 78, 1, fetch(tid, "m3", 3, acks=[(2, 2, 1)], max_records=0))
        assert r.responses[0].partitions[0].acknowledge_error_code == \
            errors.InvalidRecordStateError.code

        # Long poll: nothing to acquire, woken by an append.
        waiting = asyncio.ensure_future(call(broker, 78, 1, fetch(tid, "m3", 4, wait=5000)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await produce(broker, "t", 2)
        r = await asyncio.wait_for(waiting, 5)
        assert acquired(r) == [(10, 11, 1)]

        # Closing the session (epoch -1) releases what the member holds.
        r = await call(broker, 78, 1, fetch(tid, "m3", -1, max_records=0))
        assert r.error_code == 0
        assert sp.state_of(10)[0] == 0 and broker.share.sessions.get("g", "m3") is None

    asyncio.run(go())


def test_a_share_partition_is_read_only_once_initialized(broker: Broker) -> None:
    """Kafka 4.1: the leader reads the state the group coordinator initialized; a share
    partition never initialized is the partition's error (Kafka's SharePartition maps the
    coordinator's INVALID_REQUEST to UNKNOWN_SERVER_ERROR), answered at once even with a
    long wait, and not kept: initialized later, it is read."""
    async def go() -> None:
        topic = broker.log_manager.create_topic("u", 1)
        await produce(broker, "u", 4)
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
        r = await call(broker, 78, 1, fetch(topic.topic_id, "m", 0, wait=5000))
        assert r.error_code == 0 and acquired(r) == []
        assert r.responses[0].partitions[0].error_code == errors.UnknownServerError.code
        assert ("g", topic.topic_id, 0) not in broker.share.partitions
        await initialize(broker, topic.topic_id)
        r = await call(broker, 78, 1, fetch(topic.topic_id, "m", 1))
        assert r.responses[0].partitions[0].error_code == 0 and acquired(r) == [(0, 3, 1)]

    asyncio.run(go())


def test_a_full_window_acquires_nothing_more(broker: Broker) -> None:
    async def go() -> None:
        topic = broker.log_manager.create_topic("w", 1)
        await produce(broker, "w", 300)
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
        key = ("g", topic.topic_id, 0)
        await initialize(broker, topic.topic_id)
        r = await call(broker, 78, 2, fetch(topic.topic_id, "m", 0, max_records=150, mode=1))
        assert acquired(r) == [(0, 149, 1)]
        # the group config share.partition.max.record.locks applies to a loaded share partition
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest",
                                               "share.partition.max.record.locks": 200}, False)
        r = await call(broker, 78, 2, fetch(topic.topic_id, "n", 0, max_records=150, mode=1))
        assert acquired(r) == [(150, 199, 1)]
        r = await call(broker, 78, 2, fetch(topic.topic_id, "o", 0, max_records=150, mode=1))
        assert acquired(r) == []
        assert broker.share.partitions[key].max_in_flight == 200

    asyncio.run(go())


def test_group_configs_altered_and_described(broker: Broker) -> None:
    from pylog.protocol.messages import (
        AlterConfigsRequest,
        DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
    )

    I = IncrementalAlterConfigsRequest  # noqa: E741
    D = DescribeConfigsRequest

    def alter(*configs: tuple[str, int, str | None]) -> Any:
        return I(resources=[I.AlterConfigsResource(resource_type=32, resource_name="g", configs=[
            I.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in configs])],
            validate_only=False)

    async def go() -> None:
        r = await call(broker, 44, 1, alter(("share.auto.offset.reset", 0, "earliest"),
                                            ("share.record.lock.duration.ms", 0, "20000")))
        assert r.responses[0].error_code == 0
        bad = await call(broker, 44, 1, alter(("share.record.lock.duration.ms", 0, "100")))
        assert bad.responses[0].error_code == errors.InvalidConfigError.code
        unknown = await call(broker, 44, 1, alter(("share.nope", 0, "1")))
        assert unknown.responses[0].error_code == errors.InvalidConfigError.code
        assert broker.share.lock_duration_ms("g") == 20000
        d = await call(broker, 32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=32, resource_name="g", configuration_keys=None)],
            include_synonyms=True, include_documentation=False))
        got = {c.name: (c.value, c.config_source) for c in d.results[0].configs}
        assert got["share.auto.offset.reset"] == ("earliest", 8)
        assert got["share.record.lock.duration.ms"] == ("20000", 8)
        assert got["share.delivery.count.limit"] == ("5", 5)
        r = await call(broker, 44, 1, alter(("share.record.lock.duration.ms", 1, None)))
        assert r.responses[0].error_code == 0 and broker.share.lock_duration_ms("g") == 30000
        # share.auto.offset.reset=by_duration: Kafka's words for a bad duration, through
        # IncrementalAlterConfigs and the legacy AlterConfigs alike
        bad = await call(broker, 44, 1, alter(("share.auto.offset.reset", 0, "by_duration:PT-1H")))
        assert bad.responses[0].error_code == errors.InvalidConfigError.code
        assert "by_duration:<PnDTnHnMn.nS>" in bad.responses[0].error_message
        A = AlterConfigsRequest
        legacy = await call(broker, 33, 1, A(resources=[A.AlterConfigsResource(
            resource_type=32, resource_name="g", configs=[A.AlterableConfig(
                name="share.auto.offset.reset", value="by_duration:1 hour")])], validate_only=False))
        assert legacy.responses[0].error_code == errors.InvalidConfigError.code
        assert "share.auto.offset.reset" in legacy.responses[0].error_message
        r = await call(broker, 44, 1, alter(("share.auto.offset.reset", 0, "by_duration:PT1H"),
                                            ("share.isolation.level", 0, "read_committed")))
        assert r.responses[0].error_code == 0
        d = await call(broker, 32, 4, D(resources=[D.DescribeConfigsResource(
            resource_type=32, resource_name="g", configuration_keys=None)],
            include_synonyms=True, include_documentation=False))
        got = {c.name: (c.value, c.config_source) for c in d.results[0].configs}
        assert got["share.auto.offset.reset"] == ("by_duration:PT1H", 8)
        assert got["share.isolation.level"] == ("read_committed", 8)
        assert got["share.partition.max.record.locks"] == ("2000", 5)

    asyncio.run(go())


def test_by_duration_starts_at_the_first_record_that_recent(broker: Broker) -> None:
    """share.auto.offset.reset=by_duration:D: a new share partition starts at the first
    record whose timestamp is >= now - D (the time index), at the log end when none is."""
    async def go() -> None:
        topic = broker.log_manager.create_topic("b", 1)
        plog = topic.partitions[0].log
        for age_min in (180, 90, 50, 20, 5):  # offsets 0-4, oldest first
            b = logcore.BatchBuilder()
            b.append(b"%d" % age_min, timestamp_ms=T0 - age_min * 60_000)
            plog.append(b.build())
        tid = topic.topic_id
        broker.share.group_configs.alter("h1", {"share.auto.offset.reset": "by_duration:PT1H"}, False)
        broker.share.group_configs.alter("d1", {"share.auto.offset.reset": "by_duration:P1D"}, False)
        broker.share.group_configs.alter("m1", {"share.auto.offset.reset": "by_duration:PT1M"}, False)
        for group, first in (("h1", 2), ("d1", 0), ("m1", None)):
            await initialize(broker, tid, group)
            r = await call(broker, 78, 1, fetch(tid, "m", 0, group=group))
            sp = broker.share.partitions[(group, tid, 0)]
            if first is None:
                assert acquired(r) == [] and sp.start_offset == 5  # none that recent
            else:
                assert acquired(r) == [(first, 4, 1)]

    asyncio.run(go())


def test_deleting_a_topic_drops_its_share_partitions(broker: Broker) -> None:
    from pylog.protocol.messages import DeleteTopicsRequest

    async def go() -> None:
        topic = broker.log_manager.create_topic("d", 1)
        await produce(broker, "d", 3)
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
        await initialize(broker, topic.topic_id)
        r = await call(broker, 78, 1, fetch(topic.topic_id, "m", 0))
        assert acquired(r) == [(0, 2, 1)]
        assert ("g", topic.topic_id, 0) in broker.share.partitions
        D = DeleteTopicsRequest
        d = await call(broker, 20, 6, D(topics=[D.DeleteTopicState(name="d")], timeout_ms=1000))
        assert d.responses[0].error_code == 0
        assert ("g", topic.topic_id, 0) not in broker.share.partitions
        r = await call(broker, 78, 1, fetch(topic.topic_id, "m", 1))
        assert r.responses[0].partitions[0].error_code == errors.UnknownTopicIdError.code

    asyncio.run(go())


def _txn(pid: int, seq: int, values: list[bytes]) -> bytes:
    b = logcore.BatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
    for v in values:
        b.append(v, timestamp_ms=T0)
    return b.build()


def _archived(sp: Any, offset: int) -> bool:
    """Archived, or done with (below the share-partition start offset)."""
    state = sp.state_of(offset)
    return offset < sp.start_offset if state is None else state[0] == 4


@pytest.mark.parametrize("level", ["read_uncommitted", "read_committed"])
def test_share_isolation_level(broker: Broker, level: str) -> None:
    """share.isolation.level: markers are never acquired; read_committed stops at the last
    stable offset and archives aborted data; read_uncommitted delivers aborted data too."""
    async def go() -> None:
        topic = broker.log_manager.create_topic("x", 1)
        plog = topic.partitions[0].log
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest",
                                               "share.isolation.level": level}, False)
        plog.append(_txn(7, 0, [b"a0", b"a1"]))                          # 0-1 aborted
        plog.append_control(7, 0, commit=False, coordinator_epoch=0)       # 2
        plog.append(_txn(8, 0, [b"c0"]))                                   # 3 committed
        plog.append_control(8, 0, commit=True, coordinator_epoch=0)        # 4
        plog.append(_txn(9, 0, [b"o0", b"o1"]))                            # 5-6 open
        await produce(broker, "x", 1)                                      # 7 plain
        tid = topic.topic_id
        key = ("g", tid, 0)
        await initialize(broker, tid)
        r = await call(broker, 78, 1, fetch(tid, "m", 0))
        if level == "read_committed":
            assert acquired(r) == [(3, 3, 1)]  # stops at the open transaction (LSO 5)
        else:
            assert acquired(r) == [(0, 1, 1), (3, 3, 1), (5, 7, 1)]
        sp = broker.share.partitions[key]
        assert _archived(sp, 2) and _archived(sp, 4)  # markers
        if level == "read_committed":
            assert _archived(sp, 0) and _archived(sp, 1) and sp.start_offset == 3
            r = await call(broker, 78, 1, fetch(tid, "m", 1))
            assert acquired(r) == []  # the open transaction still blocks 5-7
            plog.append_control(9, 0, commit=False, coordinator_epoch=0)   # 8: abort it
            r = await call(broker, 78, 1, fetch(tid, "m", 2))
            assert acquired(r) == [(7, 7, 1)]  # 5-6 aborted, 8 a marker
            assert all(_archived(sp, o) for o in (5, 6, 8))
        # the member accepts what it got: the start offset moves past everything
        got = [(0, 1), (3, 3), (5, 7)] if level == "read_uncommitted" else [(3, 3), (7, 7)]
        r = await call(broker, 79, 1, ack(tid, "m", 1 if level == "read_uncommitted" else 3,
                                          [(a, b, [1]) for a, b in got]))
        assert r.error_code == 0
        assert sp.start_offset == plog.log_end_offset

    asyncio.run(go())


def test_a_fetch_reads_on_past_reads_of_only_markers_and_aborted_data(broker: Broker, monkeypatch) -> None:
    """Reads of one batch each (a small read size): the aborted batch and the markers are
    archived read after read, and the same fetch acquires the committed record behind them."""
    from pylog.broker.handlers import share_fetch

    monkeypatch.setattr(share_fetch, "_READ_BYTES", 1)  # one batch per read (min one batch)

    async def go() -> None:
        topic = broker.log_manager.create_topic("y", 1)
        plog = topic.partitions[0].log
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest",
                                               "share.isolation.level": "read_committed"}, False)
        plog.append(_txn(7, 0, [b"a0", b"a1"]))                        # 0-1 aborted
        plog.append_control(7, 0, commit=False, coordinator_epoch=0)     # 2
        plog.append(_txn(7, 2, [b"a2"]))                                 # 3 aborted
        plog.append_control(7, 0, commit=False, coordinator_epoch=0)     # 4
        plog.append(_txn(8, 0, [b"c0"]))                                 # 5 committed
        plog.append_control(8, 0, commit=True, coordinator_epoch=0)      # 6
        await initialize(broker, topic.topic_id)
        r = await call(broker, 78, 1, fetch(topic.topic_id, "m", 0))
        assert acquired(r) == [(5, 5, 1)]
        assert broker.share.partitions[("g", topic.topic_id, 0)].start_offset == 5

    asyncio.run(go())


def test_renew_acknowledgements_follow_share_renew_acknowledge_enable(broker: Broker) -> None:
    """RENEW (v2) extends a lock; with the group config share.renew.acknowledge.enable=false
    it is INVALID_RECORD_STATE for the partition and nothing of it is applied, as in Kafka."""
    async def go() -> None:
        topic = broker.log_manager.create_topic("r", 1)
        await produce(broker, "r", 2)
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
        tid = topic.topic_id
        await initialize(broker, tid)
        r = await call(broker, 78, 2, fetch(tid, "m", 0))
        assert acquired(r) == [(0, 1, 1)]
        sp = broker.share.partitions[("g", tid, 0)]
        body = ack(tid, "m", 1, [(0, 0, [4])])
        body.is_renew_ack = True
        r = await call(broker, 79, 2, body)
        p = r.responses[0].partitions[0]
        assert p.error_code == 0 and sp.state_of(0) == (1, 1)  # renewed: still acquired
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest",
                                               "share.renew.acknowledge.enable": False}, False)
        body = ack(tid, "m", 2, [(0, 0, [4]), (1, 1, [1])])
        body.is_renew_ack = True
        r = await call(broker, 79, 2, body)
        p = r.responses[0].partitions[0]
        assert p.error_code == errors.InvalidRecordStateError.code
        assert "share.renew.acknowledge.enable" in p.error_message
        assert sp.state_of(1) == (1, 1)  # the ACCEPT in the same partition was not applied
        r = await call(broker, 79, 2, ack(tid, "m", 3, [(0, 1, [1])]))
        assert r.responses[0].partitions[0].error_code == 0 and sp.start_offset == 2

    asyncio.run(go())


async def produce_batches(broker: Broker, topic: str, sizes: list[int]) -> None:
    """One produce per size: batches of those many records."""
    for n in sizes:
        await produce(broker, topic, n)


def test_share_acquire_modes(broker: Broker) -> None:
    """KIP-1206: batch-optimized (v1, and v2 mode 0) acquires MaxRecords and the rest of
    that batch, cut at batch boundaries by BatchSize; record-limit (v2 mode 1) acquires
    exactly MaxRecords, splitting a batch whose rest another member gets."""
    async def go() -> None:
        topic = broker.log_manager.create_topic("q", 1)
        tid = topic.topic_id
        await produce_batches(broker, "q", [4, 6, 2, 8])   # 0-3, 4-9, 10-11, 12-19
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest"}, False)
        await initialize(broker, tid)
        # record-limit: 0-5 only; a second member gets 6-9 of the same batch and 10-11
        r = await call(broker, 78, 2, fetch(tid, "a", 0, max_records=6, mode=1))
        assert acquired(r) == [(0, 5, 1)]
        r = await call(broker, 78, 2, fetch(tid, "b", 0, max_records=6, mode=1))
        assert acquired(r) == [(6, 11, 1)]
        # batch-optimized at v2: 3 records asked, batch 12-19 acquired whole
        r = await call(broker, 78, 2, fetch(tid, "c", 0, max_records=3, mode=0))
        assert acquired(r) == [(12, 19, 1)]
        sp = broker.share.partitions[("g", tid, 0)]
        assert sp.acquired_count("a") == 6 and sp.acquired_count("c") == 8
        # v1 is batch-optimized, BatchSize cuts at boundaries: 4 records, batch size 4
        broker.clock.advance(30_000)                     # every lock expires
        r = await call(broker, 78, 1, fetch(tid, "d", 0, max_records=5, batch_size=4))
        assert acquired(r) == [(0, 3, 2), (4, 9, 2)]
        r = await call(broker, 78, 2, fetch(tid, "e", 0, max_records=20, batch_size=4, mode=1))
        assert acquired(r) == [(10, 19, 2)]              # record-limit never cuts

    asyncio.run(go())


@pytest.mark.parametrize("mode", [2, 7, 127, -2])
def test_an_unknown_share_acquire_mode_is_invalid_request(broker: Broker, mode: int) -> None:
    async def go() -> None:
        topic = broker.log_manager.create_topic("z", 1)
        r = await call(broker, 78, 2, fetch(topic.topic_id, "m", 0, mode=mode))
        assert r.error_code == errors.InvalidRequestError.code
        assert broker.share.sessions.get("g", "m") is None   # no session opened

    asyncio.run(go())


def renew_fetch(tid: Any, member: str, epoch: int, acks: list[tuple[int, int, int]], **fields: int) -> Any:
    body = fetch(tid, member, epoch, acks=acks, max_records=0, batch_size=0)
    body.is_renew_ack = True
    body.max_wait_ms = body.min_bytes = body.max_bytes = 0
    for name, value in fields.items():
        setattr(body, name, value)
    return body


def test_a_renew_fetch_extends_locks_and_acquires_nothing(broker: Broker) -> None:
    """KIP-1222 with the broker's clock: a ShareFetch with IsRenewAck extends the member's
    locks from now (delivery counts unchanged), acquires nothing even with records there,
    does not wait; its MaxWaitMs/MinBytes/MaxBytes/MaxRecords must be 0; renewing another
    member's record is INVALID_RECORD_STATE; ShareAcquireMode 255 (Renew) is a renew fetch
    too; RENEW in a version 1 request is INVALID_REQUEST for its partition."""
    async def go() -> None:
        topic = broker.log_manager.create_topic("n", 1)
        tid = topic.topic_id
        await produce_batches(broker, "n", [2, 2])         # 0-1, 2-3
        broker.share.group_configs.alter("g", {"share.auto.offset.reset": "earliest",
                                               "share.record.lock.duration.ms": 15000}, False)
        await initialize(broker, tid)
        r = await call(broker, 78, 2, fetch(tid, "a", 0, max_records=2, mode=1))
        assert acquired(r) == [(0, 1, 1)] and r.acquisition_lock_timeout_ms == 15000
        sp = broker.share.partitions[("g", tid, 0)]
        broker.clock.advance(10_000)
        for bad in ({"max_wait_ms": 500}, {"min_bytes": 1}, {"max_bytes": 1}, {"max_records": 1}):
            r = await call(broker, 78, 2, renew_fetch(tid, "a", 1, [(0, 1, 4)], **bad))
            assert r.error_code == errors.InvalidRequestError.code, bad
        r = await call(broker, 78, 2, renew_fetch(tid, "a", 1, [(0, 1, 4)]))
        pd = r.responses[0].partitions[0]
        assert r.error_code == 0 and pd.acknowledge_error_code == 0
        assert acquired(r) == [] and sp.state_of(2) is None   # 2-3 there, not acquired
        now = round(broker.clock.monotonic() * 1000)
        assert sp.next_deadline_ms() == now + 15_000      # from the renewal, not the fetch
        # The original lock (15 s from the fetch) passes: a's records are not redelivered.
        broker.clock.advance(5_000)
        r = await call(broker, 78, 2, fetch(tid, "b", 0, max_records=10, mode=1))
        assert acquired(r) == [(2, 3, 1)] and sp.state_of(0) == (1, 1)
        # b cannot renew a's records; a renews with ShareAcquireMode 255 (-1 as an int8)
        r = await call(broker, 78, 2, renew_fetch(tid, "b", 1, [(0, 0, 4)]))
        assert r.responses[0].partitions[0].acknowledge_error_code == \
            errors.InvalidRecordStateError.code
        body = renew_fetch(tid, "a", 2, [(0, 1, 4)])
        body.is_renew_ack, body.share_acquire_mode = False, -1
        r = await call(broker, 78, 2, body)
        assert r.responses[0].partitions[0].acknowledge_error_code == 0 and acquired(r) == []
        # renewed 15 s after the fetch, for 15 s: due 30 s after it, not a millisecond before
        broker.clock.advance(14_999)
        r = await call(broker, 78, 2, fetch(tid, "b", 2, max_records=10, mode=1))
        assert acquired(r) == [] and sp.state_of(0) == (1, 1)
        broker.clock.advance(1)
        r = await call(broker, 78, 2, fetch(tid, "b", 3, max_records=10, mode=1))
        assert acquired(r) == [(0, 3, 2)]   # 0-1 from a (renewals counted no delivery), 2-3 again
        # version 1 has no RENEW: INVALID_REQUEST for the partition, nothing applied
        r = await call(broker, 78, 1, fetch(tid, "b", 4, max_records=0, acks=[(2, 3, 4)]))
        assert r.responses[0].partitions[0].acknowledge_error_code == errors.InvalidRequestError.code
        r = await call(broker, 79, 1, ack(tid, "b", 5, [(2, 3, [4])]))
        assert r.responses[0].partitions[0].error_code == errors.InvalidRequestError.code
        assert sp.state_of(2) == (1, 2)

    asyncio.run(go())
