"""Incremental fetch sessions (KIP-227): the session cache's rules, and the Fetch handler
opening, updating, answering and closing sessions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import logcore
from pylog import errors
from pylog._clock import ManualClock
from pylog.broker import handlers
from pylog.broker.fetch_sessions import CachedPartition, FetchSessionCache, next_epoch
from pylog.broker.server import Broker
from pylog.config import BrokerConfig
from pylog.protocol.messages import FetchRequest, ProduceRequest

T0 = 1_700_000_000_000
F = FetchRequest


# -- the cache -------------------------------------------------------------------------------

def _parts(n: int) -> dict[tuple[str, int], CachedPartition]:
    return {("t", i): CachedPartition(F.FetchPartition(partition=i)) for i in range(n)}


def test_epochs_count_from_one_and_wrap_past_int32_max() -> None:
    assert next_epoch(0) == 1 and next_epoch(1) == 2
    assert next_epoch(2**31 - 1) == 1


def test_a_full_cache_makes_room_as_kafka_does() -> None:
    clock = ManualClock(time_ms=T0)
    cache = FetchSessionCache(2, clock, eviction_ms=120_000)
    small = cache.create(False, _parts(2))
    big = cache.create(False, _parts(5))
    assert small and big and len(cache) == 2
    # A client session no larger than the smallest one finds no room.
    assert cache.create(False, _parts(2)) is None
    # A larger one takes the smallest client session's place.
    bigger = cache.create(False, _parts(3))
    assert bigger is not None and cache.get(small.id) is None and cache.evictions == 1
    # A follower's session may take any client session's place, the smallest first.
    follower = cache.create(True, _parts(1))
    assert follower is not None and cache.get(bigger.id) is None
    # Two followers' sessions: no client session left to evict, and neither is stale.
    assert cache.create(True, _parts(9)) is not None  # evicts `big`
    assert cache.create(True, _parts(9)) is None
    # Unused for the eviction time: any new session may take its place.
    clock.advance(121_000)
    assert cache.create(False, _parts(1)) is not None


def test_sessions_off_and_empty_fetches_make_no_session() -> None:
    clock = ManualClock(time_ms=T0)
    assert FetchSessionCache(0, clock).create(False, _parts(3)) is None
    assert FetchSessionCache(10, clock).create(False, {}) is None


# -- the handler -----------------------------------------------------------------------------

@pytest.fixture
def broker(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "num.partitions": "4",
                           "max.incremental.fetch.session.cache.slots": "4"})
    b = Broker(config, clock=ManualClock(time_ms=T0), allow_pure_python=True)
    b.log_manager.startup()
    yield b
    b.log_manager.shutdown()
    b.io.shutdown()


def _batch(n: int = 3) -> bytearray:
    b = logcore.BatchBuilder()
    for i in range(n):
        b.append(b"v%d" % i, timestamp_ms=T0)
    return bytearray(b.build())


def _produce(broker: Broker, parts: list[int]) -> None:
    R = ProduceRequest
    body = R(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.PartitionProduceData(index=p, records=_batch())
                                  for p in parts])])
    resp = asyncio.run(handlers.dispatch(handlers.RequestContext(broker, 0, 9, 1, "t", "x:1"), body))
    assert all(p.error_code == 0 for t in resp.responses for p in t.partition_responses)


def _fetch(broker: Broker, session_id: int, epoch: int, offsets: dict[int, int],
           forget: list[int] = (), max_wait_ms: int = 0, version: int = 12) -> Any:
    body = F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=session_id, session_epoch=epoch,
             topics=[F.FetchTopic(topic="t", partitions=[
                 F.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                 for p, o in offsets.items()])] if offsets else [],
             forgotten_topics_data=[F.ForgottenTopic(topic="t", partitions=list(forget))]
             if forget else [], rack_id="")
    ctx = handlers.RequestContext(broker, 1, version, 2, "test", "127.0.0.1:1")
    return asyncio.run(asyncio.wait_for(handlers.dispatch(ctx, body), 10))


def _answered(resp: Any) -> dict[int, tuple[int, int, bool]]:
    return {p.partition_index: (p.error_code, p.high_watermark,
                                not isinstance(p.records, (bytes, bytearray)) or len(p.records) > 0)
            for t in resp.responses for p in t.partitions}


def test_a_session_answers_only_what_changed(broker) -> None:
    _produce(broker, [0, 1, 2, 3])  # offsets 0-2 everywhere
    full = _fetch(broker, 0, 0, {0: 3, 1: 3, 2: 3, 3: 0})
    assert full.error_code == 0 and full.session_id > 0
    assert _answered(full) == {0: (0, 3, False), 1: (0, 3, False), 2: (0, 3, False),
                               3: (0, 3, True)}
    sid = full.session_id
    # Nothing new, nothing changed: an empty answer (partition 3's offset moves on).
    idle = _fetch(broker, sid, 1, {3: 3})
    assert (idle.error_code, idle.session_id, _answered(idle)) == (0, sid, {})
    # New records on partition 1 only: its offset is unchanged in the session, so the
    # request names nothing and the answer holds partition 1 alone.
    _produce(broker, [1])
    news = _fetch(broker, sid, 2, {})
    assert _answered(news) == {1: (0, 6, True)}
    # Forget partition 2: records there no longer show.
    _produce(broker, [2])
    after_forget = _fetch(broker, sid, 3, {1: 6}, forget=[2])
    assert _answered(after_forget) == {}
    # A long poll over the session wakes on an append to one of its partitions.
    async def wait_then_append() -> Any:
        loop = asyncio.get_running_loop()
        body = F(replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=sid, session_epoch=4, topics=[],
                 forgotten_topics_data=[], rack_id="")
        ctx = handlers.RequestContext(broker, 1, 12, 3, "test", "127.0.0.1:1")
        task = loop.create_task(handlers.dispatch(ctx, body))
        await asyncio.sleep(0.05)
        assert not task.done()
        R = ProduceRequest
        await handlers.dispatch(handlers.RequestContext(broker, 0, 9, 4, "t", "x:1"), R(
            transactional_id=None, acks=1, timeout_ms=1000, topic_data=[R.TopicProduceData(
                name="t", partition_data=[R.PartitionProduceData(index=0, records=_batch())])]))
        return await asyncio.wait_for(task, 5)
    woken = asyncio.run(wait_then_append())
    assert _answered(woken) == {0: (0, 6, True)}


def test_session_errors_and_closing(broker) -> None:
    _produce(broker, [0])
    sid = _fetch(broker, 0, 0, {0: 0, 1: 0}).session_id
    assert sid > 0
    wrong = _fetch(broker, sid, 7, {})
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (
        errors.InvalidFetchSessionEpochError.code, 0, [])
    # A refused epoch does not move the session on: epoch 1 is still the one expected.
    assert _fetch(broker, sid, 1, {}).error_code == 0
    unknown = _fetch(broker, sid + 1, 1, {})
    assert unknown.error_code == errors.FetchSessionIdNotFoundError.code
    # Epoch -1 closes the session and answers in full without one.
    closing = _fetch(broker, sid, -1, {0: 0})
    assert closing.error_code == 0 and closing.session_id == 0 and 0 in _answered(closing)
    assert _fetch(broker, sid, 2, {}).error_code == errors.FetchSessionIdNotFoundError.code


def test_sessionless_fetches_get_no_session(broker) -> None:
    _produce(broker, [0])
    assert _fetch(broker, 0, -1, {0: 0}).session_id == 0
    assert _fetch(broker, 0, 0, {0: 0}, version=6).session_id == 0  # before v7
    assert len(broker.fetch_sessions) == 0


def test_an_error_partition_is_always_answered(broker) -> None:
    _produce(broker, [0])
    sid = _fetch(broker, 0, 0, {0: 0}).session_id
    # Offset 50 is past the log end: OFFSET_OUT_OF_RANGE on every fetch until it is fixed.
    for epoch in (1, 2):
        resp = _fetch(broker, sid, epoch, {0: 50} if epoch == 1 else {})
        assert _answered(resp)[0][0] == errors.OffsetOutOfRangeError.code


def test_a_full_answer_sends_its_partitions_to_the_back(broker) -> None:
    """max_bytes 1: only the first partition in session order gets a batch (KIP-74); an
    answer that fills max_bytes sends the partitions it carried to the back, so the one
    left out is served next."""
    _produce(broker, [0, 1])
    sid = _fetch(broker, 0, 0, {0: 3, 1: 3}).session_id  # both at their end: idle
    _produce(broker, [0, 1])

    def small(epoch: int) -> dict[int, tuple[int, int, bool]]:
        body = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1, isolation_level=0,
                 session_id=sid, session_epoch=epoch, topics=[], forgotten_topics_data=[],
                 rack_id="")
        ctx = handlers.RequestContext(broker, 1, 12, 2, "test", "127.0.0.1:1")
        return _answered(asyncio.run(handlers.dispatch(ctx, body)))
    # Both have a new high watermark (both answered, both sent back in the same order);
    # only partition 0 gets records.
    assert small(1) == {0: (0, 6, True), 1: (0, 6, False)}
    # The positions did not move (the request named none): partition 0 gets the one batch
    # again, partition 1 has nothing new to say; 0 goes to the back.
    assert small(2) == {0: (0, 6, True)}
    assert list(broker.fetch_sessions.get(sid).partitions) == [("t", 1), ("t", 0)]
    # Now partition 1 comes first and takes the batch.
    assert small(3) == {1: (0, 6, True)}
