"""pylog.client's consumer groups (issue 8) against a real broker: subscribe through the
classic group protocol with each assignor, commits and committed offsets, rebalance
callbacks, mixed groups with confluent-kafka, pattern subscriptions, restarts.

The broker runs with ``group.initial.rebalance.delay.ms=0`` and a lowered
``group.min.session.timeout.ms`` so that members can use short session timeouts.
"""

from __future__ import annotations

import asyncio
import collections
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from pylog import errors
from pylog.client import (
    Admin,
    CommitFailedError,
    Consumer,
    IllegalStateError,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
    aio,
)
from tests.integration.conftest import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import confluent_kafka
    import kafka

GROUP_OVERRIDES = {
    "auto.create.topics.enable": "true",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
}
PARTITIONS = 6
DEADLINE = 45.0
MEMBER = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"}


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("cgroups") / "data"
    data.mkdir()
    b = BrokerProcess(data, GROUP_OVERRIDES).start()
    yield b
    rc = b.stop()
    assert rc == 0, f"broker exited with {rc}; log:\n{b.read_log()}"


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions)])


def produce(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS, start: int = 0) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        for i in range(start, start + n):
            p.send(topic, b"v%d" % i, key=b"%d" % i, partition=i % partitions)
        p.flush(30)


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE,
             state: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f": {state()}" if state else ""))


class Member:
    """A pylog group consumer polling in its own thread, committing after every batch.

    ``consumed`` counts each record (topic, partition, offset) it was handed;
    ``uncommitted`` holds the records of batches whose commit failed (a rebalance got in
    between): only those may be handed to another member again.
    """

    def __init__(self, bootstrap: str, group: str, topics: Any, assignor: str = "range",
                 commit: bool = True, **conf: Any) -> None:
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, **MEMBER,
                     "partition.assignment.strategy": assignor, "enable.auto.commit": False, **conf}
        self.topics = topics
        self.commit = commit
        self.assignment: frozenset[TopicPartition] = frozenset()
        self.consumed: list[tuple[str, int, int]] = []
        self.uncommitted: set[tuple[str, int, int]] = set()
        self.events: list[tuple[str, list[TopicPartition]]] = []
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))

    def _run(self) -> None:
        try:
            c = Consumer(self.conf)
            try:
                c.subscribe(self.topics, listener=self)
                while not self.stop.is_set():
                    if self.paused.is_set():
                        time.sleep(0.05)
                        continue
                    batch = c.poll(0.2)
                    self.assignment = frozenset(c.assignment())
                    self.consumed += [(r.topic, r.partition, r.offset) for r in batch]
                    if batch and self.commit:
                        try:
                            c.commit()
                        except (CommitFailedError, errors.RebalanceInProgressError):
                            self.uncommitted |= {(r.topic, r.partition, r.offset) for r in batch}
            finally:
                c.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            self.error = exc

    def close(self) -> None:
        self.stop.set()
        self.thread.join(DEADLINE)
        assert not self.thread.is_alive(), "member did not stop"
        if self.error is not None:
            raise self.error


def balanced(members: list[Any], partitions: int = PARTITIONS) -> bool:
    for m in members:
        if m.error is not None:
            raise m.error
    sets = [m.assignment for m in members]
    if any(not s for s in sets):
        return False
    return len(frozenset().union(*sets)) == partitions and sum(len(s) for s in sets) == partitions


