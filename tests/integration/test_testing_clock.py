"""pylog.testing's virtual clock: each time-based behaviour of the broker that follows it
fires on ``advance()`` and not before (group session timeouts, the initial rebalance delay,
transaction timeouts, retention, segment.ms rolls, offsets retention)."""

from __future__ import annotations

import concurrent.futures
import os
import time
from typing import Any

import pytest
from _harness.wire import BrokerConnection
from confluent_kafka import KafkaException, Producer

from pylog.client import Admin, TopicPartition
from pylog.protocol.messages import FindCoordinatorRequest, JoinGroupRequest, SyncGroupRequest
from pylog.testing import KafkaBroker

pytestmark = pytest.mark.integration

CONF = {"broker.address.family": "v4"}


def _connect(broker: KafkaBroker) -> BrokerConnection:
    host, port = broker.bootstrap_servers.split(":")
    return BrokerConnection(host, int(port), timeout=20)


def _until(what: str, fn: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.02)


def _join(broker: KafkaBroker, group: str, session_ms: int) -> Any:
    """A member that joins and syncs, then never heartbeats (JoinGroup v3: no member id
    round trip); returns the JoinGroup response."""
    with _connect(broker) as c:
        _until("the coordinator", lambda: c.request(FindCoordinatorRequest(key=group),
                                                    version=1).error_code == 0)

        def join() -> Any:
            r = c.request(JoinGroupRequest(
                group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=300_000,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
                version=3)
            return r if r.error_code == 0 else None

        joined = _until("JoinGroup", join)
        sync = c.request(SyncGroupRequest(group_id=group, generation_id=joined.generation_id,
                                          member_id=joined.member_id), version=2)
        assert sync.error_code == 0
        return joined


def _describe(broker: KafkaBroker, group: str) -> Any:
    with Admin(bootstrap_servers=broker.bootstrap_servers) as admin:
        return admin.describe_groups([group])[group]


def test_a_silent_member_is_expired_on_advance_past_its_session_timeout() -> None:
    with KafkaBroker(clock="virtual") as broker:
        joined = _join(broker, "g", session_ms=10_000)
        assert [m.member_id for m in _describe(broker, "g").members] == [joined.member_id]
        broker.advance(9)
        assert len(_describe(broker, "g").members) == 1
        broker.advance(2)
        group = _describe(broker, "g")
        assert group.members == [] and group.state == "Empty"


def test_the_initial_rebalance_delay_ends_on_advance() -> None:
    with KafkaBroker(clock="virtual", group_initial_rebalance_delay_ms=60_000) as broker:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(_join, broker, "slow", 30_000)
            _until("the join parked", lambda: _describe(broker, "slow").state == "PreparingRebalance")
            assert not fut.done()
            broker.advance(61)
            assert fut.result(timeout=20).error_code == 0
        assert _describe(broker, "slow").state == "Stable"


def test_an_open_transaction_is_aborted_on_advance_past_its_timeout() -> None:
    with KafkaBroker(clock="virtual") as broker:
        broker.create_topic("tx")
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "t1",
                      "transaction.timeout.ms": 60_000, **CONF})
        p.init_transactions(20)
        p.begin_transaction()
        p.produce("tx", value=b"never committed")
        assert p.flush(20) == 0
        log = broker.broker.log_manager.topics["tx"].partitions[0].log
        assert log.log_end_offset == 1
        # The coordinator looks for timed-out transactions every
        # transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s).
        broker.advance(75)
        _until("the abort marker", lambda: log.log_end_offset == 2)
        with pytest.raises(KafkaException):
            p.commit_transaction(10)
        assert "aborting" in broker.log_text().lower() or log.log_end_offset == 2


def _produce(broker: KafkaBroker, topic: str, value: bytes) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, **CONF})
    p.produce(topic, value=value)
    assert p.flush(20) == 0


def _segments(broker: KafkaBroker, topic: str) -> int:
    directory = os.path.join(broker.data_dir or "", f"{topic}-0")
    return sum(1 for f in os.listdir(directory) if f.endswith(".log"))


# segment.ms compares the timestamps of the records (Kafka's LogSegment.shouldRoll): they
# follow the virtual clock when the broker stamps them (LogAppendTime), not when a client
# stamps them with its real clock (CreateTime).
LOG_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}


def test_segment_ms_rolls_at_the_next_append_after_advance() -> None:
    with KafkaBroker(clock="virtual") as broker:
        broker.create_topic("rolls", config={"segment.ms": 60_000, **LOG_APPEND_TIME})
        _produce(broker, "rolls", b"a")
        _produce(broker, "rolls", b"b")
        assert _segments(broker, "rolls") == 1
        broker.advance(61)
        _produce(broker, "rolls", b"c")
        assert _segments(broker, "rolls") == 2


def test_retention_deletes_expired_segments_on_advance() -> None:
    with KafkaBroker(clock="virtual") as broker:
        broker.create_topic("old", config={"retention.ms": 60_000, "segment.ms": 60_000,
                                           **LOG_APPEND_TIME})
        _produce(broker, "old", b"expires")
        broker.advance(61)
        _produce(broker, "old", b"stays")  # rolls: the first segment is no longer active
        broker.advance(120)  # past retention.ms, not yet log.retention.check.interval.ms
        assert [r.value for r in broker.records("old")] == [b"expires", b"stays"]
        broker.advance(200)  # the retention check (every 300 s) has run
        assert [r.value for r in broker.records("old")] == [b"stays"]
        assert broker.broker.log_manager.topics["old"].partitions[0].log.log_start_offset == 1


def test_committed_offsets_expire_on_advance() -> None:
    with KafkaBroker(clock="virtual", offsets_retention_minutes=1,
                     offsets_retention_check_interval_ms=1000) as broker:
        broker.create_topic("t")
        tp = TopicPartition("t", 0)
        with Admin(bootstrap_servers=broker.bootstrap_servers) as admin:
            admin.alter_group_offsets("idle", {tp: 5})
            assert admin.list_group_offsets("idle")[tp].offset == 5
            broker.advance(50)
            assert admin.list_group_offsets("idle")[tp].offset == 5
            broker.advance(15)
            assert admin.list_group_offsets("idle", [tp])[tp] is None


def test_virtual_time_survives_a_restart_and_advance_still_works() -> None:
    with KafkaBroker(clock="virtual", offsets_retention_minutes=1,
                     offsets_retention_check_interval_ms=1000) as broker:
        broker.create_topic("t")
        broker.advance(30)
        before = broker.clock.time_ms()
        broker.restart()
        assert broker.clock.time_ms() == before
        tp = TopicPartition("t", 0)
        with Admin(bootstrap_servers=broker.bootstrap_servers) as admin:
            admin.alter_group_offsets("idle", {tp: 5})
            broker.advance(65)  # the restarted broker's own timers fire
            assert admin.list_group_offsets("idle", [tp])[tp] is None
        assert broker.clock.pending > 0
        broker.stop()
        assert broker.clock.pending == 0  # a stopped broker's timers are dropped
