"""pylog.client's consumer group protocol member (``group.protocol=consumer``) under the
errors the coordinator may answer, injected with ``pylog.testing.KafkaBroker.fail_next``:
a fenced or unknown member loses its partitions and joins again with the same member id,
a moved coordinator is found again without losing anything, and a commit answered
STALE_MEMBER_EPOCH fails with ``CommitFailedError``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pylog.client import CommitFailedError, Consumer, Producer, TopicPartition
from pylog.testing import KafkaBroker

CONFIG = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "1",
}
DEADLINE = 30.0


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    with KafkaBroker(CONFIG) as b:
        b.create_topic("faults", partitions=2)
        with Producer(bootstrap_servers=b.bootstrap_servers) as p:
            for i in range(20):
                p.send("faults", b"v%d" % i, partition=i % 2)
            p.flush(30)
        yield b


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_assigned(self, parts: list[TopicPartition]) -> None:
        self.events.append(("assigned", parts))

    def on_partitions_revoked(self, parts: list[TopicPartition]) -> None:
        self.events.append(("revoked", parts))

    def on_partitions_lost(self, parts: list[TopicPartition]) -> None:
        self.events.append(("lost", parts))


def member(broker: KafkaBroker, group: str, rec: Recorder) -> Consumer:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["faults"], listener=rec)
    poll_until(c, lambda: len(c.assignment()) == 2, "the member to own both partitions")
    return c


def poll_until(c: Consumer, cond: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        c.poll(0.1)
        if cond():
            return
    raise AssertionError(f"timed out waiting for {what}: {sorted(c.assignment())}")


BOTH = [TopicPartition("faults", 0), TopicPartition("faults", 1)]


@pytest.mark.parametrize("error", ["FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"])
def test_a_fenced_member_loses_its_partitions_and_joins_again(broker: KafkaBroker, error: str) -> None:
    rec = Recorder()
    group = f"fenced-{error}"
    with member(broker, group, rec) as c:
        member_id = c.consumer_group_metadata().member_id
        broker.fail_next("ConsumerGroupHeartbeat", error)
        poll_until(c, lambda: ("lost", BOTH) in rec.events, "the partitions to be lost")
        poll_until(c, lambda: len(c.assignment()) == 2 and c.consumer_group_metadata().generation_id > 0,
                   "the member to join again and get them back")
        # KIP-1082: the member id is the client's and survives the rejoin.
        assert c.consumer_group_metadata().member_id == member_id
        assert [k for k, _ in rec.events] == ["assigned", "lost", "assigned"], rec.events
        c.commit({BOTH[0]: 3})  # in the group again: commits go through
        assert c.committed([BOTH[0]])[BOTH[0]].offset == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                                   "COORDINATOR_LOAD_IN_PROGRESS"])
def test_coordinator_errors_lose_nothing(broker: KafkaBroker, error: str) -> None:
    rec = Recorder()
    group = f"moved-{error}"
    with member(broker, group, rec) as c:
        epoch = c.consumer_group_metadata().generation_id
        broker.fail_next("ConsumerGroupHeartbeat", error, count=2)
        time.sleep(0.1)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:  # heartbeats fail twice, then go on
            c.poll(0.1)
            assert len(c.assignment()) == 2
        assert [k for k, _ in rec.events] == ["assigned"], rec.events
        assert c.consumer_group_metadata().generation_id == epoch
        c.commit({BOTH[1]: 4})


def test_a_commit_answered_stale_member_epoch_fails(broker: KafkaBroker) -> None:
    rec = Recorder()
    with member(broker, "stale-commit", rec) as c:
        broker.fail_next("OffsetCommit", "STALE_MEMBER_EPOCH")
        with pytest.raises(CommitFailedError, match="stale member epoch"):
            c.commit({BOTH[0]: 2})
        c.commit({BOTH[0]: 2})
        assert c.committed([BOTH[0]])[BOTH[0]].offset == 2  # type: ignore[union-attr]


def test_an_unreleased_instance_id_is_fatal_until_subscribing_again(broker: KafkaBroker) -> None:
    from pylog import errors

    rec = Recorder()
    with member(broker, "unreleased", rec) as c:
        broker.fail_next("ConsumerGroupHeartbeat", "UNRELEASED_INSTANCE_ID")
        with pytest.raises(errors.UnreleasedInstanceIdError):
            poll_until(c, lambda: False, "the error")
        with pytest.raises(errors.UnreleasedInstanceIdError):  # and again, until...
            c.poll(0.1)
        c.subscribe(["faults"], listener=rec)  # ...a new subscription starts over
        poll_until(c, lambda: len(c.assignment()) == 2, "the member to join again")


def test_a_broker_without_the_protocol_is_a_clear_error() -> None:
    from pylog import errors

    with KafkaBroker({"group.coordinator.rebalance.protocols": "classic"}) as b:
        b.create_topic("classic-only")
        with Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g",
                       "group.protocol": "consumer"}) as c:
            c.subscribe(["classic-only"])
            with pytest.raises(errors.UnsupportedVersionError, match="set group.protocol=classic"):
                poll_until(c, lambda: False, "the error")


def test_a_classic_group_with_members_refuses_a_consumer_protocol_member_without_upgrades() -> None:
    from pylog import errors

    with KafkaBroker({**CONFIG, "group.consumer.migration.policy": "downgrade"}) as b:
        b.create_topic("faults", partitions=2)
        with Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "mixed",
                       "auto.offset.reset": "earliest"}) as classic:
            classic.subscribe(["faults"])
            poll_until(classic, lambda: len(classic.assignment()) == 2, "the classic member to join")
            with Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "mixed",
                           "group.protocol": "consumer"}) as c:
                c.subscribe(["faults"])
                with pytest.raises(errors.GroupIdNotFoundError, match="group.consumer.migration.policy"):
                    poll_until(c, lambda: False, "the error")


def test_a_full_group_refuses_another_member() -> None:
    from pylog import errors

    with KafkaBroker({**CONFIG, "group.consumer.max.size": "1"}) as b:
        b.create_topic("small")
        settings = {"bootstrap.servers": b.bootstrap_servers, "group.id": "g",
                    "group.protocol": "consumer"}
        with Consumer(settings) as first, Consumer(settings) as second:
            first.subscribe(["small"])
            poll_until(first, lambda: len(first.assignment()) == 1, "the first member to join")
            second.subscribe(["small"])
            with pytest.raises(errors.GroupMaxSizeReachedError, match="group.consumer.max.size"):
                poll_until(second, lambda: False, "the error")
            first.poll(0.1)
            assert len(first.assignment()) == 1