ASSIGNORS = ["range", "roundrobin", "cooperative-sticky"]


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_three_members_share_six_partitions_and_no_record_is_lost_or_repeated(
        gbroker: BrokerProcess, topic_name: str, assignor: str) -> None:
    create_topic(gbroker.bootstrap, topic_name)
    n = 600
    produce(gbroker.bootstrap, topic_name, n // 2)
    group = f"g-{topic_name}"
    members: list[Member] = []
    try:
        for _ in range(3):  # one at a time: each join is a rebalance
            members.append(Member(gbroker.bootstrap, group, [topic_name], assignor))
            wait_for(lambda: balanced(members), f"{len(members)} members to share 6 partitions",
                     state=lambda: [sorted(p for _, p in m.assignment) for m in members])
        time.sleep(1.0)  # stays so: no member keeps rebalancing
        assert balanced(members) and all(len(m.assignment) == 2 for m in members), \
            [sorted(p for _, p in m.assignment) for m in members]
        produce(gbroker.bootstrap, topic_name, n // 2, start=n // 2)
        # One member leaves (LeaveGroup on close): its partitions move to the other two.
        leaver = members.pop()
        wait_for(lambda: len(leaver.consumed) > 0, "the leaver to consume something")
        leaver.close()
        members.append(leaver)  # its records count
        wait_for(lambda: balanced(members[:2]), "2 members to take over the leaver's partitions",
                 state=lambda: [sorted(p for _, p in m.assignment) for m in members[:2]])
        wait_for(lambda: len({r for m in members for r in m.consumed}) >= n, f"all {n} records",
                 state=lambda: len({r for m in members for r in m.consumed}))
        time.sleep(0.5)
    finally:
        for m in members:
            m.close()
    counts = collections.Counter(r for m in members for r in m.consumed)
    assert set(counts) == {(topic_name, i % PARTITIONS, i // PARTITIONS) for i in range(n)}
    repeated = {r for r, c in counts.items() if c > 1}
    allowed = set().union(*(m.uncommitted for m in members))
    assert repeated <= allowed, f"records repeated although committed: {sorted(repeated - allowed)[:10]}"
    # Callbacks: every member was told of each assignment it got.
    for m in members:
        assert any(kind == "assigned" and parts for kind, parts in m.events), m.events


def test_cooperative_members_keep_their_partitions_when_one_joins(gbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(gbroker.bootstrap, topic_name)
    group = f"g-{topic_name}"
    members = [Member(gbroker.bootstrap, group, [topic_name], "cooperative-sticky")]
    try:
        wait_for(lambda: balanced(members), "the first member to get everything")
        members.append(Member(gbroker.bootstrap, group, [topic_name], "cooperative-sticky"))
        wait_for(lambda: balanced(members), "two members to share",
                 state=lambda: [sorted(p for _, p in m.assignment) for m in members])
        first = members[0]
        # Incremental: the first member never gave up all partitions; it revoked only the
        # three that moved (and was not told of a full revocation).
        revoked = [parts for kind, parts in first.events if kind == "revoked"]
        assert revoked and all(len(parts) == 3 for parts in revoked), first.events
        kept = set(first.assignment)
        assert len(kept) == 3 and kept <= {TopicPartition(topic_name, p) for p in range(6)}
    finally:
        for m in members:
            m.close()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("pylog_first", [True, False], ids=["pylog-leader", "confluent-leader"])
def test_pylog_and_confluent_members_share_a_group(gbroker: BrokerProcess, topic_name: str,
                                                   pylog_first: bool, assignor: str) -> None:
    create_topic(gbroker.bootstrap, topic_name)
    group = f"g-{topic_name}"
    stop = threading.Event()
    confluent_assignment: list[frozenset[int]] = [frozenset()]
    failure: list[BaseException] = []

    def confluent_member() -> None:
        try:
            c = confluent_kafka.Consumer({
                "bootstrap.servers": gbroker.bootstrap, "group.id": group, "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500, "partition.assignment.strategy": assignor,
                "enable.auto.commit": False})
            c.subscribe([topic_name])
            try:
                while not stop.is_set():
                    c.poll(0.05)
                    confluent_assignment[0] = frozenset(tp.partition for tp in c.assignment())
            finally:
                c.close()
        except BaseException as exc:  # noqa: BLE001
            failure.append(exc)

    thread = threading.Thread(target=confluent_member, daemon=True)
    member: Member | None = None
    try:
        if pylog_first:
            member = Member(gbroker.bootstrap, group, [topic_name], assignor)
            wait_for(lambda: len(member.assignment) == 6, "the pylog member alone")  # type: ignore[union-attr]
            thread.start()
        else:
            thread.start()
            wait_for(lambda: len(confluent_assignment[0]) == 6, "the confluent member alone")
            member = Member(gbroker.bootstrap, group, [topic_name], assignor)

        def shared() -> bool:
            if failure:
                raise failure[0]
            mine = {p for _, p in member.assignment}  # type: ignore[union-attr]
            theirs = confluent_assignment[0]
            return len(mine) == 3 and len(theirs) == 3 and not mine & theirs

        wait_for(shared, "a pylog and a confluent member to share 6 partitions",
                 state=lambda: (sorted(p for _, p in member.assignment), sorted(confluent_assignment[0])))  # type: ignore[union-attr]
        if assignor == "range":
            # Range over member ids: the two halves are the consecutive ranges 0-2 and 3-5.
            assert {frozenset({0, 1, 2}), frozenset({3, 4, 5})} == {
                frozenset(p for _, p in member.assignment), confluent_assignment[0]}
        else:
            # Incremental: the first member revoked only the partitions that moved.
            first_events = member.events if pylog_first else None
            if first_events is not None:
                revoked = [parts for kind, parts in first_events if kind == "revoked"]
                assert revoked and all(len(parts) == 3 for parts in revoked), first_events
    finally:
        stop.set()
        if member is not None:
            member.close()
        if thread.is_alive() or thread.ident:
            thread.join(DEADLINE)


# --------------------------------------------------------------------------- offsets


def consume(bootstrap: str, group: str, topic: str, n: int, *, commit: bool = True,
            metadata: str = "", **conf: Any) -> list[int]:
    """Subscribe, read ``n`` records of a one-partition topic, commit, close."""
    got: list[int] = []
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group, **MEMBER,
                   "enable.auto.commit": False, **conf}) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + DEADLINE
        while len(got) < n and time.monotonic() < deadline:
            for r in c.poll(0.5, max_records=n - len(got)):
                got.append(r.offset)
        if commit and got:
            c.commit({TopicPartition(topic, 0): OffsetAndMetadata(got[-1] + 1, metadata)})
    return got


def test_committed_offsets_resume_after_consumer_restart(gbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(gbroker.bootstrap, topic_name, 1)
    produce(gbroker.bootstrap, topic_name, 30, 1)
    group = f"g-{topic_name}"
    assert consume(gbroker.bootstrap, group, topic_name, 10, metadata="batch-1") == list(range(10))
    assert consume(gbroker.bootstrap, group, topic_name, 10) == list(range(10, 20))
    tp = TopicPartition(topic_name, 0)
    with Consumer(bootstrap_servers=gbroker.bootstrap, group_id=group) as c:
        assert c.committed([tp]) == {tp: OffsetAndMetadata(20, "", -1)}
        c.commit({tp: (25, "meta ✓")})  # assign()-free simple commit: generation -1
        assert c.committed(tp)[tp] == OffsetAndMetadata(25, "meta ✓", -1)
    # kafka-python reads what pylog committed, and pylog what kafka-python committed.
    kp = kafka.KafkaConsumer(bootstrap_servers=gbroker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        got = kp.committed(kafka.TopicPartition(topic_name, 0), metadata=True)
        assert (got.offset, got.metadata) == (25, "meta ✓")
        kp.commit({kafka.TopicPartition(topic_name, 0): kafka.OffsetAndMetadata(27, "from kafka-python", -1)})
    finally:
        kp.close()
    with Consumer(bootstrap_servers=gbroker.bootstrap, group_id=group) as c:
        assert c.committed([tp])[tp][:2] == (27, "from kafka-python")
        assert c.committed([TopicPartition(topic_name + "-none", 0)], timeout=10) == {
            TopicPartition(topic_name + "-none", 0): None}
    # With assign() and a group.id, positions also start from the committed offset.
    with Consumer(bootstrap_servers=gbroker.bootstrap, group_id=group, enable_auto_commit=False) as c:
        c.assign([tp])
        assert c.position(tp) == 27


def test_auto_commit_on_close_and_on_interval(gbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(gbroker.bootstrap, topic_name, 1)
    produce(gbroker.bootstrap, topic_name, 40, 1)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    # Auto commit on close (the default enable.auto.commit=true).
    with Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": group, **MEMBER}) as c:
        c.subscribe([topic_name])
        got: list[int] = []
        while len(got) < 15:
            got += [r.offset for r in c.poll(1.0, max_records=15 - len(got))]
    assert consume(gbroker.bootstrap, group, topic_name, 5, commit=False) == list(range(15, 20))
    # ... and from poll every auto.commit.interval.ms.
    with Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": group, **MEMBER,
                   "auto.commit.interval.ms": 200}) as c:
        c.subscribe([topic_name])
        got = []
        while len(got) < 10:
            got += [r.offset for r in c.poll(1.0, max_records=10 - len(got))]
        assert got == list(range(15, 25))

        def committed_25() -> bool:
            c.poll(0.1)  # auto commit runs from poll
            found = c.committed([tp])[tp]
            return found is not None and found.offset >= 25

        wait_for(committed_25, "an auto commit from poll")


def test_commit_fails_after_the_member_left_for_exceeding_max_poll_interval(
        gbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(gbroker.bootstrap, topic_name, 2)
    produce(gbroker.bootstrap, topic_name, 20, 2)
    group = f"g-{topic_name}"
    lost: list[list[TopicPartition]] = []
    c = Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": group, **MEMBER,
                  "enable.auto.commit": False, "max.poll.interval.ms": 1500})
    try:
        c.subscribe([topic_name], on_lost=lambda consumer, parts: lost.append(parts),
                    on_revoke=lambda consumer, parts: None)
        got: list[Any] = []
        while not got:
            got = c.poll(1.0)
        time.sleep(4)  # no poll for longer than max.poll.interval.ms: the member leaves
        with pytest.raises(CommitFailedError, match="max.poll.interval.ms"):
            c.commit()
        # The next poll rejoins; the partitions it held were lost (the generation is gone).
        deadline = time.monotonic() + DEADLINE
        while not lost and time.monotonic() < deadline:
            c.poll(0.5)
        assert lost and set(lost[0]) == {TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)}
        wait_for(lambda: (c.poll(0.1), len(c.assignment()))[1] == 2, "the member to rejoin")
        c.commit()
    finally:
        c.close()


def test_committed_offsets_survive_broker_restart_with_a_live_member(
        new_broker: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = new_broker(GROUP_OVERRIDES).start()
    create_topic(b.bootstrap, topic_name, 1)
    produce(b.bootstrap, topic_name, 30, 1)
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    with Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, **MEMBER,
                   "enable.auto.commit": False}) as c:
        c.subscribe([topic_name])
        got: list[int] = []
        while len(got) < 10:
            got += [r.offset for r in c.poll(1.0, max_records=10 - len(got))]
        c.commit(message=c.poll(5.0, max_records=1)[0])  # offset 10 consumed: commit 11
        b.stop(sig=signal.SIGKILL)
        b.start()
        # The member finds the coordinator again (it lost the connection) and goes on.
        more: list[int] = []
        deadline = time.monotonic() + DEADLINE
        while len(more) < 5 and time.monotonic() < deadline:
            more += [r.offset for r in c.poll(0.5, max_records=5 - len(more))]
        assert more == list(range(11, 16))
        wait_for(lambda: _try_commit(c), "a commit after the restart")
    assert consume(b.bootstrap, group, topic_name, 5, commit=False) == list(range(16, 21))
    with Consumer(bootstrap_servers=b.bootstrap, group_id=group) as c2:
        assert c2.committed([tp])[tp].offset == 16


def _try_commit(c: Consumer) -> bool:
    try:
        c.commit(timeout=5)
        return True
    except (CommitFailedError, errors.RebalanceInProgressError):
        c.poll(0.2)  # finish the rebalance the restart caused
        return False


# --------------------------------------------------------------------------- subscriptions


def test_pattern_subscription_picks_up_a_topic_created_later(gbroker: BrokerProcess, topic_name: str) -> None:
    prefix = f"pat-{topic_name[-6:]}"
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topic(gbroker.bootstrap, first, 2)
    create_topic(gbroker.bootstrap, f"x{prefix}-c", 1)  # does not match
    produce(gbroker.bootstrap, first, 4, 2)
    seen: set[str] = set()
    with Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": f"g-{prefix}", **MEMBER,
                   "metadata.max.age.ms": 500}) as c:
        c.subscribe(pattern=f"{prefix}-.*")
        wait_for(lambda: (seen.update(r.topic for r in c.poll(0.2)), first in seen)[1], "the first topic")
        assert c.subscription() == {first}
        create_topic(gbroker.bootstrap, later, 3)
        produce(gbroker.bootstrap, later, 3, 3)
        wait_for(lambda: (seen.update(r.topic for r in c.poll(0.2)), later in seen)[1], "the later topic")
        assert c.subscription() == {first, later}
        assert {tp.topic for tp in c.assignment()} == {first, later} and len(c.assignment()) == 5
        # Switching between a list and a pattern needs unsubscribe(), as in Kafka.
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            c.subscribe([first])
        c.unsubscribe()
        assert c.assignment() == set()
        c.subscribe([first])
        wait_for(lambda: (c.poll(0.2), len(c.assignment()) == 2)[1], "the list subscription")


def test_group_calls_need_a_group_id_and_exclude_assign(gbroker: BrokerProcess, topic_name: str) -> None:
    with Consumer(bootstrap_servers=gbroker.bootstrap) as c:
        with pytest.raises(errors.InvalidGroupIdError, match="group.id"):
            c.subscribe([topic_name])
        with pytest.raises(errors.InvalidGroupIdError, match="group.id"):
            c.commit({(topic_name, 0): 1})
    with Consumer(bootstrap_servers=gbroker.bootstrap, group_id="g") as c:
        c.assign([(topic_name, 0)])
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            c.subscribe([topic_name])
        with pytest.raises(TypeError, match="needs topics"):
            c.subscribe()


def test_asyncio_consumer_group_with_async_callbacks(gbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(gbroker.bootstrap, topic_name, 4)
    produce(gbroker.bootstrap, topic_name, 40, 4)
    group = f"g-{topic_name}"

    async def go() -> None:
        events: list[tuple[str, int]] = []

        async def on_assign(consumer: aio.Consumer, parts: list[TopicPartition]) -> None:
            await asyncio.sleep(0)
            events.append(("assign", len(parts)))

        def on_revoke(consumer: aio.Consumer, parts: list[TopicPartition]) -> None:
            events.append(("revoke", len(parts)))

        conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": group, **MEMBER,
                "enable.auto.commit": False}
        async with aio.Consumer(conf) as a, aio.Consumer(conf) as b:
            await a.subscribe([topic_name], on_assign=on_assign, on_revoke=on_revoke)
            got: list[Any] = []
            while len(got) < 40:
                got += await a.poll(0.5)
            await a.commit()
            task = await a.commit({(topic_name, 0): 10}, asynchronous=True)
            assert (await task)[TopicPartition(topic_name, 0)].offset == 10
            await b.subscribe([topic_name])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE
            while loop.time() < deadline and not (len(a.assignment()) == 2 and len(b.assignment()) == 2):
                await asyncio.gather(a.poll(0.2), b.poll(0.2))
            assert len(a.assignment()) == 2 and len(b.assignment()) == 2
            assert ("assign", 4) in events and ("revoke", 4) in events and events[-1] == ("assign", 2)
            committed = await b.committed([(topic_name, p) for p in range(4)])
            assert [committed[TopicPartition(topic_name, p)].offset for p in range(4)] == [10, 10, 10, 10]

    asyncio.run(asyncio.wait_for(go(), 120))


def test_a_static_member_rejoins_without_a_rebalance(gbroker: BrokerProcess, topic_name: str) -> None:
    create_topic(gbroker.bootstrap, topic_name)
    group = f"g-{topic_name}"
    other = Member(gbroker.bootstrap, group, [topic_name], "range", **{"group.instance.id": "b"})
    conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": group, **MEMBER,
            "partition.assignment.strategy": "range", "group.instance.id": "a"}
    a = Consumer(conf)
    try:
        a.subscribe([topic_name])
        wait_for(lambda: (a.poll(0.1), len(a.assignment()) == 3)[1] and len(other.assignment) == 3,
                 "two static members to share the topic")
        owned = a.assignment()
        before = list(other.events)
        # A static member's close sends no LeaveGroup: the same instance id comes back with a
        # new member id within the session timeout and gets the same partitions, and the
        # other member sees no rebalance.
        a.close()
        a = Consumer(conf)
        a.subscribe([topic_name])
        wait_for(lambda: (a.poll(0.1), a.assignment() == owned)[1], "the returning static member's partitions")
        time.sleep(1.0)
        assert other.events == before and other.error is None, other.events
    finally:
        a.close()
        other.close()


def test_a_revoke_callback_commits_what_was_consumed(gbroker: BrokerProcess, topic_name: str) -> None:
    """Kafka's manual-commit pattern: commit in on_partitions_revoked (the callback runs on
    the polling thread and may call the consumer); the next owner starts exactly there."""
    create_topic(gbroker.bootstrap, topic_name, 2)
    produce(gbroker.bootstrap, topic_name, 400, 2)
    group = f"g-{topic_name}"
    conf = {"bootstrap.servers": gbroker.bootstrap, "group.id": group, **MEMBER, "enable.auto.commit": False}
    a = Consumer(conf)
    revoked_at: dict[TopicPartition, int] = {}

    class CommitOnRevoke:
        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                revoked_at[tp] = a.position(tp)
            a.commit()

        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            pass

    b = None
    try:
        a.subscribe([topic_name], listener=CommitOnRevoke())
        got: list[Any] = []
        while len(got) < 15:
            got += a.poll(1.0, max_records=15 - len(got))
        b = Member(gbroker.bootstrap, group, [topic_name], commit=False)
        wait_for(lambda: (a.poll(0.1, max_records=1), len(a.assignment()) == 1)[1] and len(b.assignment) == 1,
                 "the second member to take a partition")
        assert set(revoked_at) == {TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)}
        moved = next(iter(b.assignment))
        wait_for(lambda: any((t, p) == moved for t, p, _ in b.consumed), "the new owner to read")
        first = min(o for t, p, o in b.consumed if (t, p) == moved)
        assert first == revoked_at[moved]  # no gap, no repeat
    finally:
        a.close()
        if b is not None:
            b.close()
